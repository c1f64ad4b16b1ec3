"""simulate's results as JSON (docs/simulate-json.md), or as tables for people."""

from __future__ import annotations

from typing import Any

from kopfsched.framework.diagnosis import Diagnosis
from kopfsched.framework.resources import CPU, PODS, Resource
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.schedulinggates import SCHEDULING_GATED_MESSAGE
from kopfsched.simulate.runner import Simulation

_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def format_quantity(resource: str, value: int) -> str:
    """Scheduler units back to a Kubernetes quantity: 1500 cpu → "1500m", 2 GiB → "2Gi"."""
    if resource == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource == PODS or value == 0:
        return str(value)
    for suffix, size in _BINARY:
        if value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)


def _resources(res: Resource) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in res.as_dict().items()}


def pod_results(sim: Simulation, *, explain: bool) -> list[dict[str, Any]]:
    scheduler = sim.scheduler
    gated = {q.key: q for q in scheduler.queue.gated_pods()}
    waiting = {w.pod.key for w in scheduler.waiting_pods}
    node_names = [n.name for n in scheduler.snapshot.node_infos()]
    keys = list(sim.order) + [k for k in sim.input_order if k not in sim.order]
    results = []
    for key in keys:
        attempt = sim.log.attempts.get(key)
        pod = sim.client.pods.get(key)
        if pod is None:
            continue  # deleted during the run (a preemption victim): listed in its preemptor's victims
        spec = pod.get("spec") or {}
        entry: dict[str, Any] = {
            "namespace": key.split("/", 1)[0],
            "name": key.split("/", 1)[1],
            "schedulerName": spec.get("schedulerName") or "default-scheduler",
            "result": "Unschedulable",
            "node": None,
            "nominatedNode": None,
            "victims": [],
            "message": "",
        }
        if key in gated:
            entry["result"] = "Gated"
            status = scheduler.profiles.framework_for(gated[key].pod_info)
            entry["message"] = _gate_message(status, gated[key].pod_info)
        elif key in waiting:
            entry["result"] = "Waiting"
        elif spec.get("nodeName"):
            entry["result"] = "Scheduled"
            entry["node"] = spec["nodeName"]
        elif attempt is None and not scheduler.profiles.responsible_for(PodInfo(pod)):
            # kube-scheduler leaves pods of other scheduler names to their scheduler: not a failure.
            entry["result"] = "NotHandled"
            entry["message"] = f'no profile named "{entry["schedulerName"]}"'
        if attempt is not None:
            if entry["result"] != "Scheduled":
                entry["message"] = attempt.message or entry["message"]
            entry["nominatedNode"] = sim.log.nominated.get(key)
            entry["victims"] = list(sim.log.victims.get(key, ()))
            if entry["result"] == "Scheduled" and entry["victims"] and key in sim.log.first_failures:
                # What the pod showed in a cluster before it preempted: its FailedScheduling message.
                entry["message"] = sim.log.first_failures[key].message
            if explain:
                # A preemptor's later attempt only sees its nominated node; the first failed
                # attempt says why it had to preempt.
                first_failure = sim.log.first_failures.get(key) if entry["victims"] else None
                entry["filter"] = filter_explain((first_failure or attempt).diagnosis, node_names)
                entry["scores"] = attempt.scores or {}
        elif explain:
            entry["filter"], entry["scores"] = {}, {}
        results.append(entry)
    return results


def _gate_message(fwk, pod_info) -> str:
    if (pod_info.pod.get("spec") or {}).get("schedulingGates"):
        return SCHEDULING_GATED_MESSAGE  # what the pod shows in a cluster, whatever the plugin says
    if fwk is None:
        return ""
    status = fwk.run_pre_enqueue_plugins(pod_info)
    return status.message if status is not None else ""


def filter_explain(diagnosis: Diagnosis | None, node_names: list[str]) -> dict[str, Any]:
    """Every infeasible node; nodes a PreFilter ruled out get the PreFilter's status."""
    if diagnosis is None:
        return {}
    out = {
        node: {"plugin": status.plugin, "code": status.code.upstream_name, "reasons": list(status.reasons)}
        for node, status in diagnosis.node_to_status.statuses.items()
    }
    absent = diagnosis.node_to_status.absent
    if absent is not None:
        for node in node_names:
            out.setdefault(node, {"plugin": absent.plugin, "code": absent.code.upstream_name,
                                  "reasons": list(absent.reasons)})
    return dict(sorted(out.items()))


def node_results(sim: Simulation) -> list[dict[str, Any]]:
    out = []
    cache = sim.scheduler.cache
    for name in sorted(cache.node_names()):
        info = cache.get_node(name)
        assert info is not None  # node_names() lists the nodes get_node() has
        out.append({"name": name, "pods": len(info.pods), "allocatable": _resources(info.allocatable),
                    "requested": _resources(info.requested)})
    return out


def to_json(sim: Simulation, *, explain: bool) -> dict[str, Any]:
    pods = pod_results(sim, explain=explain)
    return {
        "pods": pods,
        "nodes": node_results(sim),
        "summary": {
            "scheduled": sum(1 for p in pods if p["result"] == "Scheduled"),
            "unschedulable": sum(1 for p in pods if p["result"] == "Unschedulable"),
            "notHandled": sum(1 for p in pods if p["result"] == "NotHandled"),
            "preempted": len(set(sim.log.preempted)),
            "seconds": round(sim.seconds, 3),
            "batchHintsUsed": sim.scheduler.algorithm.batched_pods(),
        },
    }


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def _preempted(pod: dict[str, Any]) -> str:
    if not pod["victims"]:
        return ""
    first = f" after: {pod['message']}" if pod["message"] else ""
    return f"preempted {', '.join(pod['victims'])}{first}"


def to_table(report: dict[str, Any], *, explain: bool = False) -> str:
    handled = [p for p in report["pods"] if p["result"] != "NotHandled"]
    others = [p for p in report["pods"] if p["result"] == "NotHandled"]
    pod_rows = [[f"{p['namespace']}/{p['name']}", p["schedulerName"], p["result"], p["node"] or "-",
                 p["message"] if p["result"] != "Scheduled" else _preempted(p)] for p in handled]
    node_rows = [[n["name"], str(n["pods"]),
                  f"{n['requested'].get('cpu', '0')}/{n['allocatable'].get('cpu', '0')}",
                  f"{n['requested'].get('memory', '0')}/{n['allocatable'].get('memory', '0')}"]
                 for n in report["nodes"]]
    s = report["summary"]
    not_handled = f", {s['notHandled']} not handled" if s.get("notHandled") else ""
    summary = (f"{s['scheduled']} scheduled, {s['unschedulable']} unschedulable{not_handled}, "
               f"{s['preempted']} preempted in {s['seconds']:.3f}s")
    parts = [_table(["POD", "SCHEDULER", "RESULT", "NODE", "MESSAGE"], pod_rows)]
    if others:
        names = sorted({p["schedulerName"] for p in others})
        parts.append(
            "Not handled: no profile here serves these scheduler names; like kube-scheduler, kopfsched leaves\n"
            "such pods to their own scheduler. To schedule them, add that profile with --profile "
            f"({', '.join(names)}).\n"
            + _table(["POD", "SCHEDULER", "MESSAGE"],
                     [[f"{p['namespace']}/{p['name']}", p["schedulerName"], p["message"]] for p in others]))
    if explain:
        parts.extend(_explain_table(p) for p in handled if "filter" in p)
    parts += [_table(["NODE", "PODS", "CPU (requested/allocatable)", "MEMORY (requested/allocatable)"], node_rows),
              summary]
    return "\n\n".join(parts) + "\n"


def _explain_table(pod: dict[str, Any]) -> str:
    """One pod's --explain as tables: the nodes filtered out, then the scored nodes, best first."""
    head = f"{pod['namespace']}/{pod['name']}: {pod['result']}" + (f" on {pod['node']}" if pod["node"] else "")
    if pod["victims"]:
        head += f" after preempting {', '.join(pod['victims'])} (filter: its first attempt, before preempting)"
    lines = [head]
    filtered = pod.get("filter") or {}
    if filtered:
        lines.append(_indent(_table(["FILTERED OUT", "PLUGIN", "CODE", "REASONS"],
                                    [[node, v["plugin"], v["code"], "; ".join(v["reasons"])]
                                     for node, v in filtered.items()])))
    scores = pod.get("scores") or {}
    if scores:
        plugins = sorted({name for per_node in scores.values() for name in per_node if name != "total"})
        ranked = sorted(scores.items(), key=lambda item: (-item[1].get("total", 0), item[0]))
        lines.append(_indent(_table(["SCORED", "TOTAL", *plugins],
                                    [[node, str(v.get("total", 0)), *(str(v.get(p, "-")) for p in plugins)]
                                     for node, v in ranked])))
    if not filtered and not scores:
        lines.append("  " + ("only one node was feasible, so none was scored" if pod["result"] == "Scheduled"
                             else "not attempted, so no per-node details"))
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
