"""Test helpers for plugin authors (and for kopfsched's own tests).

Builders make pods and nodes as the API returns them, in the spirit of upstream's
st.MakePod()/MakeNode(); `make_handle` gives a plugin the Handle it is built with, over a
fixed list of nodes; `run_filter`/`run_score` drive one plugin through PreFilter/Filter or
PreScore/Score/NormalizeScore as the runtime does; `schedule` runs the real scheduler
offline (exactly what `kopfsched simulate` runs) and says where each pod went:

    from kopfsched.testing import make_node, make_pod, schedule

    def test_guaranteed_pods_go_first():
        result = schedule(nodes=[make_node("n1", cpu="1")],
                          pods=[make_pod("a", requests={"cpu": "1"}), make_pod("b", requests={"cpu": "1"})])
        assert result.placements == {"a": "n1", "b": None}

Imports nothing of the kube layer: no cluster, no kopf, no network.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    NormalizeScorePlugin,
    PreFilterPlugin,
    PreScorePlugin,
)
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.registry import PluginFactory, Registry
from kopfsched.framework.status import Status
from kopfsched.framework.types import NodeInfo, Obj, PodInfo

__all__ = [
    "FakeSnapshot",
    "RecordingClient",
    "ScheduleResult",
    "make_handle",
    "make_node",
    "make_pod",
    "node_info",
    "queued_pod",
    "run_filter",
    "run_score",
    "schedule",
    "schedule_async",
    "taint",
]

_uids = itertools.count(1)

# Builders ---------------------------------------------------------------------------------


def make_pod(
    name: str = "pod",
    namespace: str = "default",
    *,
    requests: dict[str, Any] | list[dict[str, Any]] | None = None,
    init_requests: list[dict[str, Any]] | None = None,
    sidecar_requests: list[dict[str, Any]] | None = None,
    overhead: dict[str, Any] | None = None,
    priority: int | None = None,
    node_name: str | None = None,
    scheduler_name: str | None = None,
    labels: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    host_ports: list[int | tuple[str, str, int]] | None = None,
    images: list[str] | None = None,
    scheduling_gates: list[str] | None = None,
    creation_timestamp: str | None = None,
    uid: str | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    """A pod dict as the API returns it. `requests` is one container's, or a list per container."""
    per_container = requests if isinstance(requests, list) else [requests or {}]
    images = images or ["registry.k8s.io/pause:3.10"] * len(per_container)
    containers: list[dict[str, Any]] = []
    for i, reqs in enumerate(per_container):
        container: dict[str, Any] = {"name": f"c{i}", "image": images[i] if i < len(images) else images[-1]}
        if reqs:
            container["resources"] = {"requests": dict(reqs)}
        containers.append(container)
    for extra_image in images[len(per_container):]:
        containers.append({"name": f"c{len(containers)}", "image": extra_image})
    if host_ports:
        containers[0]["ports"] = [
            {"containerPort": p, "hostPort": p} if isinstance(p, int)
            else {"hostIP": p[0], "protocol": p[1], "hostPort": p[2], "containerPort": p[2]}
            for p in host_ports
        ]
    spec: dict[str, Any] = {"containers": containers}
    init: list[dict[str, Any]] = []
    for i, reqs in enumerate(init_requests or ()):
        init.append({"name": f"init{i}", "image": "busybox", "resources": {"requests": dict(reqs)}})
    for i, reqs in enumerate(sidecar_requests or ()):
        init.append({"name": f"sidecar{i}", "image": "envoy", "restartPolicy": "Always",
                     "resources": {"requests": dict(reqs)}})
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = dict(overhead)
    if priority is not None:
        spec["priority"] = priority
    if node_name:
        spec["nodeName"] = node_name
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in scheduling_gates]
    spec.update(spec_extra)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{next(_uids)}"}
    if labels:
        meta["labels"] = dict(labels)
    if creation_timestamp:
        meta["creationTimestamp"] = creation_timestamp
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def make_node(
    name: str = "node",
    *,
    cpu: str | int = "4",
    memory: str = "32Gi",
    pods: int = 110,
    ephemeral_storage: str | None = None,
    extended: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
    images: list[tuple[list[str], int]] | None = None,
) -> dict[str, Any]:
    """A node dict. `images` is [(names, sizeBytes)] as in node.status.images."""
    allocatable: dict[str, Any] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    if ephemeral_storage:
        allocatable["ephemeral-storage"] = ephemeral_storage
    allocatable.update({k: str(v) for k, v in (extended or {}).items()})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": allocatable, "capacity": dict(allocatable)}
    if images:
        status["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, Any]:
    t = {"key": key, "effect": effect}
    if value:
        t["value"] = value
    return t


def node_info(node: dict[str, Any], *pods: dict[str, Any]) -> NodeInfo:
    """A NodeInfo holding `pods` (their nodeName is set to the node's)."""
    info = NodeInfo(node)
    for pod in pods:
        pod["spec"]["nodeName"] = info.name
        info.add_pod(PodInfo(pod))
    return info


# A Handle over fixed nodes ------------------------------------------------------------------


class FakeSnapshot:
    """The SnapshotLister protocol over a fixed list of NodeInfos."""

    def __init__(self, nodes: Iterable[NodeInfo] | None = ()) -> None:
        self._nodes = list(nodes or ())
        self._table = NodeTable(self._nodes)

    @property
    def table(self) -> NodeTable:
        return self._table

    def node_infos(self) -> list[NodeInfo]:
        return self._nodes

    def get(self, node_name: str) -> NodeInfo | None:
        return next((n for n in self._nodes if n.name == node_name), None)

    def have_pods_with_affinity(self) -> list[NodeInfo]:
        return [n for n in self._nodes if n.pods_with_affinity]

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        return [n for n in self._nodes if n.pods_with_required_anti_affinity]


class FakeObjects:
    """The ObjectLister protocol over a fixed list of API objects (Namespaces, PVCs, ...)."""

    def __init__(self, objects: Iterable[Obj] = ()) -> None:
        self.objects = list(objects)
        """What the lister serves: a test may add, replace or remove objects in it."""
        self._versions: dict[str, tuple[int, tuple[int, ...]]] = {}

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return next((o for o in self.list(kind, namespace or None) if o["metadata"]["name"] == name), None)

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        return [o for o in self.objects if o.get("kind") == kind
                and (namespace is None or (o.get("metadata") or {}).get("namespace", "") == namespace)]

    def changes(self, kind: str, since: int | None) -> tuple[int, builtins.list[tuple[str, str]] | None]:
        """No log of changes: a reader resyncs whenever the objects of the kind are not the ones
        it last saw (a test added, replaced or removed one), and hears of nothing otherwise."""
        served = tuple(id(obj) for obj in self.list(kind))
        version, seen = self._versions.get(kind, (0, ()))
        if served != seen:
            version += 1
            self._versions[kind] = version, served
        return version, [] if since == version else None


class RecordingClient:
    """A ClusterClient that records every call as (method, kwargs) in `calls`, and binds
    into `bindings` ("ns/name", node) — or raises `fail_with` from bind when it is set."""

    def __init__(self, fail_with: BaseException | None = None) -> None:
        self.fail_with = fail_with
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.bindings: list[tuple[str, str]] = []

    async def bind(self, *, pod: Obj, node_name: str) -> None:
        self.calls.append(("bind", {"pod": pod, "node_name": node_name}))
        if self.fail_with is not None:
            raise self.fail_with
        self.bindings.append((PodInfo(pod).key, node_name))

    async def patch_pod_status(self, **kwargs: Any) -> None:
        self.calls.append(("patch_pod_status", kwargs))

    async def delete_pod(self, **kwargs: Any) -> None:
        self.calls.append(("delete_pod", kwargs))

    async def record_event(self, **kwargs: Any) -> None:
        self.calls.append(("record_event", kwargs))

    async def patch_object(self, **kwargs: Any) -> Obj:
        self.calls.append(("patch_object", kwargs))
        return {}

    async def create_object(self, **kwargs: Any) -> Obj:
        self.calls.append(("create_object", kwargs))
        return dict(kwargs.get("obj") or {})

    async def delete_object(self, **kwargs: Any) -> None:
        self.calls.append(("delete_object", kwargs))


def make_handle(nodes: Iterable[Obj | NodeInfo] | None = (), *, objects: Iterable[Obj] = (), client: Any = None,
                **fields: Any) -> Handle:
    """The Handle a plugin factory receives, over `nodes` (dicts or NodeInfos); other Handle
    fields (activate, clock, rng, ...) can be passed by name."""
    return Handle(snapshot=FakeSnapshot(_node_infos(nodes)), objects=FakeObjects(objects),
                  client=client if client is not None else RecordingClient(), **fields)


def queued_pod(pod: Obj | PodInfo, *, timestamp: float = 0.0) -> QueuedPodInfo:
    """A pod as the queue holds it, for testing QueueSort's `less` and queueing hints."""
    return QueuedPodInfo(pod_info=_pod_info(pod), timestamp=timestamp)


# One plugin, as the runtime drives it ---------------------------------------------------------


def run_filter(plugin: Any, pod: Obj | PodInfo, nodes: Iterable[Obj | NodeInfo], *,
               state: CycleState | None = None) -> dict[str, Status | None]:
    """Each node's Filter answer (None = fits), after the plugin's PreFilter when it has one.

    A PreFilter rejection is every node's answer; Skip passes every node; a PreFilterResult
    rejects the nodes it leaves out. A batch `filter_nodes` must agree with `filter`."""
    state = state or CycleState()
    pod_info, node_infos = _pod_info(pod), _node_infos(nodes)
    allowed: frozenset[str] | None = None
    if isinstance(plugin, PreFilterPlugin):
        answer = plugin.pre_filter(state, pod_info, node_infos)
        if isinstance(answer, Status):
            if answer.is_skip:
                return dict.fromkeys((n.name for n in node_infos), None)
            if answer.is_rejection:
                return {n.name: answer.with_plugin(plugin.name) for n in node_infos}
        elif answer is not None:
            allowed = answer.node_names
    outside = Status.unresolvable(f"node(s) didn't satisfy plugin {plugin.name}").with_plugin(plugin.name)
    statuses: dict[str, Status | None] = {}
    for node in node_infos:
        if allowed is not None and node.name not in allowed:
            statuses[node.name] = outside
            continue
        status = plugin.filter(state, pod_info, node)
        statuses[node.name] = status.with_plugin(plugin.name) if status is not None else None
    if isinstance(plugin, BatchFilterPlugin):
        _check_batch_filter(plugin, state, pod_info, node_infos, statuses, allowed)
    return statuses


def run_score(plugin: Any, pod: Obj | PodInfo, nodes: Iterable[Obj | NodeInfo], *,
              state: CycleState | None = None) -> dict[str, int]:
    """Each node's score after PreScore, Score and NormalizeScore (before the profile's
    weight); empty when PreScore says Skip. A batch `score_nodes` must agree with `score`."""
    state = state or CycleState()
    pod_info, node_infos = _pod_info(pod), _node_infos(nodes)
    if isinstance(plugin, PreScorePlugin):
        answer = plugin.pre_score(state, pod_info, node_infos)
        if answer is not None and answer.is_skip:
            return {}
        if answer is not None:
            raise AssertionError(f"PreScore of {plugin.name} failed: {answer}")
    scores = np.array([plugin.score(state, pod_info, n) for n in node_infos], dtype=np.int64)
    if isinstance(plugin, BatchScorePlugin):
        table = NodeTable(node_infos)
        batch = np.asarray(plugin.score_nodes(state, pod_info, table, np.arange(len(node_infos))), dtype=np.int64)
        if not np.array_equal(batch, scores):
            raise AssertionError(f"{plugin.name}: score_nodes gave {batch.tolist()}, score gave {scores.tolist()}")
    if isinstance(plugin, NormalizeScorePlugin):
        scores = np.asarray(plugin.normalize_score(state, pod_info, scores), dtype=np.int64)
    return {n.name: int(s) for n, s in zip(node_infos, scores, strict=True)}


def _check_batch_filter(plugin: Any, state: CycleState, pod: PodInfo, nodes: list[NodeInfo],
                        statuses: Mapping[str, Status | None], allowed: frozenset[str] | None) -> None:
    table = NodeTable(nodes)
    rows = np.array([i for i, n in enumerate(nodes) if allowed is None or n.name in allowed], dtype=np.int64)
    passed = np.asarray(plugin.filter_nodes(state, pod, table, rows), dtype=bool)
    for row, ok in zip(rows.tolist(), passed.tolist(), strict=True):
        name = nodes[row].name
        if ok != (statuses[name] is None):
            raise AssertionError(f"{plugin.name}: filter_nodes says {'pass' if ok else 'fail'} on {name}, "
                                 f"filter says {statuses[name]}")


def _pod_info(pod: Obj | PodInfo | QueuedPodInfo) -> PodInfo:
    if isinstance(pod, QueuedPodInfo):
        return pod.pod_info
    return pod if isinstance(pod, PodInfo) else PodInfo(pod)


def _node_infos(nodes: Iterable[Obj | NodeInfo] | None) -> list[NodeInfo]:
    return [n if isinstance(n, NodeInfo) else NodeInfo(n) for n in nodes or ()]


# The whole scheduler, offline ------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleResult:
    """Where each pod went, from one offline run (simulate's JSON report is in `report`)."""

    placements: dict[str, str | None]
    """Pod → node, None when not scheduled. Keys are pod names (`namespace/name` outside "default")."""
    order: list[str]
    """Pods (same keys) in the order of their first scheduling attempt."""
    messages: dict[str, str]
    """Pod → why it is not scheduled (upstream's FailedScheduling message); "" when scheduled."""
    report: dict[str, Any]
    """`kopfsched simulate -o json --explain` for the same run: per-node filter reasons and scores."""


def schedule(*, nodes: Iterable[Obj], pods: Iterable[Obj], profile: Mapping[str, Any] | None = None,
             plugins: Iterable[Any] = (), registry: Registry | None = None, objects: Iterable[Obj] = (),
             seed: int = 0) -> ScheduleResult:
    """Schedule `pods` onto `nodes` with the real scheduler, offline, on a virtual clock, until
    the queue settles; what `kopfsched simulate` does. Not for use inside a running event loop
    (await `schedule_async` there).

    `profile` is a SchedulerProfile `spec` (or a whole SchedulerProfile); without a
    `schedulerName` it serves "default-scheduler", i.e. every pod that names no scheduler.
    `plugins` are plugin classes or PluginFactories to make available by name for this run
    without installing them (they replace an installed plugin of the same name, so a
    package's tests run the same before and after `pip install .`); `registry` replaces the
    built-in plus installed plugins.
    Raises ValueError listing every problem when the profile or the input is invalid."""
    return asyncio.run(schedule_async(nodes=nodes, pods=pods, profile=profile, plugins=plugins, registry=registry,
                                      objects=objects, seed=seed))


async def schedule_async(*, nodes: Iterable[Obj], pods: Iterable[Obj], profile: Mapping[str, Any] | None = None,
                         plugins: Iterable[Any] = (), registry: Registry | None = None, objects: Iterable[Obj] = (),
                         seed: int = 0) -> ScheduleResult:
    """`schedule` for async tests."""
    # Imported here so that builders and fakes stay importable with the framework alone.
    from kopfsched.plugins.registry import full_registry
    from kopfsched.simulate.loader import ClusterInput, Loaded
    from kopfsched.simulate.output import to_json
    from kopfsched.simulate.runner import simulate

    registry = _with_plugins(registry or full_registry(), plugins)
    # Copies: binding writes spec.nodeName into the pods the in-memory client holds.
    inputs = ClusterInput(nodes=[Loaded(copy.deepcopy(n), "<nodes>") for n in nodes],
                          pods=[Loaded(copy.deepcopy(p), "<pods>") for p in pods],
                          objects=[Loaded(copy.deepcopy(o), "<objects>") for o in objects])
    if profile is not None:
        inputs.configs.append(Loaded(_profile_object(profile), "<profile>"))
    sim = await simulate(inputs, registry=registry, seed=seed, explain=True)
    if inputs.problems:
        raise ValueError("invalid input:\n" + "\n".join(inputs.problems))
    report = to_json(sim, explain=True)
    pods_out = {_short_key(f"{p['namespace']}/{p['name']}"): p for p in report["pods"]}
    return ScheduleResult(
        placements={key: p["node"] for key, p in pods_out.items()},
        order=[_short_key(key) for key in sim.order],
        messages={key: p["message"] if p["node"] is None else "" for key, p in pods_out.items()},
        report=report,
    )


def _with_plugins(registry: Registry, plugins: Iterable[Any]) -> Registry:
    from kopfsched.plugins.entry_points import as_factory

    extra = Registry()
    for plugin in plugins:
        extra.register(plugin if isinstance(plugin, PluginFactory) else as_factory(plugin.name, plugin))
    return registry.overridden_by(extra) if len(list(extra.names())) else registry


def _profile_object(profile: Mapping[str, Any]) -> Obj:
    if profile.get("kind") == "SchedulerProfile":
        return dict(profile)
    spec = {"schedulerName": "default-scheduler", **profile}
    return {"apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile",
            "metadata": {"name": spec["schedulerName"]}, "spec": spec}


def _short_key(key: str) -> str:
    return key.removeprefix("default/")
