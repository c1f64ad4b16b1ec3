"""QoSSort's order and upstream's QoS classes, with kopfsched's test helpers."""

from __future__ import annotations

import pytest
from kopfsched.testing import make_node, make_pod, queued_pod, schedule

from kopfsched_qos_sort import BEST_EFFORT, BURSTABLE, GUARANTEED, QOSSort, QoSSort, get_pod_qos


def resources(requests=None, limits=None):
    res = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return {"resources": res}


def pod_with(*containers, init=(), pod_level=None, status_qos=None):
    pod = make_pod("p")
    pod["spec"]["containers"] = [{"name": f"c{i}", "image": "pause", **c} for i, c in enumerate(containers)]
    if init:
        pod["spec"]["initContainers"] = [{"name": f"i{i}", "image": "pause", **c} for i, c in enumerate(init)]
    if pod_level is not None:
        pod["spec"]["resources"] = pod_level
    if status_qos:
        pod["status"]["qosClass"] = status_qos
    return pod


EQUAL = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(("pod", "expected"), [
    pytest.param(pod_with({}), BEST_EFFORT, id="nothing"),
    pytest.param(pod_with(resources({"cpu": "0"}, {"memory": "0"})), BEST_EFFORT, id="zero-amounts"),
    pytest.param(pod_with(resources({"nvidia.com/gpu": "1"})), BEST_EFFORT, id="only-other-resources"),
    pytest.param(pod_with(resources(EQUAL, EQUAL)), GUARANTEED, id="requests-equal-limits"),
    pytest.param(pod_with(resources({"cpu": "1000m", "memory": "1024Mi"}, EQUAL)), GUARANTEED,
                 id="equal-in-other-units"),
    pytest.param(pod_with(resources(None, EQUAL)), GUARANTEED, id="limits-only-default-requests"),
    pytest.param(pod_with(resources({"cpu": "500m", "memory": "1Gi"}, EQUAL)), BURSTABLE, id="request-below-limit"),
    pytest.param(pod_with(resources(EQUAL, {"cpu": "1"})), BURSTABLE, id="memory-limit-missing"),
    pytest.param(pod_with(resources({"cpu": "1"})), BURSTABLE, id="request-only"),
    pytest.param(pod_with(resources(EQUAL, EQUAL), {}), BURSTABLE, id="one-container-without-limits"),
    pytest.param(pod_with(resources(EQUAL, EQUAL), init=[resources(EQUAL, EQUAL)]), GUARANTEED,
                 id="init-container-guaranteed-too"),
    pytest.param(pod_with(resources(EQUAL, EQUAL), init=[resources({"cpu": "1"})]), BURSTABLE,
                 id="init-container-burstable"),
    pytest.param(pod_with({}, pod_level={"requests": EQUAL, "limits": EQUAL}), GUARANTEED, id="pod-level-guaranteed"),
    pytest.param(pod_with(resources(EQUAL, EQUAL), pod_level={"requests": EQUAL}), BURSTABLE,
                 id="pod-level-without-limits"),
    pytest.param(pod_with({}, status_qos=GUARANTEED), GUARANTEED, id="status-qos-class-wins"),
])
def test_get_pod_qos(pod, expected):
    assert get_pod_qos(pod) == expected


GUARANTEED_POD = {"resources": {"requests": EQUAL, "limits": EQUAL}}
BURSTABLE_POD = {"resources": {"requests": {"cpu": "1"}}}


def qpi(name, *, priority=0, timestamp=0.0, **container):
    pod = make_pod(name, priority=priority)
    pod["spec"]["containers"][0].update(container)
    return queued_pod(pod, timestamp=timestamp)


@pytest.mark.parametrize(("a", "b", "a_first"), [
    pytest.param(qpi("a", priority=10), qpi("b", priority=1, **GUARANTEED_POD), True, id="priority-beats-qos"),
    pytest.param(qpi("a", priority=1, **GUARANTEED_POD), qpi("b", priority=10), False, id="priority-beats-qos-2"),
    pytest.param(qpi("a", timestamp=2, **GUARANTEED_POD), qpi("b", timestamp=1, **BURSTABLE_POD), True,
                 id="guaranteed-before-older-burstable"),
    pytest.param(qpi("a", timestamp=2, **BURSTABLE_POD), qpi("b", timestamp=1), True,
                 id="burstable-before-older-best-effort"),
    pytest.param(qpi("a", timestamp=2), qpi("b", timestamp=1, **GUARANTEED_POD), False,
                 id="best-effort-after-guaranteed"),
    pytest.param(qpi("a", timestamp=1), qpi("b", timestamp=2), True, id="same-qos-older-first"),
    pytest.param(qpi("a", timestamp=1), qpi("b", timestamp=1), False, id="same-everything-not-less"),
])
def test_less(a, b, a_first):
    assert QoSSort().less(a, b) is a_first


def test_upstream_name_is_the_same_plugin():
    assert (QOSSort.name, QoSSort.name) == ("QOSSort", "QoSSort")
    assert QOSSort().less(qpi("a", **GUARANTEED_POD), qpi("b"))


def test_a_guaranteed_pod_takes_the_last_slot_before_an_older_best_effort_pod():
    result = schedule(
        nodes=[make_node("n1", pods=1)],
        pods=[make_pod("best-effort", creation_timestamp="2024-01-01T00:00:00Z"),
              make_pod("guaranteed", creation_timestamp="2024-01-01T00:00:05Z",
                       containers=[{"name": "c", "image": "pause", **GUARANTEED_POD}])],
        profile={"plugins": {"queueSort": {"enabled": [{"name": "QoSSort"}], "disabled": [{"name": "*"}]}}},
        plugins=[] if _installed() else [QoSSort],
    )
    assert result.order == ["guaranteed", "best-effort"]
    assert result.placements == {"guaranteed": "n1", "best-effort": None}


def _installed() -> bool:
    from kopfsched.plugins.registry import full_registry
    return "QoSSort" in full_registry()
