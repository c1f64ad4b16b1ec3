"""Cache: assumed pods, confirmation by the watch, forgetting, the snapshot."""

import random

import numpy as np
import pytest

from kopfsched.cache import Cache, Snapshot
from kopfsched.framework.node_table import ColumnSpec
from kopfsched.framework.resources import Resource
from kopfsched.framework.types import PodInfo
from tests.builders import make_node, make_pod

REQUESTED_CPU = ColumnSpec("test/requested.cpu", lambda n: n.requested.milli_cpu)


def _cache_with_node(**node_kwargs) -> Cache:
    cache = Cache()
    cache.add_node(make_node("n1", **node_kwargs))
    return cache


def test_assume_then_forget_restores_requested_exactly():
    cache = _cache_with_node()
    cache.add_pod(make_pod("running", requests={"cpu": "1", "memory": "1Gi"}, node_name="n1"))
    before = cache.get_node("n1").requested.clone()
    before_nonzero = cache.get_node("n1").non_zero_requested.clone()
    pod = PodInfo(make_pod("new", requests={"cpu": "700m", "memory": "2Gi"}, host_ports=[8080]))
    assumed = cache.assume_pod(pod, "n1")
    node = cache.get_node("n1")
    assert node.requested == Resource(milli_cpu=1700, memory=3 * 2**30)
    assert node.used_ports.check_conflict("0.0.0.0", "TCP", 8080)
    assert cache.is_assumed(pod.uid)
    cache.forget_pod(assumed)
    assert node.requested == before
    assert node.non_zero_requested == before_nonzero
    assert not node.used_ports.check_conflict("0.0.0.0", "TCP", 8080)
    assert not cache.is_assumed(pod.uid)
    assert len(node.pods) == 1


def test_pod_confirmed_by_watch_counts_once():
    cache = _cache_with_node()
    raw = make_pod("p", requests={"cpu": "500m"})
    assumed = cache.assume_pod(PodInfo(raw), "n1")
    bound = {**raw, "spec": {**raw["spec"], "nodeName": "n1"}}
    cache.add_pod(bound)
    node = cache.get_node("n1")
    assert node.requested.milli_cpu == 500
    assert len(node.pods) == 1
    assert not cache.is_assumed(assumed.uid)
    cache.forget_pod(assumed)  # a late forget of a confirmed pod changes nothing
    assert node.requested.milli_cpu == 500


def test_watch_shows_pod_on_another_node_than_assumed():
    cache = Cache()
    cache.add_node(make_node("n1"))
    cache.add_node(make_node("n2"))
    raw = make_pod("p", requests={"cpu": "1"})
    cache.assume_pod(PodInfo(raw), "n1")
    cache.add_pod({**raw, "spec": {**raw["spec"], "nodeName": "n2"}})
    assert cache.get_node("n1").requested.milli_cpu == 0
    assert cache.get_node("n2").requested.milli_cpu == 1000


def test_removing_a_bound_pod_frees_its_resources():
    cache = _cache_with_node()
    raw = make_pod("p", requests={"cpu": "1"}, node_name="n1")
    cache.add_pod(raw)
    assert cache.remove_pod(raw) is not None
    assert cache.get_node("n1").requested.milli_cpu == 0
    assert cache.remove_pod(raw) is None


def test_node_removed_with_pods_stays_as_ghost_until_pods_go():
    cache = _cache_with_node()
    raw = make_pod("p", requests={"cpu": "1"}, node_name="n1")
    cache.add_pod(raw)
    cache.remove_node("n1")
    assert cache.get_node("n1") is None
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert snapshot.num_nodes() == 0
    cache.remove_pod(raw)
    cache.add_node(make_node("n1"))
    cache.update_snapshot(snapshot)
    assert snapshot.get("n1").requested.milli_cpu == 0


def test_snapshot_interleaves_zones():
    cache = Cache()
    for name, zone in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("b2", "b")]:
        cache.add_node(make_node(name, labels={"topology.kubernetes.io/zone": zone}))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert [n.name for n in snapshot.node_infos()] == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_snapshot_refreshes_only_changed_rows():
    cache = Cache()
    for i in range(3):
        cache.add_node(make_node(f"n{i}"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    column = snapshot.table.column(REQUESTED_CPU)
    assert column.tolist() == [0, 0, 0]
    cache.assume_pod(PodInfo(make_pod("p", requests={"cpu": "250m"})), "n1")
    cache.update_snapshot(snapshot)
    assert snapshot.table.column(REQUESTED_CPU) is column  # refreshed in place, not rebuilt
    assert column.tolist() == [0, 250, 0]
    assert np.array_equal(snapshot.table.column(REQUESTED_CPU), np.array([0, 250, 0]))


def test_image_states_are_shared_and_counted_across_nodes():
    cache = Cache()
    cache.add_node(make_node("n1", images=[(["nginx:1.25", "docker.io/library/nginx:1.25"], 50_000_000)]))
    cache.add_node(make_node("n2", images=[(["nginx:1.25"], 50_000_000)]))
    assert cache.get_node("n1").image_states["nginx:1.25"].num_nodes == 2
    assert cache.get_node("n1").image_states["docker.io/library/nginx:1.25"].num_nodes == 1
    cache.remove_node("n2")
    assert cache.get_node("n1").image_states["nginx:1.25"].num_nodes == 1


def test_affinity_lists_follow_pods():
    cache = _cache_with_node()
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert snapshot.have_pods_with_affinity() == []
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    raw = make_pod("p", affinity=anti, node_name="n1")
    cache.add_pod(raw)
    cache.update_snapshot(snapshot)
    assert [n.name for n in snapshot.have_pods_with_affinity()] == ["n1"]
    assert [n.name for n in snapshot.have_pods_with_required_anti_affinity()] == ["n1"]
    cache.remove_pod(raw)
    cache.update_snapshot(snapshot)
    assert snapshot.have_pods_with_required_anti_affinity() == []


@pytest.mark.parametrize("seed", range(5))
def test_affinity_lists_kept_by_changed_node_equal_a_rebuild(seed):
    """Pods with and without (anti-)affinity assumed, confirmed, forgotten and removed at
    random: after every snapshot update the two lists are the ones a rebuild lists, in order."""
    rng = random.Random(seed)
    cache = Cache()
    for i in range(12):
        cache.add_node(make_node(f"n{i}", labels={"topology.kubernetes.io/zone": f"z{i % 3}"}))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    kinds = [None, {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
             {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
             {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                 {"weight": 5, "podAffinityTerm": term}]}}]
    assumed: list[PodInfo] = []
    bound: list[dict] = []
    for step in range(300):
        choice = rng.random()
        if choice < 0.4:
            pod = PodInfo(make_pod(f"p{step}", affinity=rng.choice(kinds)))
            assumed.append(cache.assume_pod(pod, f"n{rng.randrange(12)}"))
        elif choice < 0.6 and assumed:
            pod = assumed.pop(rng.randrange(len(assumed)))
            if rng.random() < 0.5:
                cache.forget_pod(pod)
            else:
                cache.add_pod(pod.pod)
                bound.append(pod.pod)
        elif bound:
            cache.remove_pod(bound.pop(rng.randrange(len(bound))))
        if step == 150:  # a new node: the lists are rebuilt, then kept again
            cache.add_node(make_node("n12", labels={"topology.kubernetes.io/zone": "z0"}))
        cache.update_snapshot(snapshot)
        nodes = snapshot.node_infos()
        assert snapshot.have_pods_with_affinity() == [n for n in nodes if n.pods_with_affinity]
        assert snapshot.have_pods_with_required_anti_affinity() == [
            n for n in nodes if n.pods_with_required_anti_affinity]


def test_an_assumed_pod_shares_what_was_computed_for_it():
    cache = _cache_with_node()
    pending = PodInfo(make_pod("p", requests={"cpu": "500m"}, host_ports=[8080], labels={"app": "a"}))
    assumed = cache.assume_pod(pending, "n1")
    assert assumed.node_name == "n1" and pending.node_name == ""
    assert assumed.requests is pending.requests and assumed.host_ports == pending.host_ports
    assert (assumed.key, assumed.uid, assumed.labels) == (pending.key, pending.uid, {"app": "a"})


def _confirmed(labels_then: dict, labels_now: dict, cpu_now: str = "500m") -> PodInfo:
    """The cache's PodInfo after the watch shows, bound, a pod assumed with `labels_then`."""
    from tests.harness import Harness
    h = Harness([make_node("n1")])
    pending = make_pod("p", requests={"cpu": "500m"}, labels=labels_then)
    assumed = h.scheduler.cache.assume_pod(PodInfo(pending), "n1")
    bound = make_pod("p", requests={"cpu": cpu_now}, labels=labels_now, node_name="n1")
    bound["metadata"]["uid"] = assumed.uid
    h.handlers.on_pod_upsert(bound, pending)
    confirmed = h.scheduler.cache.get_pod(assumed.uid)
    assert confirmed is not None and confirmed.pod is bound and not h.scheduler.cache.is_assumed(assumed.uid)
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == confirmed.requests.milli_cpu
    return confirmed


def test_the_watch_confirming_an_assumed_pod_reads_what_changed_meanwhile():
    assert _confirmed({"app": "a"}, {"app": "a"}).labels == {"app": "a"}
    assert _confirmed({"app": "a"}, {"app": "b"}).labels == {"app": "b"}
    assert _confirmed({"app": "a"}, {"app": "a"}, cpu_now="2").requests.milli_cpu == 2000
