"""A CustomResourceDefinition's openAPIV3Schema as plain JSON Schema, for jsonschema."""

from __future__ import annotations

import copy
from typing import Any


def crd_json_schema(crd: dict[str, Any]) -> dict[str, Any]:
    """The first version's schema without the x-kubernetes-* extensions jsonschema does not know."""
    schema = copy.deepcopy(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            for key in [k for k in node if k.startswith("x-kubernetes-")]:
                del node[key]
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    strip(schema)
    return schema
