"""A pod's QoS class, as upstream's qos.GetPodQOS (pkg/apis/core/v1/helper/qos).

Only cpu and memory count, and only positive amounts. Guaranteed: every container (init
containers included) has cpu and memory limits, and the summed requests equal the summed
limits for each resource. BestEffort: no requests and no limits at all. Anything else is
Burstable. With pod-level resources (`spec.resources`, on by default since v1.34) those
decide alone, and a pod without pod-level limits is at most Burstable.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kopfsched.framework.quantity import QuantityError, parse_quantity

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

QOS_RANK = {BEST_EFFORT: 1, BURSTABLE: 2, GUARANTEED: 3}
"""Higher is better, as scheduler-plugins' compQOS."""

_QOS_RESOURCES = ("cpu", "memory")


def get_pod_qos(pod: Mapping[str, Any]) -> str:
    """`status.qosClass` when the API server set it (it always does), else computed."""
    recorded = (pod.get("status") or {}).get("qosClass")
    return recorded if recorded in QOS_RANK else compute_pod_qos(pod)


def compute_pod_qos(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec") or {}
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping):  # upstream: whenever spec.resources is set
        pod_limits = _positive(pod_level.get("limits"))
        _add(requests, _positive(_defaulted_requests(pod_level)))
        _add(limits, pod_limits)
        guaranteed = all(name in pod_limits for name in _QOS_RESOURCES)
    else:
        for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
            resources = container.get("resources") or {}
            container_limits = _positive(resources.get("limits"))
            _add(requests, _positive(_defaulted_requests(resources)))
            _add(limits, container_limits)
            if not all(name in container_limits for name in _QOS_RESOURCES):
                guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and any(limits.get(name) != amount for name, amount in requests.items()):
        guaranteed = False
    return GUARANTEED if guaranteed and len(requests) == len(limits) else BURSTABLE


def _defaulted_requests(resources: Mapping[str, Any]) -> Mapping[str, Any]:
    # The API server defaults a missing request to its limit before anyone reads the pod;
    # simulate's hand-written pods skip the API server, so do it here.
    return {**(resources.get("limits") or {}), **(resources.get("requests") or {})}


def _positive(raw: Mapping[str, Any] | None) -> dict[str, Fraction]:
    amounts: dict[str, Fraction] = {}
    for name, quantity in (raw or {}).items():
        if name not in _QOS_RESOURCES:
            continue
        try:
            value = parse_quantity(quantity)
        except QuantityError:
            continue  # the API server rejects such a pod; never fail a queue comparison on it
        if value > 0:
            amounts[name] = value
    return amounts


def _add(total: dict[str, Fraction], amounts: Mapping[str, Fraction]) -> None:
    for name, value in amounts.items():
        total[name] = total.get(name, Fraction(0)) + value
