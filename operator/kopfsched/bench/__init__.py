"""`kopfsched bench`: the scheduler core measured in-process (no API server, no HTTP)."""
