"""What-if: `simulate --compare PROFILES.yaml` and `--reschedule-all`.

The same input is simulated twice, first as given, then with the candidate profiles
replacing those of the same scheduler name; the report lists every pod whose result or
node differs, each node's use before and after, and the nodes each run leaves empty
(what bin-packing would free). `--reschedule-all` unbinds every pod a scheduler placed
(not static or mirror pods, not DaemonSet pods, which are placed per node by their
controller) so the whole cluster is packed again, in creation order.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from kopfsched.config.types import ProfileConfig
from kopfsched.framework.registry import Registry
from kopfsched.framework.resources import quantity_value
from kopfsched.framework.types import Obj
from kopfsched.simulate.html import cluster_view
from kopfsched.simulate.loader import ClusterInput
from kopfsched.simulate.output import _table, to_json
from kopfsched.simulate.runner import Simulation, simulate

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def placed_by_a_scheduler(pod: Obj) -> bool:
    """False for static/mirror pods (the kubelet's) and DaemonSet pods (pinned per node)."""
    meta = pod.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False
    return not any(ref.get("kind") in ("DaemonSet", "Node") and ref.get("controller", True)
                   for ref in meta.get("ownerReferences") or ())


def unbind_all(inputs: ClusterInput) -> int:
    """--reschedule-all: every bound pod a scheduler placed becomes pending again, as if just
    created (its nomination and PodScheduled condition dropped); returns how many."""
    count = 0
    for loaded in inputs.pods:
        pod = loaded.obj
        spec = pod.get("spec") or {}
        if not spec.get("nodeName") or not placed_by_a_scheduler(pod):
            continue
        del spec["nodeName"]
        status = pod.get("status")
        if isinstance(status, dict):
            status.pop("nominatedNodeName", None)
            status["conditions"] = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        count += 1
    return count


def _outcomes(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{p['namespace']}/{p['name']}": {"result": p["result"], "node": p["node"]} for p in report["pods"]}


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod whose result or node differs, in the order of the before run (then after)."""
    b, a = _outcomes(before), _outcomes(after)
    missing = {"result": "Absent", "node": None}  # e.g. a preemption victim deleted in one run only
    out = []
    for key in [*b, *(k for k in a if k not in b)]:
        old, new = b.get(key, missing), a.get(key, missing)
        if old != new:
            namespace, name = key.split("/", 1)
            out.append({"namespace": namespace, "name": name, "before": old, "after": new})
    return out


def empty_nodes(sim: Simulation) -> list[str]:
    """Nodes that run no pod but static, mirror and DaemonSet pods: what a cluster
    autoscaler could remove."""
    cache = sim.scheduler.cache
    nodes = [(name, cache.get_node(name)) for name in sorted(cache.node_names())]
    return [name for name, info in nodes
            if info is not None and not any(placed_by_a_scheduler(p.pod) for p in info.iter_pods())]


@dataclass
class Comparison:
    report: dict[str, Any]
    """{"before", "after", "changes", "emptyNodes": {"before", "after"}}: what -o json prints."""
    before_view: dict[str, Any]
    after_view: dict[str, Any]
    """What the HTML page draws of each run."""


async def compare(inputs: ClusterInput, overrides: list[ProfileConfig], *, registry: Registry, seed: int | None,
                  explain: bool = False) -> Comparison:
    second = inputs.copy()
    sim_before = await simulate(inputs, registry=registry, seed=seed, explain=explain)
    sim_after = await simulate(second, registry=registry, seed=seed, explain=explain, overrides=overrides)
    before, after = to_json(sim_before, explain=explain), to_json(sim_after, explain=explain)
    report = {"before": before, "after": after, "changes": changes(before, after),
              "emptyNodes": {"before": empty_nodes(sim_before), "after": empty_nodes(sim_after)}}
    return Comparison(report, cluster_view(sim_before, before["pods"]), cluster_view(sim_after, after["pods"]))


def _percent(requested: str, allocatable: str, resource: str) -> str:
    total = quantity_value(resource, allocatable) if allocatable else 0
    if not total:
        return "-"
    return f"{100 * quantity_value(resource, requested or '0') / total:.0f}%"


def to_table(report: dict[str, Any]) -> str:
    lines: list[str] = []
    rows = [[f"{c['namespace']}/{c['name']}",
             f"{c['before']['result']} {c['before']['node'] or ''}".strip(),
             f"{c['after']['result']} {c['after']['node'] or ''}".strip()] for c in report["changes"]]
    lines.append(f"{len(rows)} pod(s) change:" if rows else "No pod changes.")
    if rows:
        lines.append(_table(["POD", "BEFORE", "AFTER"], rows))
    after_nodes = {n["name"]: n for n in report["after"]["nodes"]}
    node_rows = []
    unchanged = 0
    for node in report["before"]["nodes"]:
        new = after_nodes.get(node["name"], node)
        if (node["requested"], node["pods"]) == (new["requested"], new["pods"]):
            unchanged += 1  # -o json lists every node; the table only those whose use changes
            continue
        cells = [node["name"]]
        for res in ("cpu", "memory"):
            cells.append(f"{_percent(node['requested'].get(res, '0'), node['allocatable'].get(res, ''), res)} -> "
                         f"{_percent(new['requested'].get(res, '0'), new['allocatable'].get(res, ''), res)}")
        cells.append(f"{node['pods']} -> {new['pods']}")
        node_rows.append(cells)
    if node_rows:
        lines += ["", _table(["NODE", "CPU", "MEMORY", "PODS"], node_rows)]
    lines.append(f"{unchanged} other node(s) unchanged." if node_rows else "No node's use changes.")
    empty = report["emptyNodes"]
    freed = [n for n in empty["after"] if n not in empty["before"]]
    summary = (f"Empty nodes (no pods but DaemonSet and static ones): {len(empty['before'])} before, "
               f"{len(empty['after'])} after" + (f"; freed: {', '.join(freed)}" if freed else ""))
    lines += ["", *textwrap.wrap(summary, 80, subsequent_indent="  ", break_on_hyphens=False)]
    for label in ("before", "after"):
        s = report[label]["summary"]
        not_handled = f", {s['notHandled']} not handled" if s.get("notHandled") else ""
        lines.append(f"{label.capitalize()}: {s['scheduled']} scheduled, {s['unschedulable']} unschedulable"
                     f"{not_handled}, {s['preempted']} preempted")
    return "\n".join(lines) + "\n"
