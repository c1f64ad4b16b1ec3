"""Nominator: the pods that preemption promised a node to (upstream's podNominator).

Filled from `status.nominatedNodeName` when the queue sees a pod, and by
`add_nominated_pod` right after preemption (before the API write lands). Filter then
counts higher-or-equal-priority nominated pods as if they already ran on that node.
"""

from __future__ import annotations

from kopfsched.framework.types import PodInfo


def status_nominated_node(pod: PodInfo) -> str:
    return (pod.pod.get("status") or {}).get("nominatedNodeName") or ""


_COUNTED_PRIORITIES_KEPT = 8
"""Priorities whose counted pods per node the Nominator keeps current (the oldest goes)."""


class Nominator:
    """Implements framework.handle.PodNominator."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}
        self._lists: dict[str, list[PodInfo]] = {}
        """node -> its nominated pods as a list, built when first asked since the node's last change."""
        self._names: list[str] | None = None
        self._counted: dict[int, dict[str, list[PodInfo]]] = {}
        """priority -> node -> the pods nominated there of at least that priority, kept current
        node by node as nominations change (for the few priorities asked last)."""

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """The pods nominated to `node_name`, in nomination order. Filter asks this for every
        nominated node of every cycle: the list is kept until the node's nominations change,
        so callers must not modify it."""
        pods = self._lists.get(node_name)
        if pods is None:
            by_uid = self._by_node.get(node_name)
            if by_uid is None:
                return []
            pods = self._lists[node_name] = list(by_uid.values())
        return pods

    def nominated_node_names(self) -> list[str]:
        """The nodes with at least one nominated pod (Filter looks at these alone); kept until
        the next change, so callers must not modify it."""
        if self._names is None:
            self._names = list(self._by_node)
        return self._names

    def pods_to_count(self, pod: PodInfo) -> dict[str, list[PodInfo]]:
        """Node -> the pods nominated there that Filter counts as running when it checks `pod`
        (the others of at least its priority, as Framework.nominated_pods_to_count), for every
        node at once, kept current per priority as nominations change: Filter and preemption's
        dry run look it up per node instead of filtering every node's pods for every pod.
        Callers must not modify it."""
        counted = self._counted.get(pod.priority)
        if counted is None:
            if len(self._counted) >= _COUNTED_PRIORITIES_KEPT:
                del self._counted[next(iter(self._counted))]
            counted = self._counted[pod.priority] = {}
            for node_name in self._by_node:
                self._count_node(counted, pod.priority, node_name)
        own = self._node_of.get(pod.uid)
        if own is None or own not in counted:
            return counted
        # The pod is nominated itself: every node as counted, its own node without it.
        answer = dict(counted)
        others = [p for p in counted[own] if p.uid != pod.uid]
        if others:
            answer[own] = others
        else:
            del answer[own]
        return answer

    def _count_node(self, counted: dict[str, list[PodInfo]], priority: int, node_name: str) -> None:
        pods = [p for p in self._by_node.get(node_name, {}).values() if p.priority >= priority]
        if pods:
            counted[node_name] = pods
        else:
            counted.pop(node_name, None)

    def _changed(self, node_name: str) -> None:
        self._lists.pop(node_name, None)
        for priority, counted in self._counted.items():
            self._count_node(counted, priority, node_name)

    def nominated_node(self, uid: str) -> str:
        return self._node_of.get(uid, "")

    def add_nominated_pod(self, pod: PodInfo, node_name: str = "") -> None:
        """Nominate `pod` to `node_name`, or to its status.nominatedNodeName when empty."""
        self.delete_nominated_pod(pod)
        node_name = node_name or status_nominated_node(pod)
        if not node_name or pod.node_name:
            # Nothing to nominate, or the pod is bound (or assumed) already.
            return
        self._node_of[pod.uid] = node_name
        pods = self._by_node.get(node_name)
        if pods is None:
            pods = self._by_node[node_name] = {}
            self._names = None
        pods[pod.uid] = pod
        self._changed(node_name)

    def delete_nominated_pod(self, pod: PodInfo) -> None:
        node_name = self._node_of.pop(pod.uid, None)
        if node_name is None:
            return
        pods = self._by_node.get(node_name)
        if pods is not None:
            pods.pop(pod.uid, None)
            if not pods:
                del self._by_node[node_name]
                self._names = None
        self._changed(node_name)

    def update_nominated_pod(self, old: PodInfo | None, new: PodInfo) -> None:
        """Follow a pod update.

        If neither version carries a nominatedNodeName, keep the node preemption chose:
        the update raced with the status write that will carry it.
        """
        keep = ""
        if (old is None or not status_nominated_node(old)) and not status_nominated_node(new):
            keep = self._node_of.get(new.uid, "")
        self.delete_nominated_pod(new)
        self.add_nominated_pod(new, keep)

    def __len__(self) -> int:
        return len(self._node_of)
