"""`kopfsched plan`'s report as tables for people, and as the HTML page (simulate's house style)."""

from __future__ import annotations

import textwrap
from typing import Any

from kopfsched.simulate.html import page, reason_counts
from kopfsched.simulate.output import _table


def _reasons(status: dict[str, Any]) -> str:
    return f"{'; '.join(status['reasons']) or status['code']} ({status['plugin'] or '-'})"


def to_table(report: dict[str, Any]) -> str:
    s = report["summary"]
    parts: list[str] = []
    if report["add"]:
        cost = f", cost {s['cost']:g}" if s["cost"] is not None else ""
        proof = "minimal" if s["minimal"] else "not proven minimal (the search budget ran out)"
        head = f"Add {s['nodesAdded']} node(s){cost}, {proof}:"
        rows = [[g["template"], str(g["count"]), "-" if g["price"] is None else f"{g['price']:g}",
                 ", ".join(g["nodes"])] for g in report["add"]]
        parts.append(head + "\n" + _table(["TEMPLATE", "COUNT", "PRICE", "NODES"], rows))
    else:
        parts.append("Add no nodes: " + ("no pod is pending." if not s["pending"] else
                                         "no template can help the pending pods."))
    if report["helped"]:
        parts.append(f"Helped ({len(report['helped'])}): scheduled once the nodes are added\n"
                     + _table(["POD", "NODE"], [[f"{p['namespace']}/{p['name']}", p["node"] or "-"]
                                                 for p in report["helped"]]))
    if report["unhelped"]:
        rows = []
        for p in report["unhelped"]:
            key = f"{p['namespace']}/{p['name']}"
            if not p["templates"]:
                rows.append([key, "-", p["reason"]])
            for index, (template, status) in enumerate(p["templates"].items()):
                rows.append([key if index == 0 else "", template, _reasons(status)])
        parts.append(f"Not helped ({len(report['unhelped'])})\n"
                     + _table(["POD", "TEMPLATE", "WHY NOT (on a new node of the template)"], rows))
    if report["remove"]:
        rows = [[r["node"], ", ".join(f"{p['pod']} -> {p['node']}" for p in r["pods"]) or "(no pods to move)"]
                for r in report["remove"]]
        parts.append(f"Remove ({len(report['remove'])}): their pods move elsewhere\n"
                     + _table(["NODE", "PODS MOVE"], rows))
    if report["keep"]:
        rows = [[k["node"], k["reason"], k["message"]] for k in report["keep"]]
        parts.append(f"Keep ({len(report['keep'])}): cannot be removed\n" + _table(["NODE", "REASON", "WHY"], rows))
    verdict = ("Verified: simulating the snapshot with these nodes added and removed schedules every helped pod "
               "and every moved pod." if s["verified"] else
               "NOT verified: the simulation with every change together left a helped or moved pod unscheduled.")
    parts.append("\n".join(textwrap.wrap(
        f"{s['pending']} pending, {s['helped']} helped, {s['unhelped']} not helped; {s['nodesAdded']} node(s) to add, "
        f"{s['nodesRemovable']} removable. {verdict}",
        100, break_on_hyphens=False)))
    return "\n\n".join(parts) + "\n"


def plan_html(plan: Any, *, title: str = "kopfsched plan") -> str:
    report = plan.report
    before, after = plan.before_view, plan.after_view
    for view in (before, after):
        for pod in view["pods"]:
            pod.setdefault("reasons", reason_counts(pod.get("message") or ""))
    return page({"kind": "plan", "title": title, "plan": {k: report[k] for k in (
        "templates", "add", "addedNodes", "helped", "unhelped", "remove", "keep", "summary")},
        "before": before, "after": after})
