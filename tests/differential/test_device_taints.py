"""Device taints, tolerations and DeviceTaintRules (v1.37.2: DRADeviceTaints and
DRADeviceTaintRules GA, on) against kube-scheduler's own framework on random clusters: a few
nodes with a ResourceSlice each, devices with random taints, random rules, and one pod whose
claim asks for devices with random tolerations (API-valid ones), sometimes through
`firstAvailable` sub-requests with tolerations of their own, sometimes `allocationMode: All`.
Compared field by field as tests/differential/test_differential.py does (the oracle reads
the rules through upstream's ResourceSlice tracker)."""

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

DRIVERS = ("gpu.example.com", "nic.example.com")
KEYS = ("example.com/ecc", "example.com/drain")
VALUES = ("", "planned", "broken")
EFFECTS = ("NoSchedule", "NoExecute", "None")
EXAMPLES = 60


@st.composite
def device_taint(draw: st.DrawFn) -> dict[str, Any]:
    out = {"key": draw(st.sampled_from(KEYS)), "effect": draw(st.sampled_from(EFFECTS))}
    value = draw(st.sampled_from(VALUES))
    if value:
        out["value"] = value
    return out


@st.composite
def toleration(draw: st.DrawFn) -> dict[str, Any]:
    """Valid as the API server validates them: an empty key needs Exists, Exists no value."""
    key = draw(st.sampled_from(("", *KEYS)))
    operator = "Exists" if not key else draw(st.sampled_from(("Exists", "Equal", "")))
    out: dict[str, Any] = {"operator": operator} if operator else {}
    if key:
        out["key"] = key
    if operator != "Exists":
        value = draw(st.sampled_from(VALUES))
        if value:
            out["value"] = value
    effect = draw(st.sampled_from(("", "NoSchedule", "NoExecute")))
    if effect:
        out["effect"] = effect
    return out


@st.composite
def exact(draw: st.DrawFn, class_name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"deviceClassName": class_name}
    if draw(st.integers(0, 4)) == 0:
        spec["allocationMode"] = "All"
    else:
        spec["allocationMode"], spec["count"] = "ExactCount", draw(st.integers(1, 2))
    tolerations = draw(st.lists(toleration(), max_size=2))
    if tolerations:
        spec["tolerations"] = tolerations
    return spec


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    devices: list[tuple[str, str, str]] = []
    for n in range(draw(st.integers(1, 3))):
        name = f"node-{n}"
        objects.append(node(name, "4", "4Gi"))
        driver = draw(st.sampled_from(DRIVERS))
        slice_devices = []
        for d in range(draw(st.integers(1, 3))):
            raw: dict[str, Any] = {"name": f"dev-{d}"}
            taints = draw(st.lists(device_taint(), max_size=2))
            if taints:
                raw["taints"] = taints
            slice_devices.append(raw)
            devices.append((driver, name, raw["name"]))
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                        "metadata": {"name": f"{name}-{driver}"},
                        "spec": {"driver": driver, "nodeName": name, "devices": slice_devices,
                                 "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}})
    for r in range(draw(st.integers(0, 2))):
        spec: dict[str, Any] = {"taint": draw(device_taint())}
        if draw(st.integers(0, 5)):
            driver, pool, dev = draw(st.sampled_from(devices))
            spec["deviceSelector"] = {k: v for k, v in (("driver", driver), ("pool", pool), ("device", dev))
                                      if draw(st.booleans())}
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                        "metadata": {"name": f"rule-{r}"}, "spec": spec})
    objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "any"},
                    "spec": {}})
    if draw(st.booleans()):
        request: dict[str, Any] = {"name": "req", "exactly": draw(exact("any"))}
    else:
        subs = [{"name": f"sub-{i}", **draw(exact("any"))} for i in range(draw(st.integers(1, 3)))]
        request = {"name": "req", "firstAvailable": subs}
    objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "devices", "namespace": "default"},
                    "spec": {"devices": {"requests": [request]}}})
    claimant = pod("claimant", "100m", "64Mi")
    claimant["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimName": "devices"}]
    objects.append(claimant)
    return objects


@pytest.mark.timeout(900)
@seed(5055)  # KEP-5055, device taints
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(objects=clusters())
def test_device_taints_match_upstream(oracle: Oracle, objects: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        found = differences(oracle, objects, Path(workdir))
    assert not found, "\n".join(str(d) for d in found)
