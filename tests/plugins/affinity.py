"""Builders of the InterPodAffinity tests: namespaces, affinity terms, a three-node cluster in
two zones, and the plugin built over it."""

from __future__ import annotations

from typing import Any

from kopfsched.framework.types import NodeInfo
from kopfsched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from kopfsched.testing import FakeObjects, make_handle
from tests.builders import make_node, node_info

AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def term(labels: dict[str, str], key: str = HOST, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def required(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def preferred(kind: str, *weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "podAffinityTerm": t} for w, t in weighted]}}


def cluster() -> list[dict[str, Any]]:
    return [make_node("n1", labels={ZONE: "z1"}), make_node("n2", labels={ZONE: "z1"}),
            make_node("n3", labels={ZONE: "z2"})]


def build(pods_by_node: dict[str, list[dict[str, Any]]], nodes: list[dict[str, Any]] | None = None,
          objects: FakeObjects | None = None, args: InterPodAffinityArgs | None = None,
          ) -> tuple[InterPodAffinity, list[NodeInfo]]:
    infos = [node_info(n, *pods_by_node.get(n["metadata"]["name"], [])) for n in nodes or cluster()]
    handle = make_handle(infos)
    if objects is not None:
        handle.objects = objects
    return InterPodAffinity(args, handle), infos
