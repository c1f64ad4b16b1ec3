"""Why each pod we could not place is still pending: the diagnosis of its last attempt.

kube-scheduler tells a user why a pod waits through one condition message and one Event.
`PendingPods` keeps, per pod of ours whose last attempt failed, what that attempt found:
how many nodes each reason and each plugin rejected (upstream's reason strings), the
PostFilter (preemption) outcome, the number of attempts, the first and last attempt time.
The running operator serves it at /debug/pending; simulate and tests read it directly.

Memory is bounded whatever the cluster size:
- a summary per pod holds counts, never node names: at most `MAX_REASONS` reasons (the
  rest folded into one "(other reasons)" count) and the message cut to the Event note
  limit, so its size does not grow with the node count;
- at most `MAX_PODS` summaries (the least recently attempted go first);
- the per-node detail (which plugin rejected each node, and why) only for the
  `DETAIL_PODS` most recently failed pods. It is the cycle's own NodeToStatus, kept alive
  rather than copied, so recording costs the scheduling cycle no per-node work.
A held detail is a dict entry and a Status per node, so the worst case is `DETAIL_PODS`
details plus `MAX_PODS` summaries at their longest; docs/dashboard.md gives the sizes
measured (tests/scheduler/test_pending.py and `python -m tests.observability.dashboard_cost`
measure them with tracemalloc).

Entries go when the pod is bound (by us or anyone), deleted, or no longer ours.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kopfsched.framework.diagnosis import FitError
from kopfsched.framework.interface import NodeToStatus
from kopfsched.scheduler.observer import Attempt

MAX_PODS = 20_000
"""Summaries kept; beyond this the least recently attempted pod's entry is dropped."""
DETAIL_PODS = 32
"""Pods whose per-node detail is kept (the most recently failed)."""
MAX_REASONS = 32
"""Distinct reasons kept per pod; the rest are summed under OTHER_REASONS."""
MESSAGE_LIMIT = 1024
"""As the Event note limit: the message as the pod's FailedScheduling Event shows it."""
OTHER_REASONS = "(other reasons)"

RESULTS = {"unschedulable": "Unschedulable", "error": "SchedulerError"}


@dataclass(slots=True)
class PendingPod:
    """The last failed attempt of one pod."""

    uid: str
    namespace: str
    name: str
    scheduler_name: str
    result: str
    """"Unschedulable" or "SchedulerError" (the PodScheduled condition's reason)."""
    message: str
    reasons: dict[str, int]
    """Nodes rejected per reason."""
    plugins: dict[str, int]
    """Nodes rejected per plugin."""
    nodes: int
    """Nodes the attempt considered (the N of "0/N nodes are available")."""
    attempts: int
    first_attempt: float
    last_attempt: float
    """Wall-clock seconds."""
    post_filter: str = ""
    """The PostFilter (preemption) message: why preemption did not help, or empty."""
    nominated_node: str = ""
    victims: tuple[str, ...] = ()
    detail: NodeToStatus | None = None
    """Per-node statuses, held for the DETAIL_PODS most recent failures only."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_json(self) -> dict:
        """The /debug/pending entry (the documented fields first, then ours)."""
        return {
            "namespace": self.namespace, "name": self.name, "schedulerName": self.scheduler_name,
            "attempts": self.attempts, "lastAttempt": rfc3339(self.last_attempt), "message": self.message,
            "reasons": dict(self.reasons),
            "result": self.result, "firstAttempt": rfc3339(self.first_attempt), "nodes": self.nodes,
            "plugins": dict(self.plugins),
            "preemption": {"message": self.post_filter, "nominatedNode": self.nominated_node or None,
                           "victims": list(self.victims)},
            "detail": self.detail is not None,
        }

    def detail_json(self) -> dict[str, dict]:
        """Every rejected node as simulate --explain's `filter` map: {node: {plugin, code, reasons}}."""
        detail = self.detail
        if detail is None:
            return {}
        out: dict[str, dict] = {}
        cache: dict[int, dict] = {}
        for node, status in detail.statuses.items():
            entry = cache.get(id(status))
            if entry is None:
                entry = cache[id(status)] = {"plugin": status.plugin, "code": status.code.upstream_name,
                                             "reasons": list(status.reasons)}
            out[node] = entry
        return out


def rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class PendingPods:
    """The diagnosis of the last failed attempt of every pod still pending; see the module doc."""

    def __init__(self, *, clock: Callable[[], float] = time.time, max_pods: int = MAX_PODS,
                 detail_pods: int = DETAIL_PODS) -> None:
        self.clock = clock
        self.max_pods = max_pods
        self.detail_pods = detail_pods
        self._pods: OrderedDict[str, PendingPod] = OrderedDict()
        """By uid, least recently attempted first."""
        self._detailed: OrderedDict[str, None] = OrderedDict()
        """uids whose detail is held, oldest first."""

    def __len__(self) -> int:
        return len(self._pods)

    def __iter__(self) -> Iterator[PendingPod]:
        return iter(list(self._pods.values()))

    def latest(self) -> Iterator[PendingPod]:
        """Most recently attempted first (do not record or forget while iterating)."""
        return reversed(self._pods.values())

    def get(self, uid: str) -> PendingPod | None:
        return self._pods.get(uid)

    def find(self, namespace: str, name: str) -> PendingPod | None:
        for entry in self._pods.values():
            if entry.name == name and entry.namespace == namespace:
                return entry
        return None

    def record(self, attempt: Attempt, failure: FitError | None = None) -> None:
        """A failed attempt (result "unschedulable" or "error"). `failure` is the FitError
        when filtering found no node (or a plugin rejected the chosen one)."""
        pod = attempt.pod
        now = self.clock()
        previous = self._pods.pop(pod.uid, None)
        reasons: dict[str, int] = {}
        plugins: dict[str, int] = {}
        nodes = 0
        detail = None
        if failure is not None:
            counts = failure.counts
            reasons, plugins = _bounded(counts.reasons), dict(counts.plugins)
            nodes = failure.num_all_nodes
            detail = failure.diagnosis.node_to_status
        diagnosis = attempt.diagnosis
        entry = PendingPod(
            uid=pod.uid, namespace=pod.namespace, name=pod.name, scheduler_name=pod.scheduler_name,
            result=RESULTS.get(attempt.result, attempt.result), message=_cut(attempt.message),
            reasons=reasons, plugins=plugins, nodes=nodes, attempts=attempt.attempts,
            first_attempt=previous.first_attempt if previous is not None else now, last_attempt=now,
            post_filter=_cut(diagnosis.post_filter_msg) if diagnosis is not None else "",
            nominated_node=attempt.nominated_node, victims=attempt.victims, detail=detail)
        self._pods[pod.uid] = entry
        self._detailed.pop(pod.uid, None)
        if detail is not None:
            self._detailed[pod.uid] = None
            while len(self._detailed) > self.detail_pods:
                oldest, _ = self._detailed.popitem(last=False)
                held = self._pods.get(oldest)
                if held is not None:
                    held.detail = None
        while len(self._pods) > self.max_pods:
            oldest_uid, _ = self._pods.popitem(last=False)
            self._detailed.pop(oldest_uid, None)

    def forget(self, uid: str) -> None:
        """The pod was bound, deleted, or is no longer ours."""
        if self._pods.pop(uid, None) is not None:
            self._detailed.pop(uid, None)

    def clear(self) -> None:
        self._pods.clear()
        self._detailed.clear()

    def to_json(self) -> dict:
        """GET /debug/pending: most recently attempted first."""
        return {"pods": [entry.to_json() for entry in reversed(self._pods.values())]}


def _bounded(reasons: dict[str, int]) -> dict[str, int]:
    if len(reasons) <= MAX_REASONS:
        return dict(reasons)
    ranked = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    kept = dict(ranked[: MAX_REASONS - 1])
    kept[OTHER_REASONS] = sum(count for _, count in ranked[MAX_REASONS - 1:])
    return kept


def _cut(message: str) -> str:
    suffix = " ..."
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - len(suffix)] + suffix
