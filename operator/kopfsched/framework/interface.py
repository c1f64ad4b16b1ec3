"""The extension points of the scheduling framework, one Protocol each.

A plugin is any class with a `name` that implements one or more of these protocols; the
runtime sorts plugins into extension points by the protocols they satisfy. Every method
receives the `PodInfo` of the pod being scheduled (its raw dict is `pod.pod`).

Return conventions: `None` is success. A plugin returns a `Status` for an expected
answer (a rejection, a skip, a wait) and raises only on bugs; the runtime turns an
exception into an Error status and names the plugin.

Cycle order: PreEnqueue (before the queue) → QueueSort (orders the queue) → PreFilter →
Filter (per node) → PostFilter (only when no node fits) → PreScore → Score →
NormalizeScore → Reserve → Permit, then in the binding task: PreBind → Bind → PostBind.
Unreserve runs in reverse order when anything after Reserve fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ClusterEventWithHint
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.status import Status
from kopfsched.framework.types import NodeInfo, PodInfo

if TYPE_CHECKING:
    from kopfsched.framework.queued import QueuedPodInfo

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_TOTAL_SCORE = 2**63 - 1


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """A PreFilter's narrowing of the candidate nodes. None means every node."""

    node_names: frozenset[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    nominated_node_name: str = ""
    victims: tuple[str, ...] = ()


class NodeToStatus:
    """Why each infeasible node was rejected. Nodes not in `statuses` get `absent`
    (used when a PreFilter result ruled out every node it did not name).

    A Filter pass may hand over its rejections as table rows (`add_rows`): the name ->
    Status dict is then built on first read of `statuses`, and preemption can pick the
    nodes where it might help from the rows without it (`row_parts`)."""

    __slots__ = ("_parts", "_statuses", "absent")

    def __init__(self, statuses: dict[str, Status] | None = None, absent: Status | None = None) -> None:
        self._statuses: dict[str, Status] = {} if statuses is None else statuses
        self._parts: list[RowPart] = []
        self.absent = absent

    @property
    def statuses(self) -> dict[str, Status]:
        if self._parts:
            for part in self._parts:
                self._statuses.update(zip(map(part.names.__getitem__, part.row_list()), part.statuses, strict=True))
            self._parts = []
        return self._statuses

    @statuses.setter
    def statuses(self, value: dict[str, Status]) -> None:
        self._statuses, self._parts = value, []

    def add_rows(self, part: RowPart) -> None:
        """Rejections as rows of a table, none of them in `statuses` yet and none in another part."""
        self._parts.append(part)

    def row_parts(self) -> list[RowPart] | None:
        """The rejections as row parts, when every one came so (nothing recorded by name)."""
        return self._parts if self._parts and not self._statuses else None

    def get(self, node_name: str) -> Status | None:
        return self.statuses.get(node_name, self.absent)

    def __len__(self) -> int:
        return len(self._statuses) + sum(len(part.row_array) for part in self._parts)  # parts are disjoint

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeToStatus):
            return NotImplemented
        return self.statuses == other.statuses and self.absent == other.absent

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NodeToStatus(statuses={self.statuses!r}, absent={self.absent!r})"


@dataclass(frozen=True, slots=True)
class RowPart:
    """Rejected rows of a NodeTable: `statuses[i]` is the status of row `row_array[i]`, whose
    node is `nodes[row]` named `names[row]`; `rows`, when given, the same rows as a list;
    `distinct`, when known, its distinct statuses."""

    nodes: list[NodeInfo]
    names: list[str]
    rows: list[int] | None
    row_array: np.ndarray
    statuses: list[Status]
    distinct: list[Status] | None = None

    def row_list(self) -> list[int]:
        return self.rows if self.rows is not None else self.row_array.tolist()


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    """Orders activeQ. Exactly one per scheduler, the same in every profile."""

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    """Runs before a pod enters activeQ. Anything but success keeps the pod gated
    (in the unschedulable pool, without an Unschedulable condition) until an event
    this plugin registered lets it through."""

    def pre_enqueue(self, pod: PodInfo) -> Status | None: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    """Runs once per cycle before Filter; computes what Filter reads from CycleState.

    Returns None (all nodes), a PreFilterResult narrowing the nodes, SKIP (this plugin's
    Filter is skipped for the cycle), or a rejection: Unschedulable/UnschedulableAndUnresolvable
    fails the pod on every node at once."""

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> PreFilterResult | Status | None: ...


@runtime_checkable
class PreFilterExtensions(Plugin, Protocol):
    """Incrementally updates PreFilter state when preemption removes or nominated pods add a pod."""

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status | None: ...

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                   node: NodeInfo) -> Status | None: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Does the pod fit this node? Looks only at `node` (which may be a modified copy during
    preemption), never at the global snapshot. Rejections: Unschedulable (preemption may
    help) or UnschedulableAndUnresolvable (it will not)."""

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None: ...


@runtime_checkable
class NodeStaticFilterPlugin(FilterPlugin, Protocol):
    """A Filter whose answer depends on the pod and the Node object alone (name, labels,
    taints, spec, allocatable) — never on the pods on the node, nor on CycleState that
    PreFilterExtensions change. Declared with `node_static_filter = True`.

    Its answer for a node therefore cannot change while preemption's dry run removes and
    reprieves victims there, or when nominated pods are counted on the node: the runtime
    runs it once per node in those cases instead of once per victim."""

    node_static_filter: bool


@runtime_checkable
class BatchFilterPlugin(FilterPlugin, Protocol):
    """A Filter that can also judge many nodes at once from the NodeTable.

    Returns a boolean array over `rows`, True where the pod passes. It must agree with
    `filter`: the runtime calls `filter` on the rejected nodes to learn their reasons."""

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class EveryNodeFilterPlugin(BatchFilterPlugin, Protocol):
    """A batch Filter that can tell, for less than a `filter_nodes` call costs, that the pod
    passes every node of the table (a pod without spec.nodeName for NodeName): True only when
    `filter_nodes` would pass every row, so the runtime skips it; False says nothing."""

    def passes_every_node(self, state: CycleState, pod: PodInfo, table: NodeTable) -> bool: ...


@runtime_checkable
class BatchFilterStatusesPlugin(BatchFilterPlugin, Protocol):
    """A batch Filter that can also give its rejections' statuses from the NodeTable.

    Returns, for each of `rows` (rows `filter_nodes` rejected), exactly the Status `filter`
    returns for that node; the runtime then calls no per-node `filter` at all, which is what
    keeps an unschedulable pod's attempt over thousands of nodes cheap."""

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    """Runs only when no node passed Filter (e.g. preemption). A result with a nominated
    node makes the pod wait for it; the pod itself stays unschedulable this cycle."""

    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]: ...


@runtime_checkable
class AsyncPostFilterPlugin(PostFilterPlugin, Protocol):
    """A PostFilter that may await the API when its profile has extenders (DefaultPreemption
    asking the extenders' preempt verb); the runtime awaits `post_filter_async` only in the
    extender profiles' cycles, which may suspend, and calls `post_filter` elsewhere."""

    async def post_filter_async(self, state: CycleState, pod: PodInfo,
                                statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    """Runs once before Score over the feasible nodes; SKIP skips this plugin's Score."""

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Ranks a feasible node. Scores are integers, 0..100 after NormalizeScore."""

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int: ...


@runtime_checkable
class BatchScorePlugin(ScorePlugin, Protocol):
    """A Score that can also rank many nodes at once: an int64 array over `rows`, equal
    to calling `score` on each."""

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class NormalizeScorePlugin(Plugin, Protocol):
    """Rescales one Score plugin's raw scores (int64 array, node order) to 0..100."""

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """Reserve runs after the pod is assumed on `node_name`; Unreserve undoes it when a
    later step fails (it must be idempotent and cannot fail)."""

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """The last gate before binding: None (allow), a rejection, or Status.wait() with a
    timeout in seconds, after which the pod is rejected unless some plugin allowed it."""

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    """Runs in the binding task before Bind (e.g. to bind volumes); may await the API.

    A PreBind plugin may also define `pre_bind_pre_flight` (PreBindPreFlightPlugin), which
    says at the start of the binding cycle whether PreBind has work for the pod; one that
    does not is taken to have work every time."""

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


@dataclass(frozen=True, slots=True)
class PreBindPreFlightResult:
    """What PreBindPreFlight says beside its status (upstream's PreBindPreFlightResult)."""

    allow_parallel: bool = False
    """This plugin's PreBind may run at the same time as its neighbours' that allow it too."""


ALLOW_PARALLEL = PreBindPreFlightResult(allow_parallel=True)


@runtime_checkable
class PreBindPreFlightPlugin(PreBindPlugin, Protocol):
    """Upstream's PreBindPreFlight (NominatedNodeNameForExpectation): called at the start of
    the binding cycle, before WaitOnPermit. None says PreBind will have work for the pod on
    `node_name` (the scheduler then sets the pod's status.nominatedNodeName), SKIP that it
    will not (its PreBind is then not called), an Error fails the binding cycle; any other
    code is an error too. Cheap and without API calls: it only reads the cycle state."""

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo,
                            node_name: str) -> tuple[PreBindPreFlightResult | None, Status | None]: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """Binds the pod; SKIP passes to the next Bind plugin."""

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    """Informational, after a successful bind."""

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


SignFragment = tuple[str, object]
"""(signer name, value): one part of a pod's scheduling signature."""


@runtime_checkable
class SignPlugin(Plugin, Protocol):
    """Upstream's SignPlugin (OpportunisticBatching): the parts of a pod this plugin's
    PreFilter, Filter, PreScore and Score read, as fragments whose equality for two pods means
    the plugin treats them alike on any node. None: this pod cannot be signed (then no pod of
    this cycle's kind is batched). A profile batches only when every such plugin signs; a
    plugin with `signs_no_pod = True` refuses every pod, so its profile never signs."""

    def sign_pod(self, pod: PodInfo) -> Iterable[SignFragment] | None: ...


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    """Which cluster events may make a pod this plugin rejected schedulable again."""

    def events_to_register(self) -> Iterable[ClusterEventWithHint]: ...


EXTENSION_POINTS: dict[str, type] = {
    "queueSort": QueueSortPlugin,
    "preEnqueue": PreEnqueuePlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}
"""Config field name → protocol, in the order the cycle runs them."""

def protocol_methods(protocol: type) -> tuple[str, ...]:
    """The methods a plugin protocol requires, its bases' included (`name` is not one)."""
    methods: dict[str, None] = {}
    for klass in reversed(protocol.__mro__):
        if getattr(klass, "_is_protocol", False) and klass is not Protocol:
            methods.update((n, None) for n, v in vars(klass).items() if callable(v) and not n.startswith("_"))
    return tuple(methods)


def class_implements(plugin_type: type, protocol: type) -> bool:
    """Whether a plugin class defines `protocol`'s methods: config validation sorts classes
    into extension points before any plugin is built."""
    return all(callable(getattr(plugin_type, method, None)) for method in protocol_methods(protocol))


def implemented_points(plugin: object) -> list[str]:
    """The extension points a plugin class (or instance) implements, in cycle order."""
    if isinstance(plugin, type):
        return [point for point, protocol in EXTENSION_POINTS.items() if class_implements(plugin, protocol)]
    return [point for point, protocol in EXTENSION_POINTS.items() if isinstance(plugin, protocol)]
