"""NodePorts: a pod's host ports must be free on the node.

PreFilter collects the ports once (Skip when there are none); Filter checks them against
NodeInfo.used_ports. Rejections are Unschedulable: evicting the pod holding a port helps.
The batch Filter looks only at the nodes where some port is in use (a table column).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import (
    NODE_ADD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kopfsched.framework.interface import PreFilterResult, SignFragment
from kopfsched.framework.node_table import ColumnSpec, NodeTable
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.status import SKIP, Status, TalliedStatuses
from kopfsched.framework.types import HostPortInfo, NodeInfo, PodInfo
from kopfsched.plugins.helper import objects, signers

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"

HostPort = tuple[str, str, int]
"""(hostIP, protocol, hostPort), with upstream's defaults 0.0.0.0 and TCP filled in."""

USED_PORTS = ColumnSpec("NodePorts/usedPorts", lambda n: len(n.used_ports), np.int64)
"""Per node: how many host ports its pods hold (0 on most nodes: no conflict there)."""

PRE_FILTER_STATE = StateKey[tuple[HostPort, ...]]("NodePorts", "PreFilterNodePorts")


def host_ports(pod: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The host ports a pod holds while it runs, as upstream's util.GetHostPorts: those of
    restartable (sidecar) init containers and of regular containers."""
    spec = pod.get("spec") or {}
    containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    containers += spec.get("containers") or ()
    return tuple(
        (p.get("hostIP") or HostPortInfo.WILDCARD, p.get("protocol") or "TCP", p["hostPort"])
        for c in containers
        for p in c.get("ports") or ()
        if (p.get("hostPort") or 0) > 0
    )


def fits_ports(want: Iterable[HostPort], in_use: HostPortInfo) -> bool:
    return not any(in_use.check_conflict(ip, protocol, port) for ip, protocol, port in want)


class NodePorts:
    name = "NodePorts"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        return [signers.host_ports(pod)]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> PreFilterResult | Status | None:
        # PodInfo.host_ports holds every port with a hostPort set (this one those > 0): when it is
        # empty, so is this, and the pod's containers need not be walked again.
        ports = host_ports(pod.pod) if pod.host_ports else ()
        if not ports:
            return SKIP
        state.write(PRE_FILTER_STATE, ports)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        want = state.get(PRE_FILTER_STATE)
        if want is None:  # PreFilter disabled: compute here.
            want = host_ports(pod.pod)
        return None if fits_ports(want, node.used_ports) else Status.unschedulable(ERR_REASON)

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        want = state.get(PRE_FILTER_STATE)
        if want is None:  # PreFilter disabled: compute here.
            want = host_ports(pod.pod)
        rows = np.asarray(rows)
        passed = table.column(USED_PORTS)[rows] == 0
        busy = np.flatnonzero(~passed)
        if len(busy):
            nodes = table.nodes
            passed[busy] = [fits_ports(want, nodes[row].used_ports) for row in rows[busy].tolist()]
        return passed

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]:
        return TalliedStatuses.same(Status.unschedulable(ERR_REASON), len(rows))

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            # Container ports are immutable, so only a deleted pod can free a port.
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
                                 is_schedulable_after_pod_deleted),
            ClusterEventWithHint(NODE_ADD),
        ]


def is_schedulable_after_pod_deleted(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue when the deleted pod was on (or nominated to) a node and held a port ours wants."""
    deleted = objects.raw(old) or objects.raw(new)
    if deleted is None:
        return QueueingHint.QUEUE
    nominated = (deleted.get("status") or {}).get("nominatedNodeName")
    if not objects.spec(deleted).get("nodeName") and not nominated:
        return QueueingHint.SKIP
    freed = host_ports(deleted)
    if not freed:
        return QueueingHint.SKIP
    used = HostPortInfo()
    for ip, protocol, port in freed:
        used.add(ip, protocol, port)
    want = host_ports(objects.raw(pod) or {})
    return QueueingHint.SKIP if fits_ports(want, used) else QueueingHint.QUEUE


PLUGIN = PluginFactory(name=NodePorts.name, factory=NodePorts)
