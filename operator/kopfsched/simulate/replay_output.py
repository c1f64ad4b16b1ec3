"""replay's results as JSON (docs/replay.md), as tables for terminals, and side by side."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kopfsched.framework.resources import CPU
from kopfsched.simulate.output import _table, node_results
from kopfsched.simulate.replay import (
    DEPARTED,
    NOT_HANDLED,
    PENDING,
    PREEMPTED,
    RUNNING,
    WITHDRAWN,
    Replay,
    percentile,
)

TABLE_ROWS = 12
"""Rows of the terminal's time table (evenly picked from the samples)."""
TABLE_NODES = 30


def amount(resource: str, value: int) -> float | int:
    """Scheduler units as the JSON gives them: cpu in cores, everything else as counted (bytes, devices)."""
    return value / 1000 if resource == CPU else value


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def wait_summary(waits: list[float]) -> dict[str, Any]:
    return {"count": len(waits), "p50": _round(percentile(waits, 50)), "p90": _round(percentile(waits, 90)),
            "p99": _round(percentile(waits, 99)), "max": _round(max(waits) if waits else None),
            "mean": _round(sum(waits) / len(waits) if waits else None)}


def _ratio(part: float, whole: float) -> float:
    return round(part / whole, 4) if whole else 0.0


def to_json(replay: Replay) -> dict[str, Any]:
    resources, samples, capacity = replay.resources, replay.samples, replay.capacity
    records = list(replay.records.values())
    waits = [r.wait for r in records if r.wait is not None and not r.at_start]
    states = {state: sum(1 for r in records if r.state == state)
              for state in (RUNNING, DEPARTED, PREEMPTED, PENDING, WITHDRAWN, NOT_HANDLED)}
    free = {r: [capacity[r] - s.allocated[r] for s in samples] for r in resources}
    series = {
        "t": [s.t for s in samples],
        "pending": [s.pending for s in samples],
        "running": [s.running for s in samples],
        "scheduled": [s.scheduled for s in samples],
        "preempted": [s.preempted for s in samples],
        "allocated": {r: [amount(r, s.allocated[r]) for s in samples] for r in resources},
        "fragmented": {r: [amount(r, s.fragmented[r]) for s in samples] for r in resources},
        "waitP50": [_round(percentile(s.waits, 50)) for s in samples],
        "waitP90": [_round(percentile(s.waits, 90)) for s in samples],
        "waitMax": [_round(max(s.waits)) if s.waits else None for s in samples],
    }
    allocation = {r: {"mean": _ratio(sum(s.allocated[r] for s in samples) / len(samples), capacity[r]),
                      "peak": _ratio(max(s.allocated[r] for s in samples), capacity[r])} for r in resources}
    fragmentation = {r: {"mean": _ratio(sum(s.fragmented[r] for s in samples), sum(free[r])),
                         "peak": max((_ratio(s.fragmented[r], f) for s, f in zip(samples, free[r], strict=True)),
                                     default=0.0)} for r in resources}
    return {
        "origin": replay.history.origin_text,
        "start": replay.start,
        "end": replay.end,
        "step": replay.step,
        "resources": resources,
        "capacity": {r: amount(r, capacity[r]) for r in resources},
        "series": series,
        "wait": wait_summary(waits),
        "allocation": allocation,
        "fragmentation": fragmentation,
        "preemptions": replay.preemptions,
        "pods": [_pod(r) for r in records],
        "nodes": node_results(replay.sim),
        "summary": {
            "pods": len(records),
            "arrived": replay.arrived,
            "scheduled": len(waits),
            "running": states[RUNNING], "departed": states[DEPARTED], "preempted": states[PREEMPTED],
            "pending": states[PENDING], "withdrawn": states[WITHDRAWN], "notHandled": states[NOT_HANDLED],
            "peakPending": max((s.pending for s in samples), default=0),
            "attempts": replay.attempts, "nodes": len(replay.sim.scheduler.cache.node_names()),
            "attemptBudgetExhausted": replay.budget_exhausted,
            "seconds": round(replay.seconds, 3),
        },
    }


def _pod(record: Any) -> dict[str, Any]:
    namespace, name = record.key.split("/", 1)
    return {"namespace": namespace, "name": name, "state": record.state, "arrival": record.arrival,
            "scheduled": record.bound_at, "node": record.node, "end": record.ended,
            "wait": _round(record.wait)}


def compare_json(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Both runs, and what changed: after minus before (waits in seconds, ratios as fractions)."""
    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 4)

    resources = [r for r in before["resources"] if r in after["resources"]]
    delta = {key: after["summary"][key] - before["summary"][key]
             for key in ("scheduled", "pending", "preempted", "withdrawn", "peakPending", "attempts")}
    delta.update({f"wait{p.upper()}": diff(before["wait"][p], after["wait"][p]) for p in ("p50", "p90", "p99", "max")})
    delta["end"] = round(after["end"] - before["end"], 3)
    delta["allocation"] = {r: diff(before["allocation"][r]["mean"], after["allocation"][r]["mean"])
                           for r in resources}
    delta["fragmentation"] = {r: diff(before["fragmentation"][r]["mean"], after["fragmentation"][r]["mean"])
                              for r in resources}
    return {"before": before, "after": after, "delta": delta}


# -- tables ------------------------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    """90s, 22m58s, 6h24m23s: seconds as a person reads them."""
    if value is None:
        return "-"
    if value < 100:
        return f"{value:g}s"
    whole = round(value)
    hours, minutes, seconds = whole // 3600, whole % 3600 // 60, whole % 60
    if not hours:
        return f"{minutes}m{seconds:02d}s"
    return f"{hours}h{minutes:02d}m" + (f"{seconds:02d}s" if seconds else "")


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def _short(resource: str) -> str:
    return resource.rsplit("/", 1)[-1].upper()


def to_table(report: dict[str, Any]) -> str:
    s, w, resources = report["summary"], report["wait"], report["resources"]
    lines = [f"replay: {s['pods']} pods over {s['nodes']} nodes, t={_seconds(report['start'])} to "
             f"{_seconds(report['end'])} (samples every {_seconds(report['step'])}), {s['attempts']} scheduling "
             f"attempts" + (f", origin {report['origin']}" if report["origin"] else ""),
             f"pods: {s['arrived']} arrived, {s['scheduled']} scheduled, {s['departed']} departed, "
             f"{s['preempted']} preempted, {s['running']} running and {s['pending']} pending at the end, "
             f"{s['withdrawn']} withdrawn while pending (peak pending {s['peakPending']})"
             + (f", {s['notHandled']} with no profile for their schedulerName" if s["notHandled"] else ""),
             f"wait until bound ({w['count']} pods): p50 {_seconds(w['p50'])}, p90 {_seconds(w['p90'])}, "
             f"p99 {_seconds(w['p99'])}, max {_seconds(w['max'])}",
             "allocation (mean, peak): " + ", ".join(
                 f"{r} {_percent(report['allocation'][r]['mean'])} {_percent(report['allocation'][r]['peak'])}"
                 for r in resources),
             "fragmented of free (mean, peak): " + ", ".join(
                 f"{r} {_percent(report['fragmentation'][r]['mean'])} {_percent(report['fragmentation'][r]['peak'])}"
                 for r in resources)]
    if s["attemptBudgetExhausted"]:
        lines.append("warning: the attempt budget ran out: the replay stopped early")
    series = report["series"]
    count = len(series["t"])
    picks = sorted({round(i * (count - 1) / (TABLE_ROWS - 1)) for i in range(TABLE_ROWS)}) if count > 1 else [0]
    headers = ["TIME", "PENDING", "RUNNING", "PREEMPTED", *(f"{_short(r)} ALLOC" for r in resources),
               *(f"{_short(r)} FRAG" for r in resources)]
    capacity = report["capacity"]
    rows = []
    for i in picks:
        allocated = [series["allocated"][r][i] for r in resources]
        free = [capacity[r] - a for r, a in zip(resources, allocated, strict=True)]
        rows.append([_seconds(series["t"][i]), str(series["pending"][i]), str(series["running"][i]),
                     str(series["preempted"][i]),
                     *(_percent(a / capacity[r]) if capacity[r] else "-" for r, a in zip(resources, allocated,
                                                                                         strict=True)),
                     *(_percent(series["fragmented"][r][i] / f) if f else "-" for r, f in zip(resources, free,
                                                                                             strict=True))])
    lines += ["", _table(headers, rows), ""]
    nodes = report["nodes"]
    node_rows = [[n["name"], str(n["pods"]),
                  *(f"{n['requested'].get(r, '0')}/{n['allocatable'].get(r, '0')}" for r in resources)]
                 for n in nodes[:TABLE_NODES]]
    lines.append(_table(["NODE (AT THE END)", "PODS", *(r.upper() for r in resources)], node_rows))
    if len(nodes) > TABLE_NODES:
        lines.append(f"... and {len(nodes) - TABLE_NODES} more nodes (-o json lists them all)")
    return "\n".join(lines) + "\n"


def _wait(percentile_name: str) -> Callable[[dict[str, Any]], Any]:
    return lambda report: report["wait"][percentile_name]


def compare_table(report: dict[str, Any]) -> str:
    before, after = report["before"], report["after"]
    resources = [r for r in before["resources"] if r in after["resources"]]
    def both(get: Callable[[dict[str, Any]], Any], fmt: Callable[[Any], str] = str) -> list[str]:
        return [fmt(get(before)), fmt(get(after))]

    rows = [["scheduled", *both(lambda r: r["summary"]["scheduled"])],
            ["pending at the end", *both(lambda r: r["summary"]["pending"])],
            ["peak pending", *both(lambda r: r["summary"]["peakPending"])],
            ["preempted", *both(lambda r: r["summary"]["preempted"])],
            *([f"wait {p}", *both(_wait(p), _seconds)] for p in ("p50", "p90", "p99", "max")),
            ["ends at", *both(lambda r: r["end"], _seconds)]]
    for r in resources:
        rows.append([f"{r} allocation (mean)", _percent(before["allocation"][r]["mean"]),
                     _percent(after["allocation"][r]["mean"])])
        rows.append([f"{r} fragmented (mean)", _percent(before["fragmentation"][r]["mean"]),
                     _percent(after["fragmentation"][r]["mean"])])
    return _table(["", "BEFORE", "AFTER"], rows) + "\n"
