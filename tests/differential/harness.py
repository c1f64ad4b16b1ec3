"""Run one snapshot through kopfsched's explain and the upstream oracle, pod by pod, and list
every field where they differ.

Pending pods are taken in simulate's queue order (creationTimestamp, then input order); each
is explained by both on the same cluster, then the oracle's outcome is applied to it (the pod
bound to its node, or its preemption's victims deleted and the pod nominated), so that both
see the same cluster at every step even where upstream would pick among equal nodes at random.

kopfsched's side is `explain --as-given`: one scheduling attempt of the pod over the snapshot
as it stands, which is what the oracle runs. explain's default mode replays simulate's whole
run instead (other pods, higher-priority ones first, placed before this one; a preemptor
reported Scheduled after its victims are gone), which is a different question.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopfsched.simulate.explain import explain_pod
from kopfsched.simulate.loader import load_objects
from tests.differential.oracle import Oracle


@dataclass
class Difference:
    pod: str
    field: str
    kopfsched: Any
    upstream: Any

    def plugin(self) -> str:
        """The plugin the difference is about, for counting per plugin."""
        for value in (self.upstream, self.kopfsched):
            if isinstance(value, dict) and value.get("plugin"):
                return str(value["plugin"])
        if self.field.startswith("weights."):
            return self.field.split(".", 1)[1]
        if self.field.startswith("scores."):
            return self.field.split(".")[2] if self.field.count(".") >= 2 else "total"
        return self.field.split(".")[0]

    def __str__(self) -> str:
        return f"{self.pod}: {self.field}: kopfsched {self.kopfsched!r} != upstream {self.upstream!r}"


def pod_key(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def pending_in_queue_order(objects: list[dict[str, Any]]) -> list[str]:
    pods = [o for o in objects if o["kind"] == "Pod" and not (o.get("spec") or {}).get("nodeName")]
    pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")  # stable: input order second
    return [pod_key(p) for p in pods]


def kopfsched_explain(objects: list[dict[str, Any]], ref: str) -> dict[str, Any]:
    """`kopfsched explain REF --as-given -o json` over the objects."""
    inputs = load_objects(copy.deepcopy(objects), "differential")
    assert not inputs.problems, inputs.problems
    return asyncio.run(explain_pod(inputs, ref, as_given=True)).entry


def started(pod: dict[str, Any]) -> str:
    """When a pod bound by `apply` starts: a year after its creation (the oracle's rule)."""
    created = pod["metadata"].get("creationTimestamp") or "2026-01-01T00:00:00Z"
    return f"{int(created[:4]) + 1}{created[4:]}"


def apply(objects: list[dict[str, Any]], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The cluster after the entry's outcome, as the oracle's `run` applies it."""
    key = f"{entry['namespace']}/{entry['name']}"
    pod = next(o for o in objects if o["kind"] == "Pod" and pod_key(o) == key)
    if entry["result"] == "Gated":  # never attempted: whatever its evaluation found, nothing happens
        return objects
    if entry.get("nominationCleared"):  # preemption found no candidate: upstream clears the nomination
        (pod.get("status") or {}).pop("nominatedNodeName", None)
    elif entry["result"] == "Scheduled" and entry["node"]:
        pod["spec"]["nodeName"] = entry["node"]
        status = pod.setdefault("status", {})
        status.pop("nominatedNodeName", None)
        status["startTime"] = started(pod)
    elif entry.get("nominatedNode"):
        victims = set(entry["victims"])
        objects = [o for o in objects if not (o["kind"] == "Pod" and pod_key(o) in victims)]
        node, priority = entry["nominatedNode"], pod["spec"].get("priority") or 0
        for other in objects:
            status = other.get("status") or {}
            if (other["kind"] == "Pod" and other is not pod and not other["spec"].get("nodeName")
                    and status.get("nominatedNodeName") == node and (other["spec"].get("priority") or 0) < priority):
                status.pop("nominatedNodeName")
        pod.setdefault("status", {})["nominatedNodeName"] = node
    return objects


KNOWN_ABSENT_SCORES = frozenset({"VolumeBinding", "DynamicResources"})
"""Deliberate for now, with the totals unchanged: v1.37 runs VolumeBinding's Score
(StorageCapacityScoring is beta, on) and DynamicResources' Score (weight 2) for every pod, and
both score 0 for a pod without volumes or claims, which kopfsched skips (no entry)."""


def compare_entries(ours: dict[str, Any], theirs: dict[str, Any]) -> list[Difference]:
    key = f"{theirs['namespace']}/{theirs['name']}"
    out: list[Difference] = []

    def differ(field: str, a: Any, b: Any) -> None:
        if a != b:
            out.append(Difference(key, field, a, b))

    differ("result", ours["result"], theirs["result"])
    for plugin in sorted(set(ours["weights"]) | set(theirs["weights"])):
        if plugin in KNOWN_ABSENT_SCORES and plugin not in ours["weights"]:
            continue
        differ(f"weights.{plugin}", ours["weights"].get(plugin), theirs["weights"].get(plugin))
    differ("message", ours["message"], theirs["message"])
    for node in sorted(set(ours["filter"]) | set(theirs["filter"])):
        differ(f"filter.{node}", ours["filter"].get(node), theirs["filter"].get(node))
    if ours["result"] == theirs["result"] == "Scheduled":
        for node in sorted(set(ours["scores"]) | set(theirs["scores"])):
            a, b = ours["scores"].get(node) or {}, theirs["scores"].get(node) or {}
            for plugin in sorted(set(a) | set(b)):
                if plugin in KNOWN_ABSENT_SCORES and plugin not in a and b.get(plugin) == 0:
                    continue
                differ(f"scores.{node}.{plugin}", a.get(plugin), b.get(plugin))
        # Upstream breaks ties at random, but binds a pod whose earlier nomination still fits
        # to that node unscored (evaluateNominatedNode), whatever the totals.
        differ("nominatedNodeFits", bool(ours.get("nominatedNodeFits")), bool(theirs.get("nominatedNodeFits")))
        if len(theirs["topNodes"]) == 1 or theirs.get("nominatedNodeFits"):
            differ("node", ours["node"], theirs["node"])
    pre_a, pre_b = ours.get("preemption"), theirs.get("preemption")
    if pre_b is not None and pre_b.get("eligible"):
        candidates = [{**c, "victims": sorted(c["victims"])} for c in (pre_a or {}).get("candidates", [])]
        differ("preemption.candidates", candidates, pre_b["candidates"])
        differ("nominatedNode", ours["nominatedNode"], theirs["nominatedNode"])
        differ("victims", sorted(ours["victims"]), sorted(theirs["victims"]))
    elif pre_b is not None:
        differ("preemption.eligible", (pre_a or {}).get("eligible"), pre_b.get("eligible"))
    return out


def differences(oracle: Oracle, objects: list[dict[str, Any]], workdir: Path) -> list[Difference]:
    """Every difference between kopfsched and upstream over the snapshot's pending pods."""
    objects = copy.deepcopy(objects)
    found: list[Difference] = []
    for step, ref in enumerate(pending_in_queue_order(objects)):
        path = workdir / f"step-{step}.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        theirs = oracle.explain([str(path)], ref)
        ours = kopfsched_explain(objects, ref)
        found += compare_entries(ours, theirs)
        objects = apply(objects, theirs)
    return found
