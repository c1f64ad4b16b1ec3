"""Feature gates: kube-scheduler's `--feature-gates`, for the gates kopfsched can switch.

kopfsched behaves as kube-scheduler with its default gates (docs/feature-gates.md). The gates
listed in `KNOWN` change that behaviour when switched; the process-wide `GATES` is what the
Scheduler reads when it is built, as upstream reads its DefaultFeatureGate. The CLI sets it
from `--feature-gates Name=true|false,...`.
"""

from __future__ import annotations

from collections.abc import Mapping

POP_FROM_BACKOFF_Q = "SchedulerPopFromBackoffQ"

KNOWN: Mapping[str, bool] = {
    POP_FROM_BACKOFF_Q: True,
}
"""Gate -> its default (upstream's for the release kopfsched follows)."""


class FeatureGates:
    """The gates' values: the defaults, with the overrides given."""

    def __init__(self, overrides: Mapping[str, bool] | None = None) -> None:
        unknown = sorted(set(overrides or {}) - set(KNOWN))
        if unknown:
            raise ValueError(f"unknown feature gate {unknown[0]!r} (kopfsched can switch: {', '.join(sorted(KNOWN))})")
        self._values = {**KNOWN, **(overrides or {})}

    def enabled(self, name: str) -> bool:
        return self._values[name]

    def __repr__(self) -> str:
        return f"FeatureGates({self._values!r})"


def parse(text: str) -> FeatureGates:
    """`Name=true,Other=false` (kube-scheduler's --feature-gates syntax); ValueError, one line, otherwise."""
    overrides: dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or not name or value not in ("true", "false"):
            raise ValueError(f"invalid feature gate {item!r}: expected Name=true or Name=false")
        overrides[name] = value == "true"
    return FeatureGates(overrides)


GATES = FeatureGates()
"""The process's gates; `set_gates` replaces them (before any Scheduler is built)."""


def set_gates(gates: FeatureGates) -> None:
    global GATES
    GATES = gates


def enabled(name: str) -> bool:
    return GATES.enabled(name)
