"""Cache: nodes, the pods bound or assumed on them, and the other objects plugins read.

Pod states follow upstream: a pod the scheduler picked a node for is *assumed* (counted
on the node at once, before Reserve); the watch later confirms it bound (it is then
counted once, not twice), or the binding fails and the pod is *forgotten*, or the watch
shows it deleted and it is removed. Assumed pods never expire on a timer, as upstream's
cache: an expiry raced with slow binds and counted pods twice (kubernetes#106361), so its
TTL became 0 and FinishBinding and the cleanup loop were removed. A bind call that times
out fails the binding (forget); a bind that succeeded is shown by the watch or, after a
relist, by the operator's reconcile.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass

from kopfsched.cache.node_tree import NodeTree
from kopfsched.cache.objects import ObjectStore
from kopfsched.cache.snapshot import Snapshot
from kopfsched.framework.types import ImageStateSummary, NodeInfo, Obj, PodInfo


@dataclass(slots=True)
class _PodState:
    pod_info: PodInfo
    assumed: bool = False


class Cache:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodState] = {}
        self._tree = NodeTree()
        self._images: dict[str, ImageStateSummary] = {}
        self._image_nodes: dict[str, set[str]] = {}
        self._dirty: set[str] = set()
        """Nodes whose pods or Node object changed since the last snapshot update."""
        self._node_dirty: set[str] = set()
        """Of those, the nodes whose Node object changed (the others need no node-static column read again)."""
        self._order_changed = True
        self.objects = ObjectStore()

    # -- nodes ---------------------------------------------------------------------------

    def add_node(self, node: Obj) -> NodeInfo:
        """Add or update a node (the watch's ADDED and MODIFIED alike)."""
        name = node["metadata"]["name"]
        info = self._nodes.get(name)
        if info is None:
            info = self._nodes[name] = NodeInfo()
        self._remove_node_images(info)
        info.set_node(node)
        self._add_node_images(info)
        if self._tree.add(node):
            self._order_changed = True
        self._dirty.add(name)
        self._node_dirty.add(name)
        return info

    update_node = add_node

    def remove_node(self, name: str) -> None:
        info = self._nodes.get(name)
        if info is None:
            return
        self._remove_node_images(info)
        self._tree.remove(name)
        if info.pods:
            info.remove_node()  # a ghost until its pods are gone
        else:
            del self._nodes[name]
        self._order_changed = True

    def get_node(self, name: str) -> NodeInfo | None:
        info = self._nodes.get(name)
        return info if info is not None and info.node is not None else None

    def node_infos(self) -> list[NodeInfo]:
        """Every live node's NodeInfo (requested amounts include assumed pods)."""
        return [info for info in self._nodes.values() if info.node is not None]

    def node_names(self) -> list[str]:
        return [name for name, info in self._nodes.items() if info.node is not None]

    def _add_node_images(self, info: NodeInfo) -> None:
        info.image_states = {}
        for image in ((info.node or {}).get("status") or {}).get("images") or ():
            size = image.get("sizeBytes") or 0
            for image_name in image.get("names") or ():
                nodes = self._image_nodes.setdefault(image_name, set())
                nodes.add(info.name)
                summary = self._images.get(image_name)
                if summary is None:
                    summary = self._images[image_name] = ImageStateSummary(size=size, num_nodes=0)
                summary.num_nodes = len(nodes)
                info.image_states[image_name] = summary

    def _remove_node_images(self, info: NodeInfo) -> None:
        for image_name in info.image_states:
            nodes = self._image_nodes.get(image_name)
            if nodes is None:
                continue
            nodes.discard(info.name)
            if nodes:
                self._images[image_name].num_nodes = len(nodes)
            else:
                del self._image_nodes[image_name]
                self._images.pop(image_name).num_nodes = 0
        info.image_states = {}

    # -- pods ------------------------------------------------------------------------------

    def assume_pod(self, pod_info: PodInfo, node_name: str) -> PodInfo:
        """Count the pod on `node_name` before it is bound; returns the assumed PodInfo."""
        raw = pod_info.pod
        spec = {**pod_info.spec, "nodeName": node_name}
        if type(raw) is dict:  # the API's (and the bench's) pods: one shallow copy, without copy's dispatch
            pod = {**raw, "spec": spec}
        else:
            pod = copy.copy(raw)
            pod["spec"] = spec
        assumed = pod_info.placed(pod)
        if assumed.uid in self._pods:
            raise ValueError(f"pod {assumed.key} is already in the cache")
        self._add_to_node(assumed)
        self._pods[assumed.uid] = _PodState(assumed, assumed=True)
        return assumed

    def forget_pod(self, pod_info: PodInfo) -> None:
        """Undo assume_pod after a failed Reserve, Permit or bind."""
        state = self._pods.get(pod_info.uid)
        if state is None or not state.assumed:
            return
        self._remove_from_node(state.pod_info)
        del self._pods[pod_info.uid]

    def assumed_pod(self, uid: str) -> PodInfo | None:
        """The pod's assumed PodInfo; None when it is bound or not in the cache."""
        state = self._pods.get(uid)
        return state.pod_info if state is not None and state.assumed else None

    def is_assumed(self, uid: str) -> bool:
        state = self._pods.get(uid)
        return state is not None and state.assumed

    def add_pod(self, pod: Obj, *, pod_info: PodInfo | None = None) -> PodInfo:
        """A bound pod seen by the watch: confirms an assumed pod or adds a new one.
        `pod_info`: the caller's PodInfo of this very object, to save building another."""
        pod_info = pod_info if pod_info is not None and pod_info.pod is pod else PodInfo(pod)
        state = self._pods.get(pod_info.uid)
        if state is None:
            self._add_to_node(pod_info)
            self._pods[pod_info.uid] = _PodState(pod_info)
            return pod_info
        node_name = pod_info.node_name
        info = self._nodes.get(node_name)
        if (state.assumed and info is not None and info.node is not None
                and state.pod_info.node_name == node_name and info.replace_pod(state.pod_info, pod_info)):
            # Our own bind confirmed: the node's totals stay as they are, only its PodInfo changes.
            self._dirty.add(node_name)
        else:
            self._remove_from_node(state.pod_info)
            self._add_to_node(pod_info)
        state.pod_info = pod_info
        state.assumed = False
        return pod_info

    def remove_pod(self, pod: Obj) -> PodInfo | None:
        uid = (pod.get("metadata") or {}).get("uid") or PodInfo(pod).uid
        state = self._pods.pop(uid, None)
        if state is None:
            return None
        self._remove_from_node(state.pod_info)
        return state.pod_info

    def get_pod(self, uid: str) -> PodInfo | None:
        state = self._pods.get(uid)
        return state.pod_info if state is not None else None

    def pods(self) -> Iterator[PodInfo]:
        return (state.pod_info for state in self._pods.values())

    def _add_to_node(self, pod_info: PodInfo) -> None:
        name = pod_info.node_name
        info = self._nodes.get(name)
        if info is None:
            info = self._nodes[name] = NodeInfo()  # a pod before its node: a ghost until the node arrives
            info.name = name
        info.add_pod(pod_info)
        self._dirty.add(name)

    def _remove_from_node(self, pod_info: PodInfo) -> None:
        name = pod_info.node_name
        info = self._nodes.get(name)
        if info is None:
            return
        info.remove_pod(pod_info)
        self._dirty.add(name)
        if info.node is None and not info.pods:
            del self._nodes[name]

    # -- snapshot ----------------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot) -> None:
        """Bring the snapshot up to date: a full rebuild when the node set or order changed,
        otherwise only the rows of the nodes that changed."""
        if self._order_changed:
            nodes = [self._nodes[name] for name in self._tree.list()]
            snapshot._rebuild(nodes)
            self._order_changed = False
        elif self._dirty:
            snapshot._refresh(self._dirty, self._node_dirty)
        self._dirty = set()
        self._node_dirty = set()

    def stats(self) -> dict[str, int]:
        assumed = sum(1 for s in self._pods.values() if s.assumed)
        return {"nodes": len(self._tree), "pods": len(self._pods), "assumed_pods": assumed}
