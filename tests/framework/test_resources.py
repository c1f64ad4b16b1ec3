"""Quantities and upstream's effective-request rule."""

import pytest

from kopfsched.framework.quantity import QuantityError, int_value, milli_value, parse_quantity
from kopfsched.framework.resources import Resource, pod_non_zero_requests, pod_requests, pod_requests_and_non_zero
from tests.builders import make_pod


@pytest.mark.parametrize(
    ("quantity", "milli", "value"),
    [
        pytest.param("100m", 100, 1, id="millis-round-up"),
        pytest.param("1.5", 1500, 2, id="decimal"),
        pytest.param("2", 2000, 2, id="integer"),
        pytest.param(3, 3000, 3, id="int"),
        pytest.param("1Ki", 1024000, 1024, id="binary-suffix"),
        pytest.param("1k", 1000000, 1000, id="decimal-suffix"),
        pytest.param("1e3", 1000000, 1000, id="exponent"),
        pytest.param("0.1m", 1, 1, id="sub-milli-rounds-up"),
        pytest.param("500Mi", 524288000000, 524288000, id="mebibytes"),
        # Found by tests/fuzz: a huge exponent was a billion-digit integer (unbounded time and memory).
        pytest.param("1e999999999", 10**103, 10**100, id="huge-exponent-clamped"),
        pytest.param("1e-999999999", 1, 1, id="tiny-exponent-rounds-up"),
        pytest.param("-2E+99999999999999999999", -2 * 10**103, -2 * 10**100, id="exponent-beyond-int64"),
    ],
)
def test_quantities(quantity, milli, value):
    assert milli_value(quantity) == milli
    assert int_value(quantity) == value


@pytest.mark.parametrize("bad", ["abc", "1.2.3", "1Kb", "", "--1", True, None, "1" * 5000])
def test_malformed_quantities_are_rejected(bad):
    with pytest.raises(QuantityError):
        milli_value(bad)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(requests=[{"cpu": "1"}, {"cpu": "500m", "memory": "1Gi"}]),
                     {"cpu": 1500, "memory": 2**30}, id="containers-add-up"),
        pytest.param(make_pod(requests={"cpu": "1"}, init_requests=[{"cpu": "2"}]),
                     {"cpu": 2000}, id="init-container-larger-wins"),
        pytest.param(make_pod(requests={"cpu": "1"}, init_requests=[{"cpu": "500m"}]),
                     {"cpu": 1000}, id="init-container-smaller-ignored"),
        pytest.param(make_pod(requests={"cpu": "1"}, sidecar_requests=[{"cpu": "200m"}]),
                     {"cpu": 1200}, id="sidecar-adds-to-containers"),
        pytest.param(make_pod(requests={"cpu": "1"}, initContainers=[
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}},
            {"name": "init", "resources": {"requests": {"cpu": "1900m"}}}]),
                     {"cpu": 2100}, id="init-runs-beside-earlier-sidecars"),
        pytest.param(make_pod(requests={"cpu": "1"}, initContainers=[
            {"name": "init", "resources": {"requests": {"cpu": "1900m"}}},
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}}]),
                     {"cpu": 1900}, id="init-before-sidecar-runs-alone"),
        pytest.param(make_pod(requests={"cpu": "1"}, overhead={"cpu": "250m", "memory": "120Mi"}),
                     {"cpu": 1250, "memory": 120 * 2**20}, id="overhead-added"),
        pytest.param(make_pod(requests={"cpu": "1"}, resources={"requests": {"cpu": "3"}}),
                     {"cpu": 3000}, id="pod-level-requests-replace"),
        pytest.param(make_pod(requests={"nvidia.com/gpu": "2"}), {"nvidia.com/gpu": 2}, id="extended"),
    ],
)
def test_pod_requests(pod, expected):
    assert pod_requests(pod) == expected


def test_non_zero_requests_fill_in_defaults_per_container():
    pod = make_pod(requests=[{"cpu": "300m"}, {}])
    assert pod_non_zero_requests(pod) == (400, 2 * 200 * 1024 * 1024)


def _resized(spec_cpu: str, *, running: str | None, allocated: str | None = None,
             infeasible: bool = False) -> dict:
    """One container whose spec asks `spec_cpu` while its status reports what it runs with."""
    pod = make_pod("resized", requests={"cpu": spec_cpu, "memory": "1Gi"})
    status: dict = {"name": "c0"}
    if running is not None:
        status["resources"] = {"requests": {"cpu": running, "memory": "1Gi"}}
    if allocated is not None:
        status["allocatedResources"] = {"cpu": allocated, "memory": "1Gi"}
    pod["status"] = {"phase": "Running", "containerStatuses": [status]}
    if infeasible:
        pod["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    return pod


@pytest.mark.parametrize(
    ("pod", "cpu"),
    [
        pytest.param(_resized("2", running="1"), 2000, id="upsize-pending-counts-the-spec"),
        pytest.param(_resized("1", running="2"), 2000, id="downsize-pending-counts-what-runs"),
        pytest.param(_resized("1", running="1", allocated="3"), 3000, id="allocated-larger"),
        pytest.param(_resized("4", running="1", allocated="2", infeasible=True), 2000,
                     id="infeasible-ignores-the-spec"),
        # v1.37 counts the allocation without resources in the status (v1.34 counted the spec).
        pytest.param(_resized("2", running=None, allocated="3"), 3000, id="allocated-without-status-resources"),
        pytest.param(_resized("2", running=None, allocated="1"), 2000, id="allocated-below-the-spec"),
        pytest.param(_resized("2", running=None, allocated="3", infeasible=True), 3000,
                     id="infeasible-allocated-only"),
    ],
)
def test_in_place_resize_counts_the_larger_of_spec_and_status(pod, cpu):
    """upstream's PodRequests with UseStatusResources (InPlacePodVerticalScaling, on since v1.33)."""
    assert pod_requests(pod)["cpu"] == cpu


def test_in_place_resize_takes_the_larger_of_the_sums_not_of_each_container():
    """v1.37 sums the spec, the allocations and what runs over all containers, then takes the
    larger sum per resource: one container grown and one shrunk count the larger total, not
    each container's larger size (3 cpu, not 4)."""
    pod = make_pod("resized", requests=[{"cpu": "2"}, {"cpu": "1"}])
    pod["status"] = {"phase": "Running", "containerStatuses": [
        {"name": "c0", "allocatedResources": {"cpu": "1"}}, {"name": "c1", "allocatedResources": {"cpu": "2"}}]}
    assert pod_requests(pod)["cpu"] == 3000


def test_in_place_resize_reads_sidecar_statuses():
    """A restartable init container's status counts as a regular container's does."""
    pod = make_pod("resized", requests={"cpu": "1"})
    pod["spec"]["initContainers"] = [{"name": "side", "restartPolicy": "Always",
                                      "resources": {"requests": {"cpu": "500m"}}}]
    pod["status"] = {"phase": "Running", "initContainerStatuses": [
        {"name": "side", "allocatedResources": {"cpu": "2"}, "resources": {"requests": {"cpu": "2"}}}]}
    assert pod_requests(pod)["cpu"] == 3000


def test_infeasible_resize_without_statuses_counts_nothing():
    """upstream: with the resize Infeasible a container without status counts neither spec nor status."""
    pod = make_pod("resized", requests={"cpu": "1"})
    pod["status"] = {"phase": "Running", "conditions": [
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]}
    assert pod_requests(pod).get("cpu", 0) == 0


def _pod_level_resized(spec_cpu: str, *, running: str | None = None, allocated: str | None = None,
                       infeasible: bool = False) -> dict:
    """A pod with pod-level requests (2 cpu in its container) during a pod-level resize."""
    pod = make_pod("resized", requests={"cpu": "2", "memory": "1Gi"})
    pod["spec"]["resources"] = {"requests": {"cpu": spec_cpu}}
    pod["status"] = {"phase": "Running"}
    if running is not None:
        pod["status"]["resources"] = {"requests": {"cpu": running}}
    if allocated is not None:
        pod["status"]["allocatedResources"] = {"cpu": allocated, "memory": "2Gi"}
    if infeasible:
        pod["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    return pod


@pytest.mark.parametrize(
    ("pod", "cpu", "memory"),
    [
        pytest.param(_pod_level_resized("3"), 3000, 1 << 30, id="no-resize-counts-the-pod-level-spec"),
        # Without status.resources the pod-level status is not read, allocatedResources neither.
        pytest.param(_pod_level_resized("3", allocated="5"), 3000, 1 << 30, id="allocated-alone-is-not-read"),
        pytest.param(_pod_level_resized("3", running="4"), 4000, 1 << 30, id="downsize-pending-counts-what-runs"),
        pytest.param(_pod_level_resized("4", running="1"), 4000, 1 << 30, id="upsize-pending-counts-the-spec"),
        # allocatedResources lists memory, a pod-level resource the spec leaves to the containers.
        pytest.param(_pod_level_resized("3", running="1", allocated="5"), 5000, 2 << 30, id="allocated-largest"),
        # Infeasible: no spec at all, the containers' (they have no statuses) nor the pod's.
        pytest.param(_pod_level_resized("6", running="1", infeasible=True), 1000, 0,
                     id="infeasible-ignores-the-spec"),
    ],
)
def test_pod_level_resize_counts_the_larger_of_spec_and_status(pod, cpu, memory):
    """InPlacePodLevelResourcesVerticalScaling (beta, on in v1.37): effectivePodLevelResources."""
    requests = pod_requests(pod)
    assert (requests["cpu"], requests.get("memory", 0)) == (cpu, memory)
    assert pod_requests_and_non_zero(pod)[0] == requests


def test_pod_level_huge_pages_replace_the_containers_sum():
    pod = make_pod("huge", requests={"cpu": "1", "hugepages-2Mi": "4Mi"})
    pod["spec"]["resources"] = {"requests": {"hugepages-2Mi": "8Mi"}}
    assert pod_requests(pod) == {"cpu": 1000, "hugepages-2Mi": 8 << 20}


def _infeasible_without_memory_in_status() -> dict:
    pod = _resized("1", running="1", infeasible=True)
    del pod["status"]["containerStatuses"][0]["resources"]["requests"]["memory"]
    return pod


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod(requests=[{"cpu": "300m", "memory": "1Gi"}, {"cpu": "1"}]),
                     id="container-without-memory"),
        pytest.param(make_pod(requests={"cpu": "1", "memory": "1Gi"}, init_requests=[{"memory": "2Gi"}]),
                     id="init-container-without-cpu"),
        pytest.param(make_pod(requests={"cpu": "1", "memory": "1Gi"}, sidecar_requests=[{}]),
                     id="sidecar-without-requests"),
        pytest.param(make_pod(requests={"cpu": "0", "memory": "0"}), id="zero-requests-stated"),
        pytest.param(make_pod(requests={"cpu": "1", "memory": "1Gi"}, overhead={"cpu": "250m"}), id="overhead"),
        pytest.param(_infeasible_without_memory_in_status(), id="infeasible-resize-status-without-memory"),
        pytest.param(_resized("2", running="1"), id="resize-pending"),
    ],
)
def test_non_zero_requests_from_precomputed_requests_agree(pod):
    """PodInfo hands its requests in to save a second sum: the answer must not change."""
    assert pod_non_zero_requests(pod, pod_requests(pod)) == pod_non_zero_requests(pod)


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod(requests={"cpu": "1", "memory": "1Gi"}), id="both-stated"),
        pytest.param(make_pod(requests=[{"cpu": "300m"}, {}]), id="defaults-per-container"),
        pytest.param(make_pod(requests=[{"cpu": "0", "memory": "0"}, {"memory": "1Gi"}]), id="stated-zero-stays"),
        pytest.param(make_pod(requests={"cpu": "1", "nvidia.com/gpu": "2", "ephemeral-storage": "1Gi"}),
                     id="extended-and-storage"),
        pytest.param(make_pod(requests={"cpu": "1"}, init_requests=[{"cpu": "2"}]), id="init-container"),
        pytest.param(make_pod(requests={"cpu": "1"}, sidecar_requests=[{"cpu": "200m"}]), id="sidecar"),
        pytest.param(make_pod(requests={"cpu": "1"}, overhead={"cpu": "250m"}), id="overhead"),
        pytest.param(make_pod(requests={"cpu": "1"}, resources={"requests": {"cpu": "3"}}), id="pod-level"),
        pytest.param(_resized("2", running="1"), id="resize-pending"),
        pytest.param(_infeasible_without_memory_in_status(), id="infeasible-resize"),
        pytest.param({**make_pod(requests={"cpu": "1"}), "status": {"containerStatuses": [{"name": "c0"}]}},
                     id="statuses-without-resources"),
        pytest.param({"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "c"}]}}, id="no-resources"),
    ],
)
def test_requests_and_non_zero_in_one_pass_agree(pod):
    """PodInfo sums most pods in one pass: the same answer as the two functions."""
    requests, cpu, memory = pod_requests_and_non_zero(pod)
    assert requests == pod_requests(pod)
    assert (cpu, memory) == pod_non_zero_requests(pod)
    assert Resource.from_list(requests).as_dict() == {k: v for k, v in requests.items() if v}


@pytest.mark.parametrize("value, kind", [([1], "array"), ({"a": 1}, "object"), (None, "null")])
def test_a_quantity_of_the_wrong_type_names_it_as_json_does(value, kind) -> None:
    with pytest.raises(QuantityError) as raised:
        parse_quantity(value)
    assert str(raised.value) == f"quantity must be a string or a number, got {kind}"
