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


def _node_state(node) -> tuple:
    """Everything a NodeInfo's pods make of it, dict orders included."""
    return (list(node.pods.items()), list(node.pods_with_affinity.items()),
            list(node.pods_with_required_anti_affinity.items()), node.requested.as_dict(),
            dict(node.requested.scalar), node.non_zero_requested.as_dict(),
            [(ip, sorted(slot)) for ip, slot in node.used_ports._ports.items()],
            list(node.pvc_ref_counts.items()))


def _random_pod(rng: random.Random, i: int) -> dict:
    ports = rng.choice([None, [8080], [("10.0.0.1", "UDP", 53), 8080], [9000, 9001]])
    claims = rng.choice([[], ["a"], ["a", "b"], ["a", "a"], ["c"]])
    affinity = rng.choice([None,
                           {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                               {"weight": 1, "podAffinityTerm": {"topologyKey": "zone",
                                                                 "labelSelector": {"matchLabels": {"app": "a"}}}}]}},
                           {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                               {"topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {"app": "a"}}}]}}])
    requests = rng.choice([{"cpu": "100m"}, {"cpu": "1", "memory": "1Gi"}, {"nvidia.com/gpu": 1, "cpu": "2"}, {}])
    volumes = [{"name": f"v{k}", "persistentVolumeClaim": {"claimName": c}} for k, c in enumerate(claims)]
    return make_pod(f"p{i}", uid=f"u{i}", requests=requests, host_ports=ports, affinity=affinity,
                    labels={"app": rng.choice("ab")}, **({"volumes": volumes} if volumes else {}))


@pytest.mark.parametrize("seed", range(30))
def test_confirming_an_assumed_pod_leaves_the_node_as_removing_and_adding_it(seed):
    """The watch's confirmation of our own bind swaps the PodInfo on its node (NodeInfo.replace_pod)
    instead of taking it off and counting it again: the node ends up exactly as that would leave
    it, down to the order of its dicts, and its generation changes."""
    rng = random.Random(seed)
    cache, reference = Cache(), Cache()
    for c in (cache, reference):
        c.add_node(make_node("n1", cpu="64", memory="256Gi", extended={"nvidia.com/gpu": "8"}))
    raws = [_random_pod(rng, i) for i in range(12)]
    assumed = {}
    for raw in raws:
        if rng.random() < 0.3:  # bound by someone else already
            bound = {**raw, "spec": {**raw["spec"], "nodeName": "n1"}}
            cache.add_pod(bound)
            reference.add_pod(bound)
        else:
            assumed[raw["metadata"]["uid"]] = (raw, cache.assume_pod(PodInfo(raw), "n1"),
                                              reference.assume_pod(PodInfo(raw), "n1"))
    order = list(assumed.values())
    rng.shuffle(order)
    for raw, ours, theirs in order:
        bound = {**raw, "spec": {**raw["spec"], "nodeName": "n1"}, "status": {"phase": "Pending"}}
        node = cache.get_node("n1")
        generation = node.generation
        confirmed = cache.add_pod(bound, pod_info=ours.placed(bound))
        assert node.generation != generation and not cache.is_assumed(ours.uid)
        assert cache.get_pod(ours.uid) is confirmed and node.pods[ours.uid] is confirmed
        # The straightforward way: off the node, then counted again.
        ref_node = reference.get_node("n1")
        ref_node.remove_pod(theirs)
        ref_node.add_pod(PodInfo(bound))
        reference._pods[theirs.uid].pod_info = ref_node.pods[theirs.uid]
        reference._pods[theirs.uid].assumed = False
        ours_state, ref_state = _node_state(node), _node_state(ref_node)
        assert [uid for uid, _ in ours_state[0]] == [uid for uid, _ in ref_state[0]]
        assert [uid for uid, _ in ours_state[1]] == [uid for uid, _ in ref_state[1]]
        assert [uid for uid, _ in ours_state[2]] == [uid for uid, _ in ref_state[2]]
        assert ours_state[3:] == ref_state[3:]
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert cache.stats() == {"nodes": 1, "pods": len(raws), "assumed_pods": 0}


def test_a_confirmation_that_counts_otherwise_takes_the_long_way():
    """Requests not shared with the assumed PodInfo (a new PodInfo), another node, or a ghost
    node: removed and added again, as before."""
    cache = Cache()
    cache.add_node(make_node("n1"))
    cache.add_node(make_node("n2"))
    raw = make_pod("p", uid="u", requests={"cpu": "500m"})
    assumed = cache.assume_pod(PodInfo(raw), "n1")
    node = cache.get_node("n1")
    assert not node.replace_pod(assumed, PodInfo({**raw, "spec": {**raw["spec"], "nodeName": "n1",
                                                                  "containers": [{"name": "c", "resources": {
                                                                      "requests": {"cpu": "2"}}}]}}))
    assert node.pods["u"] is assumed and node.requested.milli_cpu == 500
    bigger = {**raw, "spec": {**raw["spec"], "nodeName": "n1",
                              "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}
    cache.add_pod(bigger)
    assert node.requested.milli_cpu == 2000 and node.pods["u"].pod is bigger
    other = make_pod("q", uid="v", requests={"cpu": "1"})
    assumed_other = cache.assume_pod(PodInfo(other), "n1")
    elsewhere = {**other, "spec": {**other["spec"], "nodeName": "n2"}}
    cache.add_pod(elsewhere, pod_info=assumed_other.placed(elsewhere))
    assert node.requested.milli_cpu == 2000 and "v" not in node.pods
    assert cache.get_node("n2").requested.milli_cpu == 1000
    ghost = make_pod("g", uid="w", requests={"cpu": "1"})
    assumed_ghost = cache.assume_pod(PodInfo(ghost), "n2")
    cache.remove_node("n2")
    bound = {**ghost, "spec": {**ghost["spec"], "nodeName": "n2"}}
    cache.add_pod(bound, pod_info=assumed_ghost.placed(bound))
    assert cache.get_pod("w").pod is bound and not cache.is_assumed("w")
    assert cache._nodes["n2"].requested.milli_cpu == 2000


def test_placed_shares_every_attribute_but_the_pod_and_its_spec():
    from kopfsched.framework.types import _SHARED_WHEN_PLACED
    raw = make_pod("p", requests={"cpu": "1"}, host_ports=[80], labels={"a": "b"},
                   affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                       {"topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b"}}}]}},
                   volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}], priority=7)
    info = PodInfo(raw)
    assert set(_SHARED_WHEN_PLACED) == set(PodInfo.__slots__) - {"__dict__", "pod", "spec"}
    bound = {**raw, "spec": {**raw["spec"], "nodeName": "n"}}
    placed = info.placed(bound)
    for name in _SHARED_WHEN_PLACED:
        assert getattr(placed, name) is getattr(info, name), name
    assert placed.pod is bound and placed.spec is bound["spec"] and placed.node_name == "n"
