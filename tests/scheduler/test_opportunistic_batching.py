"""OpportunisticBatching (beta, on in v1.37): signatures, hints, and placements as full
cycles give them."""

from __future__ import annotations

import pytest

from kopfsched.framework.types import PodInfo
from kopfsched.scheduler.batch import MAX_BATCH_AGE
from kopfsched.testing import make_node, make_pod
from tests.harness import Harness, profile_from_spec

NO_DEFAULT_SPREAD = {"pluginConfig": [{"name": "PodTopologySpread",
                                       "args": {"defaultingType": "List", "defaultConstraints": []}}]}
"""A profile whose pods can be signed: the default one's system default spread constraints
make every pod unsignable."""


def harness(nodes: list[dict], *, gates: str = "", spec: dict | None = None, seed: int = 0) -> Harness:
    h = Harness(nodes, seed=seed, gates=gates)
    h.scheduler.set_profiles([profile_from_spec({"schedulerName": "default-scheduler",
                                                 **(NO_DEFAULT_SPREAD if spec is None else spec)},
                                                h.registry)])
    return h


def framework(h: Harness):
    return h.scheduler.profiles.get("default-scheduler").framework


def batched(h: Harness) -> int:
    return h.scheduler.algorithm.batched_pods()


def pods(count: int, **kwargs) -> list[dict]:
    return [make_pod(f"p{i}", requests={"cpu": "1", "memory": "256Mi"}, **kwargs) for i in range(count)]


def sized_nodes() -> list[dict]:
    """Five nodes of five sizes. Two of them may tie after a few pods (then either run picks
    one at random): the seeds below meet no tie."""
    return [make_node(f"node-{i}", cpu=str(3 + 2 * i), memory=f"{4 + 3 * i}Gi") for i in range(5)]


def test_the_default_profile_signs_no_pod():
    h = Harness([make_node("n1")])
    assert not framework(h).signs_pods()
    assert framework(h).sign_pod(PodInfo(make_pod("p", requests={"cpu": "1"}))) is None


def test_alike_pods_share_a_signature_and_what_matters_tells_them_apart():
    fwk = framework(harness([make_node("n1")]))

    def sign(**kwargs) -> str | None:
        return fwk.sign_pod(PodInfo(make_pod("p", requests={"cpu": "1"}, **kwargs)))

    base = sign()
    assert base is not None
    assert fwk.sign_pod(PodInfo(make_pod("other-name", requests={"cpu": "1"}))) == base
    # Two requests of the same total sign alike: the pod's requests, not its containers, count.
    assert fwk.sign_pod(PodInfo(make_pod("split", requests=[{"cpu": "500m"}, {"cpu": "500m"}]))) == base
    assert fwk.sign_pod(PodInfo(make_pod("p", requests={"cpu": "2"}))) != base
    assert sign(labels={"app": "web"}) != base  # existing pods' affinity terms may match labels
    assert sign(tolerations=[{"key": "gpu", "operator": "Exists"}]) != base
    assert sign(node_selector={"zone": "a"}) != base
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    assert sign(topologySpreadConstraints=spread) is None
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    assert sign(affinity=affinity) is None
    claimant = make_pod("p", requests={"cpu": "1"})
    claimant["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
    assert fwk.sign_pod(PodInfo(claimant)) is None


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", [0, 2])
async def test_alike_pods_take_hints_and_land_where_full_cycles_put_them(seed: int):
    placements = {}
    for gates in ("", "OpportunisticBatching=false"):
        h = harness(sized_nodes(), gates=gates, seed=seed)
        h.add_pods(*pods(8))
        await h.settle()
        placements[gates] = {f"p{i}": h.node_of(f"p{i}") for i in range(8)}
        if gates:
            assert batched(h) == 0
        else:
            assert batched(h) == 7  # every pod after the first
    assert placements[""] == placements["OpportunisticBatching=false"]
    assert None not in placements[""].values() and len(set(placements[""].values())) > 1


@pytest.mark.asyncio
async def test_the_node_chosen_last_is_rescored_and_may_be_hinted_again():
    """v1.37 rescores the last chosen node before each hint: the big node stays the best for
    the second pod too, where the kept ranking alone would offer the small one."""
    h = harness([make_node("big", cpu="64", memory="128Gi"), make_node("small", cpu="2", memory="4Gi")])
    h.add_pods(*pods(2))
    await h.settle()
    assert (h.node_of("p0"), h.node_of("p1"), batched(h)) == ("big", "big", 1)


@pytest.mark.asyncio
async def test_a_pod_of_another_shape_gets_a_full_cycle():
    h = harness(sized_nodes())
    h.add_pods(make_pod("a", requests={"cpu": "1"}), make_pod("b", requests={"cpu": "2"}),
               make_pod("c", requests={"cpu": "1"}))
    await h.settle()
    assert batched(h) == 0  # each pod's signature differs from the one before it


@pytest.mark.asyncio
async def test_a_ranking_older_than_half_a_second_is_not_used():
    h = harness(sized_nodes())
    h.add_pods(*pods(1))
    await h.settle()
    h.clock.now += MAX_BATCH_AGE + 0.1
    h.add_pods(make_pod("late", requests={"cpu": "1", "memory": "256Mi"}))
    await h.settle()
    assert h.node_of("late") is not None and batched(h) == 0


@pytest.mark.asyncio
async def test_a_hint_that_no_longer_fits_falls_back_to_a_full_cycle():
    """Each 1-cpu pod fills a 1-cpu node: the hinted node is always the next free one, until
    none is left and the last pod is unschedulable."""
    nodes = [make_node(f"n{i}", cpu="1", memory=f"{2 + i}Gi") for i in range(3)]
    h = harness(nodes)
    h.add_pods(*pods(4))
    await h.settle()
    assert sorted(h.node_of(f"p{i}") or "-" for i in range(4)) == ["-", "n0", "n1", "n2"]
    assert batched(h) == 2
    assert "Insufficient cpu" in h.condition(next(f"p{i}" for i in range(4) if h.node_of(f"p{i}") is None))["message"]


@pytest.mark.asyncio
async def test_a_profile_with_a_plugin_that_cannot_sign_never_batches():
    spec = {**NO_DEFAULT_SPREAD, "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                                             "queueSort": {"disabled": [{"name": "PrioritySort"}]}}}
    h = harness(sized_nodes(), spec=spec)
    assert not framework(h).signs_pods()
    h.add_pods(*pods(3))
    await h.settle()
    assert batched(h) == 0


def test_a_pod_asking_for_a_dra_backed_extended_resource_is_not_signed():
    """NodeResourcesFit's and BalancedAllocation's SignPod refuse it (DRAExtendedResource)."""
    h = harness([make_node("n1")])
    h.add_objects("DeviceClass", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                  "metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}})
    fwk = framework(h)
    assert fwk.sign_pod(PodInfo(make_pod("p", requests={"cpu": "1", "example.com/gpu": "1"}))) is None
    assert fwk.sign_pod(PodInfo(make_pod("p", requests={"cpu": "1", "example.com/nic": "1"}))) is not None
