"""The PV assume cache's per-claim lists: what a claim may bind of its class, assumptions in
place, kept from the object store's change log, in the order the PVs arrived."""

from __future__ import annotations

import copy

from kopfsched.cache.objects import ObjectStore
from kopfsched.plugins.volumebinding.assume_cache import PV, PVAssumeCache
from kopfsched.testing import FakeObjects
from tests.plugins.claims import pv

CLAIM = ("default", "data")


def names(pvs: list[dict]) -> list[str]:
    return [p["metadata"]["name"] for p in pvs]


def with_uid(obj: dict, uid: str) -> dict:
    obj["metadata"]["uid"] = uid
    return obj


def store_with(*pvs: dict) -> ObjectStore:
    store = ObjectStore()
    for obj in pvs:
        store.upsert(PV, obj)
    return store


def test_a_claim_lists_the_unclaimed_and_its_own_not_the_pvs_of_other_claims_or_classes() -> None:
    store = store_with(pv("a"), pv("b", claim="other"), pv("c", claim="data"), pv("d", sc="fast"), pv("e"))
    cache = PVAssumeCache(objects=store)
    assert names(cache.list_pvs_for_claim("local", CLAIM)) == ["a", "c", "e"]
    assert names(cache.list_pvs_for_claim("local", ("default", "other"))) == ["a", "b", "e"]
    assert names(cache.list_pvs_for_claim("fast", CLAIM)) == ["d"]
    assert cache.list_pvs_for_claim("none", CLAIM) == []


def test_writes_after_the_first_list_move_pvs_between_groups_and_keep_arrival_order() -> None:
    store = store_with(with_uid(pv("a"), "1"), with_uid(pv("b"), "2"), with_uid(pv("c"), "3"))
    cache = PVAssumeCache(objects=store)
    assert names(cache.list_pvs_for_claim("local", CLAIM)) == ["a", "b", "c"]
    store.upsert(PV, with_uid(pv("a", claim="other"), "1"))  # bound elsewhere: gone from this claim's list
    assert names(cache.list_pvs_for_claim("local", CLAIM)) == ["b", "c"]
    store.upsert(PV, with_uid(pv("a"), "1"))  # released: back in its place, not at the end
    store.upsert(PV, with_uid(pv("d"), "4"))
    assert names(cache.list_pvs_for_claim("local", CLAIM)) == ["a", "b", "c", "d"]
    store.delete(PV, pv("b"))
    store.upsert(PV, with_uid(pv("b"), "5"))  # deleted and created again: a new arrival
    store.upsert(PV, with_uid(pv("c", sc="fast"), "3"))
    assert names(cache.list_pvs_for_claim("local", CLAIM)) == ["a", "d", "b"]
    assert names(cache.list_pvs_for_claim("fast", CLAIM)) == ["c"]


def test_assumed_versions_replace_the_api_ones_until_the_cluster_moves_on() -> None:
    store = store_with(pv("a", claim="data"), pv("b"), pv("c"))
    store.upsert(PV, {**pv("z"), "metadata": {"name": "z", "resourceVersion": "7"}})
    cache = PVAssumeCache(objects=store)
    taken = copy.deepcopy(store.get(PV, "b"))
    assert taken is not None
    taken["spec"]["claimRef"] = {"namespace": "default", "name": "other"}
    cache.assume(taken)  # Reserve of another pod pre-bound b to its claim
    assert names(cache.list_pvs_for_claim("local", CLAIM)) == ["a", "c", "z"]
    assert names(cache.list_pvs_for_claim("local", ("default", "other"))) == ["b", "c", "z"]
    assert cache.list_pvs_for_claim("local", ("default", "other"))[0] is taken
    store.upsert(PV, pv("b", claim="third"))  # the cluster's newer version voids the assumption
    assert names(cache.list_pvs_for_claim("local", ("default", "other"))) == ["c", "z"]
    assert not cache.is_assumed("b")


def test_a_lister_without_a_change_log_is_read_again_when_its_objects_change() -> None:
    lister = FakeObjects([pv("a"), pv("b", claim="other")])
    cache = PVAssumeCache(objects=lister)
    assert names(cache.list_pvs_for_claim("local", CLAIM)) == ["a"]
    lister.objects[1] = pv("b")
    assert names(cache.list_pvs_for_claim("local", CLAIM)) == ["a", "b"]
