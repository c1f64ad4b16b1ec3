"""Taints and tolerations, as upstream's v1.Toleration.ToleratesTaint and
component-helpers/scheduling/corev1 (TolerationsTolerateTaint, FindMatchingUntoleratedTaint).

Matching rules:
1. An empty toleration effect matches every effect; otherwise the effects must be equal.
2. An empty toleration key matches every key (the API only allows it with `Exists`).
3. Operator `Exists` matches any value; `Equal` (or empty) needs equal values.
4. `Lt`/`Gt` compare integer values (taint < / > toleration), only with the alpha feature
   TaintTolerationComparisonOperators; it is off by default, so they match nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Obj = dict[str, Any]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
UNSCHEDULABLE_TAINT: Obj = {"key": TAINT_NODE_UNSCHEDULABLE, "effect": NO_SCHEDULE}

ENABLE_COMPARISON_OPERATORS = False
"""Upstream's TaintTolerationComparisonOperators feature gate (alpha, off)."""


def tolerates_taint(toleration: Mapping[str, Any], taint: Mapping[str, Any], *,
                    comparison_operators: bool = ENABLE_COMPARISON_OPERATORS) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    if operator == "Exists":
        return True
    if operator in ("Lt", "Gt") and comparison_operators:
        return _compare(toleration.get("value") or "", taint.get("value") or "", operator)
    return False


def _compare(toleration_value: str, taint_value: str, operator: str) -> bool:
    try:
        bound, value = int(toleration_value), int(taint_value)
    except ValueError:
        return False
    return value < bound if operator == "Lt" else value > bound


def tolerations_tolerate_taint(tolerations: Iterable[Obj], taint: Obj) -> bool:
    return any(tolerates_taint(t, taint) for t in tolerations)


def do_not_schedule_taint(taint: Obj) -> bool:
    """The taints Filter cares about (upstream's DoNotScheduleTaintsFilterFunc)."""
    return taint.get("effect") in (NO_SCHEDULE, NO_EXECUTE)


def find_matching_untolerated_taint(taints: Sequence[Obj], tolerations: Sequence[Obj],
                                    inclusion: Callable[[Obj], bool] = do_not_schedule_taint) -> Obj | None:
    """The first taint that `inclusion` selects and no toleration tolerates, or None."""
    for taint in taints:
        if inclusion(taint) and not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None
