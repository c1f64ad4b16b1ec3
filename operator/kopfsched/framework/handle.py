"""Handle: what the framework offers plugins beyond their arguments (upstream's framework.Handle).

A plugin factory receives `(args, handle)`. Through the handle a plugin reaches the
cycle's snapshot, read-only listers of the cluster objects and of every known pod, the
cluster client, the pods waiting at Permit, the nominator, and a way to re-activate pods.
"""

from __future__ import annotations

import asyncio
import builtins
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kopfsched.framework.client import ClusterClient
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.types import NodeInfo, Obj, PodInfo

if TYPE_CHECKING:
    from kopfsched.framework.runtime import Framework


class SnapshotLister(Protocol):
    """The nodes as they are for the current cycle (upstream's SharedLister)."""

    @property
    def table(self) -> NodeTable: ...

    def node_infos(self) -> list[NodeInfo]: ...

    def get(self, node_name: str) -> NodeInfo | None: ...

    def have_pods_with_affinity(self) -> list[NodeInfo]: ...

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]: ...


class ObjectLister(Protocol):
    """Cluster objects other than pods and nodes, by kind ("Namespace", "PersistentVolume", ...)."""

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None: ...

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]: ...

    def changes(self, kind: str, since: int | None) -> tuple[int, builtins.list[tuple[str, str]] | None]:
        """What changed in a kind since a cursor, for plugins that keep derived state
        incrementally: (new cursor, changed (namespace, name) keys), or keys None when the
        caller must rebuild from `list` (first call with since=None, or too far behind)."""
        ...


class PodLister(Protocol):
    """Every pod the scheduler knows of (upstream's pod informer lister): bound, assumed and
    pending, of any scheduler name; terminated pods are gone."""

    def list(self, namespace: str | None = None) -> list[PodInfo]: ...


class PreemptionExtender(Protocol):
    """What DefaultPreemption asks of a profile's HTTP extender (upstream's framework.Extender)."""

    @property
    def name(self) -> str: ...

    def supports_preemption(self) -> bool: ...

    def is_ignorable(self) -> bool: ...

    def is_interested(self, pod: PodInfo) -> bool: ...

    async def process_preemption(self, pod: PodInfo, node_to_victims: Any,
                                 nodes: Mapping[str, NodeInfo]) -> Mapping[str, Any]:
        """The candidates (node name → victims with `.pods` and `.num_pdb_violations`) the
        extender accepts, with the victims it chose."""
        ...


class PodNominator(Protocol):
    """Pods that preemption promised a node to, by node."""

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def pods_to_count(self, pod: PodInfo) -> Mapping[str, list[PodInfo]]:
        """Node -> the pods nominated there that Filter counts as running when it checks `pod`
        (the others of at least its priority), every node with some; callers must not modify it."""
        ...

    def add_nominated_pod(self, pod: PodInfo, node_name: str) -> None: ...

    def delete_nominated_pod(self, pod: PodInfo) -> None: ...


class _NoNominator:
    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return []

    def pods_to_count(self, pod: PodInfo) -> Mapping[str, list[PodInfo]]:
        return {}

    def add_nominated_pod(self, pod: PodInfo, node_name: str) -> None:
        pass

    def delete_nominated_pod(self, pod: PodInfo) -> None:
        pass


class _NoObjects:
    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        return []

    def changes(self, kind: str, since: int | None) -> tuple[int, builtins.list[tuple[str, str]] | None]:
        return 0, None if since is None else []


class _NoPods:
    def list(self, namespace: str | None = None) -> list[PodInfo]:
        return []


class WaitingPod:
    """A pod held at Permit: every plugin that said Wait must allow it; one reject ends it.

    With `registered_at` (the handle's clock when Permit said Wait) the pod times out on
    that clock: `expire(now)` rejects it once `deadline` has passed, so offline runs on a
    virtual clock never wait in real time. Without it, `wait` times out in real seconds."""

    def __init__(self, pod: PodInfo, node_name: str, pending: dict[str, float], *,
                 registered_at: float | None = None) -> None:
        self.pod = pod
        self.node_name = node_name
        self.pending_plugins: set[str] = set(pending)
        self.timeouts = pending
        self.registered_at = registered_at
        self._done: asyncio.Future[tuple[bool, str, str]] | None = None
        self._result: tuple[bool, str, str] | None = None

    @property
    def uid(self) -> str:
        return self.pod.uid

    @property
    def deadline(self) -> float | None:
        """When the earliest timeout of a plugin still pending ends, on the registering clock
        (None: real time). A plugin that allowed the pod no longer times it out, as upstream."""
        if self.registered_at is None or not self.pending_plugins:
            return None
        return self.registered_at + self._earliest_timeout()[1]

    @property
    def parked(self) -> bool:
        """A binding task is blocked in `wait` and nothing has decided the pod yet."""
        return self._done is not None and self._result is None

    @property
    def decided(self) -> bool:
        return self._result is not None

    def allow(self, plugin: str) -> None:
        self.pending_plugins.discard(plugin)
        if not self.pending_plugins:
            self._finish((True, plugin, ""))

    def reject(self, plugin: str, message: str) -> None:
        self._finish((False, plugin, message))

    def expire(self, now: float) -> bool:
        """Reject the pod as timed out if its deadline is past; True when it did."""
        deadline = self.deadline
        if self._result is not None or deadline is None or now < deadline:
            return False
        plugin, timeout = self._earliest_timeout()
        self._finish((False, plugin, _timeout_message(plugin, timeout)))
        return True

    def _earliest_timeout(self) -> tuple[str, float]:
        pending = [(plugin, self.timeouts[plugin]) for plugin in sorted(self.pending_plugins)]
        return min(pending, key=lambda item: item[1])

    def _finish(self, result: tuple[bool, str, str]) -> None:
        if self._result is not None:
            return
        self._result = result
        if self._done is not None and not self._done.done():
            self._done.set_result(result)

    async def wait(self) -> tuple[bool, str, str]:
        """(allowed, plugin, message), rejecting on the earliest plugin timeout."""
        if self._result is not None:
            return self._result
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        if self.registered_at is not None:
            return await asyncio.shield(self._done)  # expire() ends it on the injected clock
        plugin, timeout = self._earliest_timeout()
        try:
            return await asyncio.wait_for(asyncio.shield(self._done), timeout)
        except TimeoutError:
            self._finish((False, plugin, _timeout_message(plugin, timeout)))
            assert self._result is not None
            return self._result


def _timeout_message(plugin: str, timeout: float) -> str:
    return f"rejected due to timeout after waiting {timeout:g}s at plugin {plugin}"


class WaitingPods:
    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, waiting: WaitingPod) -> None:
        self._pods[waiting.uid] = waiting

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def expire(self, now: float) -> list[WaitingPod]:
        """Reject every pod whose Permit deadline has passed at `now`; returns them.

        The operator calls this periodically with its clock (Scheduler.run_permit_timeouts);
        simulate calls it after moving its virtual clock to `next_deadline()`."""
        return [waiting for waiting in list(self._pods.values()) if waiting.expire(now)]

    def next_deadline(self) -> float | None:
        """The earliest deadline among the pods not yet allowed or rejected."""
        deadlines = [w.deadline for w in self._pods.values() if not w.decided and w.deadline is not None]
        return min(deadlines, default=None)

    def parked_count(self) -> int:
        """How many binding tasks are blocked waiting on Permit right now."""
        return sum(1 for waiting in self._pods.values() if waiting.parked)


@dataclass
class Handle:
    """Shared by the plugins of one profile; `framework` is that profile's runtime."""

    snapshot: SnapshotLister
    client: ClusterClient
    objects: ObjectLister = field(default_factory=_NoObjects)
    nominator: PodNominator = field(default_factory=_NoNominator)
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    activate: Callable[[Iterable[PodInfo]], None] = lambda pods: None
    rng: random.Random = field(default_factory=random.Random)
    clock: Callable[[], float] = time.monotonic
    spawn: Callable[[Awaitable[Any], str], Any] = lambda coro, name: asyncio.ensure_future(coro)
    """Run an API side effect (e.g. deleting preemption victims) as a supervised task."""
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    """Wait that many seconds of `clock` in a binding cycle (DynamicResources' PreBind polls
    binding conditions); offline runs pass one that moves their virtual clock."""
    framework: Framework | None = None
    shared: dict[str, Any] = field(default_factory=dict)
    """State the plugins of every profile of one scheduler share, by plugin name (upstream's
    Handle.SharedDRAManager and the like): the scheduler hands every profile's Handle the same
    dict, so e.g. two profiles never allocate one device twice. A Handle built on its own has
    a dict of its own."""
    pods: PodLister = field(default_factory=_NoPods)
    """Every pod the scheduler knows of, by namespace (pending ones included)."""
    assigned_pod: Callable[[str], PodInfo | None] = lambda uid: None
    """The cache's bound (or assumed) pod of that uid as the watch last showed it, None once it
    is gone: what upstream's async preemption reads from the pod lister about its last victim."""
    extenders: tuple[PreemptionExtender, ...] = ()
    """The profile's HTTP extenders, for preemption's ProcessPreemption (upstream's Extenders())."""
