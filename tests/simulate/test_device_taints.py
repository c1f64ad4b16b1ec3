"""A snapshot with a tainted device and a DeviceTaintRule through `kopfsched simulate`: the
loader keeps DeviceTaintRules (cluster-scoped, resource.k8s.io/v1), the scheduler applies them,
and `--feature-gates` switches them and the devices' own taints off."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml

from kopfsched import features
from kopfsched.cli import main
from kopfsched.simulate.loader import load_files
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate

SNAPSHOT = """
apiVersion: v1
kind: Node
metadata: {name: gpu-1, labels: {kubernetes.io/hostname: gpu-1}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-1-gpu.example.com}
spec:
  driver: gpu.example.com
  nodeName: gpu-1
  pool: {name: gpu-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    taints: [{key: example.com/ecc, effect: NoSchedule}]
  - name: gpu-1
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: gpu-1-maintenance}
spec:
  deviceSelector: {driver: gpu.example.com, pool: gpu-1, device: gpu-1}
  taint: {key: example.com/maintenance, value: planned, effect: NoExecute}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: default}
spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.example.com}}]}}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  containers: [{name: c, image: x}]
  resourceClaims: [{name: gpu, resourceClaimName: gpu}]
"""


@pytest.fixture
def snapshot(tmp_path):
    path = tmp_path / "snapshot.yaml"
    path.write_text(SNAPSHOT)
    saved = features.GATES
    yield str(path)
    features.set_gates(saved)


def test_the_loader_keeps_device_taint_rules(snapshot):
    inputs = load_files([snapshot])
    assert inputs.problems == []
    assert [o.label for o in inputs.objects if o.obj["kind"] == "DeviceTaintRule"] == [
        "DeviceTaintRule/gpu-1-maintenance"]


@pytest.mark.parametrize(("gates", "device"), [
    pytest.param("", None, id="both-devices-tainted"),
    pytest.param("DRADeviceTaintRules=false", "gpu-1", id="rules-off"),
    pytest.param("DRADeviceTaints=false,DRADeviceTaintRules=false", "gpu-0", id="taints-off"),
])
def test_simulate_applies_device_taints_and_rules_as_the_gates_say(snapshot, gates, device):
    features.set_gates(features.parse(gates))
    sim = asyncio.run(simulate(load_files([snapshot]), seed=0, explain=True))
    [pod] = to_json(sim, explain=True)["pods"]
    allocation = (sim.client.objects[("ResourceClaim", "default", "gpu")].get("status") or {}).get("allocation")
    if device is None:
        assert (pod["node"], allocation) == (None, None)
        assert pod["message"] == ("0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are "
                                  "available: 1 Preemption is not helpful for scheduling.")
    else:
        assert pod["node"] == "gpu-1"
        assert [r["device"] for r in allocation["devices"]["results"]] == [device]


def test_simulate_takes_feature_gates_for_device_taints(snapshot, capsys):
    assert main(["simulate", snapshot, "-o", "json", "--feature-gates", "DRADeviceTaintRules=false"]) == 0
    assert json.loads(capsys.readouterr().out)["pods"][0]["node"] == "gpu-1"
    with pytest.raises(SystemExit) as usage:
        main(["simulate", snapshot, "--feature-gates", "DRADeviceTaints=false"])
    assert usage.value.code == 2
    assert ("DRADeviceTaintRules is enabled, but depends on features that are disabled: [DRADeviceTaints]"
            in capsys.readouterr().err)


def test_a_toleration_for_both_taints_gets_either_device(snapshot, capsys, tmp_path):
    docs = list(yaml.safe_load_all(SNAPSHOT))
    claim = next(d for d in docs if d["kind"] == "ResourceClaim")
    claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [{"operator": "Exists"}]
    path = tmp_path / "tolerating.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["simulate", str(path), "-o", "json"]) == 0
    [pod] = json.loads(capsys.readouterr().out)["pods"]
    assert pod["node"] == "gpu-1"
