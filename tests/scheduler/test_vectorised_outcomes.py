"""The vectorised Filter and Score path decides as the node-by-node path does.

Seeded random heterogeneous clusters (GPU models and counts as labels, numeric labels, hard and
soft taints, cordoned nodes, low-priority pods running) and pods with node selectors, required
node affinity of every operator (invalid and empty terms, matchFields), preferred node
affinity, host ports, tolerations, GPU requests and priorities are simulated three times: as
the scheduler runs (batch methods, masks alone for pods that land), with every batch method
hidden so that each plugin is asked node by node with every rejection recorded, and with the
batch methods and `--explain`'s statuses. Placements, nominations, victims and messages must
be identical, and so must each node's Filter status and score.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from kopfsched.framework.registry import PluginFactory, Registry
from kopfsched.plugins.registry import full_registry
from kopfsched.simulate.loader import load_objects
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate

HIDDEN = frozenset({"filter_nodes", "filter_statuses", "score_nodes"})
"""The batch methods the runtime looks for (BatchFilterPlugin, BatchFilterStatusesPlugin, BatchScorePlugin)."""

MODELS = ("A100", "V100", "T4", "G2")
ZONES = ("zone-a", "zone-b", "zone-c")
TAINTS = (
    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
    {"key": "evict", "effect": "NoExecute"},
    {"key": "soft", "value": "x", "effect": "PreferNoSchedule"},
)
TOLERATIONS = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Equal", "value": "infra"},
    {"key": "evict", "operator": "Exists"},
    {"operator": "Exists"},
    {"key": "soft", "operator": "Exists", "effect": "PreferNoSchedule"},
)


class _NodeByNode:
    """A plugin with its batch methods hidden: the runtime then calls `filter`/`score` per node."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in HIDDEN:
            raise AttributeError(name)
        return getattr(self._inner, name)


def node_by_node_registry() -> Registry:
    registry = full_registry()
    wrapped = Registry()
    for name in list(registry.names()):
        factory = registry.get(name)
        assert factory is not None
        plugin_type = factory.plugin_type
        if plugin_type is None or not any(hasattr(plugin_type, method) for method in HIDDEN):
            continue

        def make(args: Any, handle: Any, _new: Any = factory.new) -> Any:
            return _NodeByNode(_new(args, handle))

        make.plugin_type = plugin_type  # type: ignore[attr-defined]
        wrapped.register(PluginFactory(name=name, factory=make, args_type=factory.args_type))
    return registry.overridden_by(wrapped)


def _node(rng: random.Random, i: int) -> dict[str, Any]:
    name = f"node-{i}"
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": rng.choice(ZONES)}
    allocatable = {"cpu": str(rng.choice((2, 4, 8, 16))), "memory": f"{rng.choice((4, 16, 64))}Gi",
                   "pods": str(rng.choice((110, 110, 3)))}
    if rng.random() < 0.6:
        gpus = rng.choice((1, 2, 4, 8))
        labels["nvidia.com/gpu.product"] = rng.choice(MODELS)
        labels["nvidia.com/gpu.count"] = str(gpus)
        allocatable["nvidia.com/gpu"] = str(gpus)
    if rng.random() < 0.5:
        labels["generation"] = rng.choice(("1", "2", "3", "07", "x"))
    if rng.random() < 0.3:
        labels["pool"] = rng.choice(("batch", "serving"))
    spec: dict[str, Any] = {}
    taints = rng.sample(TAINTS, rng.choice((0, 0, 1, 1, 2)))
    if taints:
        spec["taints"] = taints
    if rng.random() < 0.05:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def _expression(rng: random.Random) -> dict[str, Any]:
    kind = rng.randrange(8)
    if kind < 3:
        return {"key": "nvidia.com/gpu.product", "operator": rng.choice(("In", "NotIn")),
                "values": rng.sample(MODELS, rng.choice((1, 2)))}
    if kind == 3:
        return {"key": rng.choice(("pool", "generation", "missing")),
                "operator": rng.choice(("Exists", "DoesNotExist"))}
    if kind == 4:
        return {"key": rng.choice(("generation", "nvidia.com/gpu.count")), "operator": rng.choice(("Gt", "Lt")),
                "values": [rng.choice(("1", "2", "4", "x"))]}  # "x": the term fails to parse
    if kind == 5:
        return {"key": "topology.kubernetes.io/zone", "operator": "In", "values": rng.sample(ZONES, 2)}
    if kind == 6:
        return {"key": "pool", "operator": rng.choice(("In", "Bogus")), "values": ["batch"]}
    return {"key": "pool", "operator": "NotIn", "values": ["serving", "other"]}


def _affinity(rng: random.Random, nodes: int) -> dict[str, Any]:
    terms: list[dict[str, Any]] = []
    for _ in range(rng.choice((1, 1, 2))):
        term: dict[str, Any] = {}
        if rng.random() < 0.9:
            term["matchExpressions"] = [_expression(rng) for _ in range(rng.choice((1, 1, 2)))]
        if rng.random() < 0.1:
            term["matchFields"] = [{"key": "metadata.name", "operator": rng.choice(("In", "NotIn")),
                                    "values": [f"node-{rng.randrange(nodes)}"]}]
        terms.append(term)
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def _preferred(rng: random.Random, nodes: int) -> list[dict[str, Any]]:
    """Weighted preferences: weight 0 and empty ones are ignored, matchFields name a node."""
    terms: list[dict[str, Any]] = []
    for _ in range(rng.choice((1, 2, 3))):
        preference: dict[str, Any] = {}
        if rng.random() < 0.9:
            preference["matchExpressions"] = [_expression(rng) for _ in range(rng.choice((1, 1, 2)))]
        if rng.random() < 0.1:
            preference["matchFields"] = [{"key": "metadata.name", "operator": "In",
                                          "values": [f"node-{rng.randrange(nodes)}"]}]
        terms.append({"weight": rng.choice((0, 1, 20, 50, 100)), "preference": preference})
    return terms


def _pod(rng: random.Random, name: str, nodes: int, *, node_name: str | None = None) -> dict[str, Any]:
    requests = {"cpu": rng.choice(("100m", "500m", "1", "2", "4")), "memory": rng.choice(("256Mi", "1Gi", "8Gi"))}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause",
                                            "resources": {"requests": requests, "limits": dict(requests)}}]}
    if rng.random() < 0.5:
        requests["nvidia.com/gpu"] = str(rng.choice((1, 1, 2, 4, 8)))
    if rng.random() < 0.15:  # host ports, some on one host IP: running pods hold them too
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": rng.choice((8080, 8081)),
                                           **rng.choice(({}, {"hostIP": "10.0.0.1"}, {"protocol": "UDP"}))}]
    if rng.random() < 0.6:
        spec["tolerations"] = rng.sample(TOLERATIONS, rng.choice((1, 2)))
    if rng.random() < 0.25:
        spec["nodeSelector"] = rng.choice(({"pool": "batch"}, {"topology.kubernetes.io/zone": rng.choice(ZONES)},
                                           {"nvidia.com/gpu.product": rng.choice(MODELS)}))
    if rng.random() < 0.4:
        spec["affinity"] = _affinity(rng, nodes)
    if rng.random() < 0.3:
        preferred = [term for term in _preferred(rng, nodes)
                     if "Bogus" not in str(term) and "'x'" not in str(term)]  # a bad preference is an Error
        spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if node_name is not None:
        spec["nodeName"] = node_name
        spec["priority"] = 0
    else:
        spec["priority"] = rng.choice((0, 0, 100, 1000))
        if rng.random() < 0.2:
            spec["schedulerName"] = "enforced"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


ENFORCED_PROFILE = {
    "apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "enforced"},
    "spec": {"pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 30, "preference": {"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["batch"]}]}}]}}}]},
}


def random_cluster(seed: int, *, nodes: int = 40, running: int = 30, pending: int = 90) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objects = [ENFORCED_PROFILE] + [_node(rng, i) for i in range(nodes)]
    objects += [_pod(rng, f"running-{i}", nodes, node_name=f"node-{rng.randrange(nodes)}") for i in range(running)]
    objects += [_pod(rng, f"pod-{i}", nodes) for i in range(pending)]
    return objects


def run(objects: list[dict[str, Any]], *, registry: Registry, explain: bool) -> dict[str, Any]:
    inputs = load_objects(objects, "test")
    assert not inputs.problems, inputs.problems
    return to_json(asyncio.run(simulate(inputs, registry=registry, seed=7, explain=explain)), explain=explain)


OUTCOME = ("namespace", "name", "schedulerName", "result", "node", "nominatedNode", "victims", "message")


@pytest.mark.parametrize(("seed", "nodes"), [*((seed, 40) for seed in range(6)), (6, 300), (7, 300)])
def test_vectorised_path_decides_as_node_by_node(seed: int, nodes: int) -> None:
    """At 300 nodes percentageOfNodesToScore stops the search early: the rotating start, the
    chunks and the nodes filtered past the last one needed are compared too."""
    objects = random_cluster(seed, nodes=nodes, running=nodes * 3 // 4)
    fast = run(objects, registry=full_registry(), explain=False)
    slow = run(objects, registry=node_by_node_registry(), explain=True)
    explained = run(objects, registry=full_registry(), explain=True)
    outcome = [{key: pod[key] for key in OUTCOME} for pod in slow["pods"]]
    assert [{key: pod[key] for key in OUTCOME} for pod in fast["pods"]] == outcome
    assert [{key: pod[key] for key in OUTCOME} for pod in explained["pods"]] == outcome
    assert [(pod["filter"], pod["scores"]) for pod in explained["pods"]] == [
        (pod["filter"], pod["scores"]) for pod in slow["pods"]]
    # The clusters exercise what they are for: placements, affinity and taint rejections, preemption.
    results = {pod["result"] for pod in slow["pods"]}
    assert {"Scheduled", "Unschedulable"} <= results
    messages = " ".join(pod["message"] or "" for pod in slow["pods"])
    assert "didn't match Pod's node affinity/selector" in messages
    assert "untolerated taint(s)" in messages
    assert any("didn't have free ports" in str(pod["filter"]) for pod in slow["pods"])
    affinity_scores = {scores.get("NodeAffinity") for pod in slow["pods"] for scores in (pod["scores"] or {}).values()}
    assert len(affinity_scores - {None}) >= 2  # preferred node affinity ranks the nodes


APPS = ("web", "db", "cache", "batch")


def _spread_constraint(rng: random.Random, app: str) -> dict[str, Any]:
    constraint: dict[str, Any] = {
        "maxSkew": rng.choice((1, 1, 2)),
        "topologyKey": rng.choice(("topology.kubernetes.io/zone", "kubernetes.io/hostname", "pool")),
        "whenUnsatisfiable": rng.choice(("DoNotSchedule", "ScheduleAnyway")),
        "labelSelector": rng.choice(({"matchLabels": {"app": app}},
                                     {"matchExpressions": [{"key": "app", "operator": "In", "values": [app, "db"]}]},
                                     {"matchExpressions": [{"key": "tier", "operator": "Exists"}]})),
    }
    if rng.random() < 0.3:
        constraint["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.3:
        constraint["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.2:
        constraint["matchLabelKeys"] = ["tier"]
    if rng.random() < 0.2 and constraint["whenUnsatisfiable"] == "DoNotSchedule":
        constraint["minDomains"] = rng.choice((2, 4))
    return constraint


def spread_cluster(seed: int, *, nodes: int = 40) -> list[dict[str, Any]]:
    """random_cluster's pods labelled as the replicas of a few ReplicaSets (so the system default
    constraints apply to them), a third with spread constraints of their own."""
    objects = random_cluster(seed, nodes=nodes, running=nodes * 3 // 4)
    rng = random.Random(1000 + seed)
    for app in APPS:
        objects.append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "metadata": {"name": app, "namespace": "default", "uid": f"rs-{app}"},
                        "spec": {"selector": {"matchLabels": {"app": app}}, "replicas": 1}})
    for obj in objects:
        if obj.get("kind") != "Pod":
            continue
        app = rng.choice(APPS)
        meta = obj["metadata"]
        meta["labels"] = {"app": app, **({"tier": rng.choice(("a", "b"))} if rng.random() < 0.5 else {})}
        if rng.random() < 0.8:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app,
                                        "uid": f"rs-{app}", "controller": True}]
        if not obj["spec"].get("nodeName") and rng.random() < 0.35:
            obj["spec"]["topologySpreadConstraints"] = [_spread_constraint(rng, app)
                                                        for _ in range(rng.choice((1, 2)))]
    return objects


def _reference_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    """PodTopologySpread without its incremental counts, cached masks and row-wise PreScore:
    counts from every node's pods, masks and domains node by node."""
    from kopfsched.plugins.podtopologyspread import common
    from kopfsched.plugins.podtopologyspread.counts import MatchCounts
    from kopfsched.plugins.podtopologyspread.plugin import PodTopologySpread

    def counts(self: Any, table: Any, selector: Any, namespace: str) -> Any:
        import numpy as np
        return np.fromiter((common.count_pods_match_selector(n, selector, namespace) for n in table.nodes),
                           dtype=np.int64, count=len(table))

    def inclusion(self: Any, c: Any, pod: Any, table: Any, affinity: Any) -> Any:
        import numpy as np
        return np.fromiter((common.match_node_inclusion_policies(c, pod, n, affinity) for n in table.nodes),
                           dtype=bool, count=len(table))

    monkeypatch.setattr(MatchCounts, "counts", counts)
    monkeypatch.setattr(PodTopologySpread, "_inclusion_mask", inclusion)
    monkeypatch.setattr(PodTopologySpread, "_snapshot_rows", lambda self, nodes: None)


@pytest.mark.parametrize(("seed", "nodes"), [*((seed, 40) for seed in range(4)), (4, 300)])
def test_spread_fast_paths_decide_as_reference(seed: int, nodes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    objects = spread_cluster(seed, nodes=nodes)
    fast = run(objects, registry=full_registry(), explain=True)
    slow = run(objects, registry=node_by_node_registry(), explain=True)
    _reference_spread(monkeypatch)
    reference = run(objects, registry=node_by_node_registry(), explain=True)
    outcome = [{key: pod[key] for key in OUTCOME} for pod in reference["pods"]]
    assert [{key: pod[key] for key in OUTCOME} for pod in fast["pods"]] == outcome
    assert [{key: pod[key] for key in OUTCOME} for pod in slow["pods"]] == outcome
    assert [(pod["filter"], pod["scores"]) for pod in fast["pods"]] == [
        (pod["filter"], pod["scores"]) for pod in reference["pods"]]
    messages = " ".join(pod["message"] or "" for pod in reference["pods"])
    assert "didn't match pod topology spread constraints" in messages
    spread_scores = {scores["PodTopologySpread"] for pod in reference["pods"]
                     for scores in (pod["scores"] or {}).values() if "PodTopologySpread" in scores}
    assert len(spread_scores) > 2, spread_scores  # the soft constraints and defaults score nodes apart


def _class(name: str, provisioner: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer", **extra}


def _local_pv(name: str, size: str, affinity: dict[str, Any] | None, *, claim: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                            "storageClassName": "local", "local": {"path": "/mnt/disk"}}
    if affinity is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [affinity]}}
    if claim is not None:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec,
            "status": {"phase": "Available"}}


def cluster_with_claims(seed: int, *, nodes: int) -> list[dict[str, Any]]:
    """random_cluster, and a claim on a third of the pending pods: of a class that provisions
    anywhere (one answer for every node), of one with allowedTopologies, or of local PVs (one
    per node by hostname, some by zone, some pre-bound to a claim, some too small); a few claims
    share a PV's worth of demand, one has a selector the API rejects."""
    rng = random.Random(seed)
    objects = random_cluster(seed, nodes=nodes, running=nodes * 3 // 4)
    objects += [_class("anywhere", "ebs.csi.aws.com"),
                _class("zoned", "ebs.csi.aws.com", allowedTopologies=[{"matchLabelExpressions": [
                    {"key": "topology.kubernetes.io/zone", "values": ["zone-a", "zone-c"]}]}]),
                _class("local", "kubernetes.io/no-provisioner")]
    for i in range(nodes):
        if rng.random() < 0.7:
            objects.append(_local_pv(f"local-{i}", rng.choice(("5Gi", "10Gi", "50Gi")), {"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [f"node-{i}"]}]}))
    limits = random.Random(-seed)
    for i in range(nodes):
        if limits.random() < 0.5:  # NodeVolumeLimits: a limit on some nodes, none on the others
            drivers = [{"name": "ebs.csi.aws.com", "nodeID": f"node-{i}", **(
                {"allocatable": {"count": limits.choice((0, 1, 2))}} if limits.random() < 0.8 else {})}]
            objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": f"node-{i}"},
                            "spec": {"drivers": drivers}})
    for i in range(4):
        objects.append(_local_pv(f"zonal-{i}", "20Gi", {"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [rng.choice(ZONES)]}]}))
    claims: list[dict[str, Any]] = []
    for pod in objects:
        if pod["kind"] != "Pod" or pod["spec"].get("nodeName") or rng.random() > 0.35:
            continue
        claim = f"data-{pod['metadata']['name']}"
        spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                                "storageClassName": rng.choice(("anywhere", "zoned", "local", "local")),
                                "resources": {"requests": {"storage": rng.choice(("1Gi", "10Gi", "30Gi"))}}}
        if rng.random() < 0.05:
            spec["selector"] = {"matchExpressions": [{"key": "tier", "operator": "Bogus"}]}
        if spec["storageClassName"] == "local" and rng.random() < 0.2:
            node = rng.randrange(nodes)
            objects.append(_local_pv(f"prebound-{claim}", "10Gi", {"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [f"node-{node}"]}]}, claim=claim))
        claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": claim, "namespace": "default", "uid": f"uid-{claim}"},
                       "spec": spec, "status": {"phase": "Pending"}})
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return objects + claims


@pytest.mark.parametrize(("seed", "nodes"), [(11, 40), (12, 40), (13, 300)])
def test_vectorised_volume_filters_decide_as_node_by_node(seed: int, nodes: int) -> None:
    """VolumeBinding's and NodeVolumeLimits' batch Filters (one answer for every node when it
    cannot depend on the node, else node by node over indexed candidates) against their
    per-node filters: placements, PV choices (through later pods' outcomes), messages and each
    node's status."""
    objects = cluster_with_claims(seed, nodes=nodes)
    fast = run(objects, registry=full_registry(), explain=False)
    slow = run(objects, registry=node_by_node_registry(), explain=True)
    explained = run(objects, registry=full_registry(), explain=True)
    outcome = [{key: pod[key] for key in OUTCOME} for pod in slow["pods"]]
    assert [{key: pod[key] for key in OUTCOME} for pod in fast["pods"]] == outcome
    assert [{key: pod[key] for key in OUTCOME} for pod in explained["pods"]] == outcome
    assert [(pod["filter"], pod["scores"]) for pod in explained["pods"]] == [
        (pod["filter"], pod["scores"]) for pod in slow["pods"]]
    messages = " ".join(pod["message"] or "" for pod in slow["pods"])
    assert "didn't find available persistent volumes to bind" in messages
    assert "error creating internal label selector" in messages
    assert "exceed max volume count" in " ".join(str(pod["filter"]) for pod in slow["pods"])
    assert sum(pod["result"] == "Scheduled" for pod in slow["pods"]) >= 20
