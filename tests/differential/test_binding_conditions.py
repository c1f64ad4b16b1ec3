"""Device binding conditions (v1.37.2: DRADeviceBindingConditions beta, on, with
DRAResourceClaimDeviceStatus GA) against kube-scheduler's own framework on random clusters: a
few nodes with a ResourceSlice each, some devices with binding conditions (now and then
`bindsToNode`), a claim allocated earlier to one of them in every binding state (no device
status yet, attached, failed; allocated long ago or within the timeout), and pods that ask
for that claim by name or for a new claim of one or two devices. Compared field by field as
tests/differential/test_differential.py does."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CI") != "true":  # under CI the test extra has it, and these tests must run
    pytest.importorskip("hypothesis", reason="hypothesis is not installed (the test extra has it)")

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.differential.harness import differences
from tests.differential.oracle import Oracle
from tests.differential.test_cases import node, pod

DRIVER = "gpu.example.com"
ATTACHED, FAILED = "gpu.example.com/attached", "gpu.example.com/failed"
EXAMPLES = 60


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                      "metadata": {"name": "gpu"}, "spec": {}}]
    bound: list[tuple[str, str]] = []
    for n in range(draw(st.integers(1, 3))):
        name = f"node-{n}"
        objects.append(node(name, "4", "4Gi"))
        devices = []
        for d in range(draw(st.integers(1, 2))):
            raw: dict[str, Any] = {"name": f"gpu-{d}"}
            if draw(st.booleans()):
                raw.update(bindingConditions=[ATTACHED], bindingFailureConditions=[FAILED])
                if draw(st.booleans()):
                    raw["bindsToNode"] = True
                bound.append((name, raw["name"]))
            devices.append(raw)
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                        "metadata": {"name": f"{name}-gpu"},
                        "spec": {"driver": DRIVER, "nodeName": name, "devices": devices,
                                 "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}})
    wants = []
    if bound and draw(st.booleans()):
        node_name, device = draw(st.sampled_from(bound))
        status: dict[str, Any] = {"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node_name, "device": device,
                                     "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]},
            "allocationTimestamp": draw(st.sampled_from(["2025-01-01T00:00:00Z", "2099-01-01T00:00:00Z"]))}}
        condition = draw(st.sampled_from([None, ATTACHED, FAILED]))
        if condition is not None:
            status["devices"] = [{"driver": DRIVER, "pool": node_name, "device": device, "conditions": [
                {"type": condition, "status": draw(st.sampled_from(["True", "False"])), "reason": "Fabric",
                 "message": "port 7", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}]
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": "held", "namespace": "default"},
                        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                            "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}},
                        "status": status})
        wants.append("held")
    objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "fresh", "namespace": "default"},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": "gpu", "allocationMode": "ExactCount",
                        "count": draw(st.integers(1, 2))}}]}}})
    wants.append("fresh")
    for i, claim in enumerate(draw(st.lists(st.sampled_from(wants), min_size=1, max_size=2))):
        claimant = pod(f"claimant-{i}", "100m", "64Mi")
        claimant["metadata"]["uid"] = f"uid-claimant-{i}"
        claimant["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{i}Z"
        claimant["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        objects.append(claimant)
    return objects


@pytest.mark.timeout(900)
@seed(5007)  # KEP-5007, device binding conditions
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(objects=clusters())
def test_binding_conditions_match_upstream(oracle: Oracle, objects: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        found = differences(oracle, objects, Path(workdir))
    assert not found, "\n".join(str(d) for d in found)
