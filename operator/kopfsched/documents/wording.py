"""How every input problem is worded, in every subcommand: one line that names the file, the
document (1-based; `item N` for a List's items) and, when there is one, the object."""

from __future__ import annotations

from typing import Any

# JSON Schema's type names, as the profile checks (config/schema.py) and the API server say them.
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "integer", float: "number",
               bool: "boolean", type(None): "null"}


def problem_line(where: str, label: str | None, message: str) -> str:
    """The one line every input problem is reported as: `file: document N: Kind/ns/name: message`."""
    return f"{where}: {label}: {message}" if label else f"{where}: {message}"


UNNAMED_KINDS = frozenset({"KubeSchedulerConfiguration"})
"""Kinds whose objects have no metadata.name."""


def object_label(obj: Any) -> str | None:
    """`Kind/namespace/name`, `Kind/name`, or what is known of it; None for a non-object."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("kind")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    kind_text = kind if isinstance(kind, str) and kind else "?"
    if kind in UNNAMED_KINDS and not name:
        return kind_text  # a configuration file has no metadata: `KubeSchedulerConfiguration`, not `.../?`
    name_text = name if isinstance(name, str) and name else "?"
    return f"{kind_text}/{ns}/{name_text}" if isinstance(ns, str) and ns else f"{kind_text}/{name_text}"


def describe_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)
