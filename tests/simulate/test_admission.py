"""What the API server does to simulate's input pods before a scheduler sees them."""

from __future__ import annotations

import asyncio

from kopfsched.simulate.explain import explain_pod
from kopfsched.simulate.loader import default_requests, load_objects
from tests.builders import make_node


def test_set_default_requests_pod():
    """Upstream's TestSetDefaultRequestsPod (pkg/apis/core/v1): a limit without a request
    becomes the request, in containers and init containers; a request given is kept."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                                   "requests": {"memory": "512Mi"}}}],
        "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "2"}}}]}}
    inputs = load_objects([pod], "test")
    default_requests(inputs)
    spec = inputs.pods[0].obj["spec"]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "512Mi"}
    assert spec["initContainers"][0]["resources"]["requests"] == {"cpu": "2"}


def test_limits_only_pod_is_filtered_by_its_limits():
    """Found by the differential tests: a pod with limits only did fit a node smaller than
    its limits, where kube-scheduler (after the API server's defaulting) rejects it."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "a", "resources": {"limits": {"cpu": "1100m"}}}]}}
    inputs = load_objects([make_node("n1", cpu="1"), pod], "test")
    entry = asyncio.run(explain_pod(inputs, "default/p")).entry
    assert entry["result"] == "Unschedulable"
    assert entry["filter"]["n1"]["reasons"] == ["Insufficient cpu"]
