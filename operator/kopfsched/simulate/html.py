"""`-o html` for simulate, explain and compare: one self-contained page.

The page is a small app: the data goes in as one JSON document, and report.js (inline,
like report.css) draws it. Nodes are grouped by zone (topology.kubernetes.io/zone) with
requested/allocatable bars and one canvas per zone where each node is a cell, so 5000
nodes cost a handful of DOM elements; lists and the explain grid show a page at a time.
Nothing is fetched: no fonts, no scripts, no images.
"""

from __future__ import annotations

import html
import json
import re
import time
from importlib import resources
from typing import Any

from kopfsched.framework.resources import CPU, MEMORY, PODS
from kopfsched.simulate.runner import Simulation

ZONE_LABEL = "topology.kubernetes.io/zone"
NO_ZONE = "(no zone)"
_REASON = re.compile(r"(\d+) (.+?)(?:, (?=\d+ )|$)")


def reason_counts(message: str) -> list[list[Any]]:
    """[[count, reason]] from upstream's "0/N nodes are available: 3 A, 2 B." (the
    scheduler's own histogram; preemption's part kept apart)."""
    _, sep, rest = message.partition(" nodes are available: ")
    if not sep:
        return []
    head = rest.split(". preemption: ", 1)[0].rstrip(".")
    return [[int(count), reason] for count, reason in _REASON.findall(head)]


def cluster_view(sim: Simulation, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """What the page draws of one run: every node (zone, requested and allocatable cpu in
    millicores, memory in bytes, pods; the pods on it) and the pods the run tried to place."""
    cache = sim.scheduler.cache
    nodes = []
    extended: set[str] = set()
    for name in sorted(cache.node_names()):
        info = cache.get_node(name)
        assert info is not None  # node_names() lists the nodes get_node() has
        alloc, req = info.allocatable, info.requested
        # Extended resources (nvidia.com/gpu, ...) the node offers: often what decides placement.
        scalars = {r: [req.get(r), amount] for r, amount in sorted(alloc.scalar.items()) if amount > 0}
        extended.update(scalars)
        nodes.append([name, info.labels.get(ZONE_LABEL, NO_ZONE),
                      req.get(CPU), alloc.get(CPU), req.get(MEMORY), alloc.get(MEMORY),
                      len(info.pods), alloc.get(PODS), sorted(p.key for p in info.pods.values()),
                      [_taint_text(t) for t in info.taints], bool(info.unschedulable), scalars])
    return {"nodes": nodes, "pods": [_pod_view(p) for p in pods], "resources": sorted(extended)}


def _taint_text(taint: dict[str, Any]) -> str:
    """As kubectl describe node prints a taint: key=value:Effect."""
    value = taint.get("value")
    return f"{taint.get('key', '')}{'=' + value if value else ''}:{taint.get('effect', '')}"


def _pod_view(pod: dict[str, Any]) -> dict[str, Any]:
    view = {"key": f"{pod['namespace']}/{pod['name']}", "result": pod["result"], "node": pod["node"],
            "scheduler": pod["schedulerName"], "message": pod["message"], "reasons": reason_counts(pod["message"])}
    if pod.get("victims"):
        view["victims"] = pod["victims"]
    if pod.get("nominatedNode"):
        view["nominated"] = pod["nominatedNode"]
    return view


def _victims(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Preemption victims (gone from the run's pods) as rows of their own, naming their preemptor."""
    rows = []
    for p in pods:
        preemptor = f"{p['namespace']}/{p['name']}"
        for victim in p.get("victims") or ():
            rows.append({"key": victim, "result": "Preempted", "node": None, "scheduler": "", "reasons": [],
                         "preemptor": preemptor,
                         "message": f"preempted by {preemptor} on {p.get('nominatedNode') or p['node']}"})
    return rows


def simulate_html(sim: Simulation, report: dict[str, Any], *, title: str = "kopfsched simulate") -> str:
    view = cluster_view(sim, report["pods"])
    view["pods"] += _victims(report["pods"])
    return page({"kind": "simulate", "title": title, "summary": report["summary"], "view": view})


def explain_html(explanation: Any, *, title: str = "") -> str:
    entry = explanation.entry
    key = f"{entry['namespace']}/{entry['name']}"
    return page({"kind": "explain", "title": title or f"kopfsched explain {key}", "entry": entry,
                 "view": explanation.view})


def compare_html(comparison: Any, *, title: str = "kopfsched simulate --compare") -> str:
    report = comparison.report
    return page({"kind": "compare", "title": title, "changes": report["changes"],
                 "emptyNodes": report["emptyNodes"],
                 "summary": {"before": report["before"]["summary"], "after": report["after"]["summary"]},
                 "before": comparison.before_view, "after": comparison.after_view})


def _asset(name: str) -> str:
    return resources.files("kopfsched.simulate").joinpath("report", name).read_text(encoding="utf-8")


def replay_view(sim: Simulation, resources: list[str]) -> dict[str, Any]:
    """cluster_view at the end of a replay, plus each node's extended resources
    (`extended`: {node: [[resource, requested, allocatable]]}) for the node panel."""
    view = cluster_view(sim, [])
    extended: dict[str, list[list[Any]]] = {}
    for info in sim.scheduler.cache.node_infos():
        amounts = [[r, info.requested.get(r), info.allocatable.get(r)] for r in resources
                   if r not in (CPU, MEMORY) and info.allocatable.get(r)]
        if amounts:
            extended[info.name] = amounts
    view["extended"] = extended
    return view


def replay_html(runs: list[tuple[str, dict[str, Any], dict[str, Any]]], *, title: str = "") -> str:
    """replay's page: (label, replay JSON, cluster_view) per run, one run or --compare's two. The
    per-pod list stays out (a long history has a hundred thousand); the pods pending at the end
    go in, the longest waiting first."""
    shown = []
    for label, report, view in runs:
        pending = sorted((p for p in report["pods"] if p["state"] == "Pending"), key=lambda p: p["arrival"])
        shown.append({"label": label, "report": {k: v for k, v in report.items() if k != "pods"},
                      "pending": [[f"{p['namespace']}/{p['name']}", p["arrival"]] for p in pending[:500]],
                      "pendingCount": len(pending), "view": view})
    return page({"kind": "replay", "title": title or ("kopfsched replay --compare" if len(runs) > 1
                                                        else "kopfsched replay"), "runs": shown},
                scripts=("replay.js",))


def page(data: dict[str, Any], *, scripts: tuple[str, ...] = ()) -> str:
    """`scripts`: assets of other pages (report/<name>.js) inlined before report.js, which draws them."""
    data = {**data, "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    # "</" cannot end the script element early once escaped; JSON reads "<\/" as "</".
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{html.escape(data['title'])}</title>\n<style>\n{_asset('report.css')}</style></head>\n"
        "<body><div id=\"app\"></div>\n"
        f"<script type=\"application/json\" id=\"data\">{payload}</script>\n"
        + "".join(f"<script>\n{_asset(name)}</script>\n" for name in scripts)
        + f"<script>\n{_asset('report.js')}</script>\n</body></html>\n"
    )
