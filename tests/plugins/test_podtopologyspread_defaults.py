"""PodTopologySpread's default constraints, kept per (namespace, labels, controller): the same
as deriving them afresh after every change of the Services and controllers they read."""

from __future__ import annotations

import random
from typing import Any

from kopfsched.cache.objects import ObjectStore
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs, common
from kopfsched.plugins.podtopologyspread.common import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY
from kopfsched.testing import make_handle
from tests.builders import make_node, make_pod

NAMESPACES = ("default", "other")


def _selector(rng: random.Random) -> dict[str, str]:
    return {"app": rng.choice("abc")} if rng.random() < 0.8 else {"tier": rng.choice("xy")}


def _object(rng: random.Random, kind: str, name: str, namespace: str) -> dict[str, Any]:
    api = "v1" if kind in ("Service", "ReplicationController") else "apps/v1"
    obj: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": namespace}}
    if kind in ("Service", "ReplicationController"):
        obj["spec"] = {"selector": _selector(rng)}
    else:
        obj["spec"] = {"selector": {"matchLabels": _selector(rng)}}
        if rng.random() < 0.3:
            obj["spec"]["selector"]["matchExpressions"] = [{"key": "tier", "operator": "Exists"}]
    return obj


def _pod(rng: random.Random, i: int) -> PodInfo:
    labels = {"app": rng.choice("abc")}
    if rng.random() < 0.5:
        labels["tier"] = rng.choice("xy")
    pod = make_pod(f"p{i}", rng.choice(NAMESPACES), labels=labels)
    if rng.random() < 0.9:
        kind = rng.choice(("ReplicaSet", "StatefulSet", "ReplicationController", "Job"))
        api = "v1" if kind == "ReplicationController" else "batch/v1" if kind == "Job" else "apps/v1"
        pod["metadata"]["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": f"o{rng.randrange(3)}",
                                               "controller": rng.random() < 0.9}]
    return PodInfo(pod)


def _fresh(plugin: PodTopologySpread, pod: PodInfo, action: str) -> list[Any]:
    constraints = common.filter_constraints(plugin.default_constraints, {}, action)
    raw = common.default_selector(pod, plugin.handle.objects)
    selector = common.Selector.of(raw) if raw else None
    if not constraints or selector is None or selector.empty:
        return []
    return [(c.max_skew, c.topology_key, selector.signature) for c in constraints]


def test_default_constraints_follow_every_object_change() -> None:
    for seed in range(6):
        rng = random.Random(seed)
        store = ObjectStore()
        handle = make_handle([make_node("n1")])
        handle.objects = store
        args = PodTopologySpreadArgs() if seed % 2 == 0 else PodTopologySpreadArgs(
            default_constraints=({"topologyKey": "zone", "whenUnsatisfiable": DO_NOT_SCHEDULE, "maxSkew": 2},),
            defaulting_type="List")
        plugin = PodTopologySpread(args, handle)
        pods = [_pod(rng, i) for i in range(20)]
        for _ in range(300):
            if rng.random() < 0.3:
                kind = rng.choice(common.DEFAULT_SELECTOR_KINDS)
                obj = _object(rng, kind, f"o{rng.randrange(3)}", rng.choice(NAMESPACES))
                if rng.random() < 0.2:
                    store.delete(kind, obj)
                else:
                    store.upsert(kind, obj)
            pod = rng.choice(pods)
            action = rng.choice((DO_NOT_SCHEDULE, SCHEDULE_ANYWAY))
            got = [(c.max_skew, c.topology_key, c.selector.signature) for c in plugin.constraints(pod, action)]
            assert got == _fresh(plugin, pod, action)
