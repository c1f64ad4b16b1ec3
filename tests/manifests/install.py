"""The install as the manifest tests read it: every object of manifests/ with the file it is in,
one object by kind, and what a list of RBAC rules grants."""

from __future__ import annotations

import pathlib
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "manifests").glob("*.yaml"))
NAMESPACE = "kopfsched-system"


def documents(path: pathlib.Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


OBJECTS = [(path, doc) for path in MANIFESTS for doc in documents(path)]


def object_id(path: pathlib.Path, doc: dict[str, Any]) -> str:
    return f"{path.name}:{doc['kind']}/{doc['metadata']['name']}"


def the(kind: str) -> dict[str, Any]:
    [found] = [doc for _, doc in OBJECTS if doc["kind"] == kind]
    return found


def granted(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants
