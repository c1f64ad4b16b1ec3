"""The `dra` bench workload (scheduler_perf's SchedulingWithResourceClaimTemplate shape): its
objects, and every measured pod getting a device of its own through the real scheduler."""

from __future__ import annotations

import asyncio
import collections

from kopfsched.bench import runner
from kopfsched.bench.workloads import DRA_DRIVER, dra
from kopfsched.simulate.client import InMemoryClusterClient


def test_dra_workload_shape():
    workload = dra(3, 4, 5)
    kinds = collections.Counter(o["kind"] for o in workload.objects)
    assert kinds == {"DeviceClass": 1, "ResourceSlice": 3, "ResourceClaim": 9}
    slices = [o for o in workload.objects if o["kind"] == "ResourceSlice"]
    assert [len(s["spec"]["devices"]) for s in slices] == [10, 10, 10]
    held = [r["device"] for o in workload.objects if o["kind"] == "ResourceClaim" and "status" in o
            for r in o["status"]["allocation"]["devices"]["results"]]
    assert held == ["instance-0", "instance-0", "instance-0", "instance-1"]
    assert all(p["status"]["resourceClaimStatuses"][0]["resourceClaimName"] == f"{p['metadata']['name']}-resource"
               for p in workload.pods)


def test_dra_workload_gives_every_pod_its_own_device(monkeypatch):
    clients: list[InMemoryClusterClient] = []
    real = runner.InMemoryClusterClient

    def recording(**kwargs):
        clients.append(real(**kwargs))
        return clients[-1]

    monkeypatch.setattr(runner, "InMemoryClusterClient", recording)
    # 2 nodes x 10 devices: 4 held by init pods, 16 measured pods fill every other one.
    result = asyncio.run(runner.run_workload(dra(2, 4, 16)))
    assert (result["scheduled"], result["failedAttempts"]) == (16, 0)
    claims = [obj for (kind, ns, _), obj in clients[0].objects.items() if kind == "ResourceClaim" and ns == "test"]
    devices = [(r["driver"], r["pool"], r["device"]) for c in claims
               for r in c["status"]["allocation"]["devices"]["results"]]
    assert len(devices) == 16 and len(set(devices)) == 16
    assert {d[0] for d in devices} == {DRA_DRIVER}
    bound = {key.split("/")[1]: node for key, node in clients[0].bindings}
    for claim in claims:
        owner = claim["status"]["reservedFor"][0]["name"]
        assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == bound[owner]
