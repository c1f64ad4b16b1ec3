"""`kopfsched explain -o table`: the explanation for a person on an 80-column terminal.

Rejected nodes are grouped by verdict (plugin and reasons), largest group first; feasible
nodes are listed by rank with each Score plugin's normalized score under a short column
name (the legend gives the plugin and its weight). `--node N` shows one node in full.
"""

from __future__ import annotations

import textwrap
from typing import Any

WIDTH = 80
TOP_SCORED = 10
NAMES_SHOWN = 6


def abbreviations(plugins: list[str]) -> dict[str, str]:
    """NodeResourcesFit -> NRF: a plugin's capitals, made unique with a digit."""
    out: dict[str, str] = {}
    for name in plugins:
        short = "".join(c for c in name if c.isupper()) or name[:3]
        candidate, n = short, 2
        while candidate in out.values():
            candidate, n = f"{short}{n}", n + 1
        out[name] = candidate
    return out


def _wrap(text: str, indent: str = "  ", later: str | None = None) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=later or indent + "  ",
                         break_on_hyphens=False) or [indent]


def _verdict(status: dict[str, Any]) -> str:
    reasons = "; ".join(status["reasons"]) or status["code"]
    return f"{reasons} ({status['plugin']})" if status["plugin"] else reasons


def rejected_groups(filter_: dict[str, dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """[(verdict, nodes)], the largest group first, then by verdict."""
    groups: dict[str, list[str]] = {}
    for node, status in filter_.items():
        groups.setdefault(_verdict(status), []).append(node)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))


def _names(nodes: list[str]) -> str:
    shown = ", ".join(nodes[:NAMES_SHOWN])
    return shown + (f", ... and {len(nodes) - NAMES_SHOWN} more" if len(nodes) > NAMES_SHOWN else "")


def _header(entry: dict[str, Any]) -> list[str]:
    lines = [f"Pod {entry['namespace']}/{entry['name']}  schedulerName: {entry['schedulerName']}"
             + (f"  profile: {entry['profile']}" if entry["profile"] != entry["schedulerName"] else "")]
    if entry["note"]:
        lines += _wrap(f"Note: {entry['note']}.", "", "  ")
    if entry.get("modeText"):
        lines += _wrap(f"Mode: {entry['modeText']}.", "", "  ")
    result = entry["result"]
    counts = f"{entry['evaluatedNodes']} nodes evaluated, {entry['feasibleNodes']} feasible"
    if result == "Scheduled" and entry["victims"]:
        lines += _wrap(f"Result: Scheduled on {entry['node']} after preempting {', '.join(entry['victims'])}; "
                       "its first attempt failed with:", "", "  ")
        lines += _wrap(entry["message"], "  ", "  ")
    elif result == "Scheduled":
        lines.append(f"Result: fits; the scheduler would choose {entry['node']}")
    else:
        lines.append(f"Result: {result}")
        if entry["message"]:
            lines += _wrap(entry["message"], "  ", "  ")
    lines.append(f"  {counts}")
    return lines


def to_table(entry: dict[str, Any], *, node: str | None = None) -> str:
    if node is not None:
        return "\n".join([*_header(entry), "", *node_detail(entry, node)]) + "\n"
    lines = _header(entry)
    groups = rejected_groups(entry["filter"])
    if groups:
        lines += ["", f"Rejected nodes ({len(entry['filter'])}):"]
        for verdict, nodes in groups:
            lines += _wrap(f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}: {verdict}")
            lines += _wrap(_names(nodes), "      ", "      ")
    if entry["ranking"]:
        lines += ["", *score_table(entry)]
    preemption = entry.get("preemption")
    if preemption is not None:
        lines += ["", *preemption_lines(entry, preemption)]
    lines += ["", "Use --node NODE for one node's verdict and scores, -o json for everything."]
    return "\n".join(lines) + "\n"


def score_table(entry: dict[str, Any]) -> list[str]:
    weights: dict[str, int] = entry["weights"]
    scored = [name for name in weights if any(name in s for s in entry["scores"].values())]
    short = abbreviations(scored)
    ranking = entry["ranking"]
    shown = ranking[:TOP_SCORED]
    if entry["node"] and all(r["node"] != entry["node"] for r in shown):  # chosen among tied nodes further down
        shown = [*shown, next(r for r in ranking if r["node"] == entry["node"])]
    node_width = min(max(len("NODE"), *(len(r["node"]) for r in shown)), 24)
    head = f"{'RANK':>4}  {'NODE':<{node_width}}  {'TOTAL':>5}" + "".join(f"  {short[p]:>4}" for p in scored)
    lines = [f"Feasible nodes by score ({len(ranking)}" + (f", top {TOP_SCORED}" if len(ranking) > TOP_SCORED
                                                            else "") + "): normalized score per plugin (0-100)",
             head]
    for row in shown:
        scores = entry["scores"][row["node"]]
        mark = "*" if row["node"] == entry["node"] else " "
        name = row["node"] if len(row["node"]) <= node_width else row["node"][:node_width - 1] + "~"
        lines.append(f"{row['rank']:>3}{mark}  {name:<{node_width}}  {row['total']:>5}"
                     + "".join(f"  {scores.get(p, '-'):>4}" for p in scored))
    legend = ", ".join(f"{short[p]}={p} x{weights[p]}" for p in scored)
    lines += _wrap(f"TOTAL = sum of score x weight; * the chosen node. {legend}", "", "")
    return lines


def preemption_lines(entry: dict[str, Any], preemption: dict[str, Any]) -> list[str]:
    candidates = preemption["candidates"]
    if not candidates:
        return _wrap(f"Preemption cannot help: {preemption['reason']}.", "", "  ")
    chosen = entry["nominatedNode"] or preemption["chosen"]
    lines = _wrap(f"Preemption: {len(candidates)} candidate node(s); the scheduler would nominate {chosen} "
                  f"and evict {', '.join(entry['victims']) or 'nothing'}.", "", "  ")
    for c in candidates[:TOP_SCORED]:
        pdb = f" ({c['pdbViolations']} PDB violation(s))" if c["pdbViolations"] else ""
        lines += _wrap(f"{c['node']}: evict {', '.join(c['victims'])}{pdb}", "  ", "      ")
    if len(candidates) > TOP_SCORED:
        lines.append(f"  ... and {len(candidates) - TOP_SCORED} more candidates (-o json lists all)")
    return lines


def node_detail(entry: dict[str, Any], node: str) -> list[str]:
    lines = [f"Node {node}:"]
    status = entry["filter"].get(node)
    scores = entry["scores"].get(node)
    if status is not None:
        lines.append(f"  Filter: rejected by {status['plugin'] or 'no plugin'} ({status['code']})")
        lines += [line for reason in status["reasons"] for line in _wrap(f"- {reason}", "    ", "      ")]
    elif scores is not None:
        rank = next(r["rank"] for r in entry["ranking"] if r["node"] == node)
        chosen = " (the chosen node)" if node == entry["node"] else ""
        lines.append(f"  Filter: passed. Rank {rank} of {len(entry['ranking'])}{chosen}")
        width = max((len(p) for p in scores if p != "total"), default=6)
        lines.append(f"    {'PLUGIN':<{width}}  SCORE  WEIGHT  WEIGHTED")
        for plugin, weight in entry["weights"].items():
            if plugin in scores:
                lines.append(f"    {plugin:<{width}}  {scores[plugin]:>5}  {weight:>6}  {scores[plugin] * weight:>8}")
        lines.append(f"    {'total':<{width}}  {'':>5}  {'':>6}  {scores['total']:>8}")
    else:
        lines.append("  not evaluated")
    preemption = entry.get("preemption") or {}
    candidate = next((c for c in preemption.get("candidates", ()) if c["node"] == node), None)
    if candidate is not None:
        lines += _wrap(f"Preemption: the pod fits once {', '.join(candidate['victims'])} are evicted"
                       f" ({candidate['pdbViolations']} PDB violation(s))", "  ", "    ")
    elif node in preemption.get("nodes", {}):
        lines += _wrap(f"Preemption: cannot help here: {_verdict(preemption['nodes'][node])}", "  ", "    ")
    return lines
