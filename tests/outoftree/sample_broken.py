"""A plugin module that fails at import, as a package with a missing dependency would."""

raise ImportError("No module named 'somedependency'")
