"""NodeDeclaredFeatures: a pod that needs a node feature goes only to nodes that declare it in
`status.declaredFeatures` (upstream's nodedeclaredfeatures plugin, KEP-5328; GA and locked on
in v1.37, the last plugin of the default profile).

Which features a pod needs is inferred from its spec, by the feature registry of
k8s.io/component-helpers/nodedeclaredfeatures at v0.37.2 (`FEATURES` below, one entry per
registered feature whose InferForScheduling can say yes; the others never require anything
at scheduling time).

Extension points:

- PreFilter: Skip for a pod that needs no feature (almost every pod); otherwise the set of
  features it needs goes into the cycle state.
- Filter: the node must declare every one of them, else UnschedulableAndUnresolvable
  "node(s) didn't match Pod's required features" (preemption cannot add a feature).
- Events: a node added or whose declared features changed; the pod itself updated so that
  what it needs changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kopfsched.framework.interface import SignFragment
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.status import SKIP, Status
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.helper import objects, signers

NAME = "NodeDeclaredFeatures"
ERR_REASON_UNSATISFIED_REQUIREMENTS = "node(s) didn't match Pod's required features"
COMPONENT_VERSION = (1, 37, 2)
"""The version features' MaxVersion is compared with (upstream: the scheduler's own build)."""

Spec = Mapping[str, Any]


@dataclass(frozen=True)
class Feature:
    """One registered node feature: its name and whether a pod spec needs it to be scheduled."""

    name: str
    infer_for_scheduling: Callable[[Spec], bool]
    max_version: tuple[int, ...] | None = None
    """Past this version every node has the feature, so no pod needs it declared."""


def _all_containers(spec: Spec) -> Iterable[Spec]:
    yield from spec.get("containers") or ()
    yield from spec.get("initContainers") or ()


def _restarts_all_containers(spec: Spec) -> bool:
    """restartallcontainers: a container rule with action RestartAllContainers."""
    return any(rule.get("action") == "RestartAllContainers"
               for container in _all_containers(spec) for rule in container.get("restartPolicyRules") or ())


def _user_namespace_with_host_network(spec: Spec) -> bool:
    """usernamespaceshostnetwork: hostNetwork with hostUsers: false."""
    return bool(spec.get("hostNetwork")) and spec.get("hostUsers") is False


def _bind_mount_options(spec: Spec) -> bool:
    """volumebindmountoptions: a volume mount with bindMountOptions, in any container."""
    containers = [*_all_containers(spec), *(spec.get("ephemeralContainers") or ())]
    return any(mount.get("bindMountOptions")
               for container in containers for mount in container.get("volumeMounts") or ())


FEATURES: tuple[Feature, ...] = (
    Feature("RestartAllContainersOnContainerExits", _restarts_all_containers),
    Feature("UserNamespacesHostNetworkSupport", _user_namespace_with_host_network),
    Feature("VolumeBindMountOptions", _bind_mount_options),
)
"""The registered features that can require something of a node at scheduling time (the
DRA, resize and websocket features of the registry infer nothing for scheduling)."""


def infer_for_pod_scheduling(features: Sequence[Feature], spec: Spec,
                             version: tuple[int, ...] | None) -> frozenset[str]:
    """Upstream's Framework.InferForPodScheduling: the features the pod needs."""
    if version is None:
        raise ValueError("target version cannot be nil")
    return frozenset(f.name for f in features
                     if not (f.max_version is not None and version > f.max_version) and f.infer_for_scheduling(spec))


_NONE: frozenset[str] = frozenset()


def _may_need_a_feature(spec: Spec) -> bool:
    """False when no feature of FEATURES can be inferred for the pod: no container of any
    kind has restartPolicyRules or volumeMounts, and no hostNetwork (what each feature
    looks at first). One look per container, every cycle, instead of three passes."""
    if spec.get("hostNetwork"):
        return True
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(kind) or ():
            if container.get("restartPolicyRules") or container.get("volumeMounts"):
                return True
    return False


STATE_KEY = StateKey[frozenset[str]](NAME, "PreFilter" + NAME)


class NodeDeclaredFeatures:
    name = NAME

    def __init__(self, args: Any = None, handle: Any = None, *, features: Sequence[Feature] = FEATURES,
                 version: tuple[int, ...] | None = COMPONENT_VERSION) -> None:
        self.features = tuple(features)
        self.version = version

    def _requirements(self, spec: Spec) -> frozenset[str]:
        if self.features is FEATURES and self.version is not None and not _may_need_a_feature(spec):
            return _NONE
        return infer_for_pod_scheduling(self.features, spec, self.version)

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        try:
            return [(signers.REQUIRED_FEATURES, sorted(self._requirements(pod.spec)))]
        except ValueError:
            return None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        try:
            required = self._requirements(pod.spec)
        except ValueError as exc:
            return Status.as_error(exc)
        if not required:
            return SKIP
        state.write(STATE_KEY, required)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        required = state.get(STATE_KEY)
        if required is None:
            return Status.as_error(f'error reading "PreFilter{NAME}" from cycle-state: not found')
        declared = ((node.node or {}).get("status") or {}).get("declaredFeatures") or ()
        if not required.issubset(declared):
            return Status.unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS)
        return None

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_DECLARED_FEATURE),
                self.is_schedulable_after_node_change),
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.UPDATE),
                                 self.is_schedulable_after_target_pod_update),
        ]

    def is_schedulable_after_node_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """A new node, or one whose declared features changed."""
        old_node, new_node = objects.raw(old), objects.raw(new)
        if old_node is not None and ((old_node.get("status") or {}).get("declaredFeatures") or []) == (
                ((new_node or {}).get("status") or {}).get("declaredFeatures") or []):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    def is_schedulable_after_target_pod_update(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """The rejected pod itself changed what it needs (an error in inferring queues it)."""
        old_pod, new_pod = objects.raw(old), objects.raw(new)
        if new_pod is None or objects.uid(objects.raw(pod)) != objects.uid(new_pod):
            return QueueingHint.SKIP
        try:
            changed = self._requirements(objects.spec(old_pod)) != self._requirements(objects.spec(new_pod))
        except ValueError:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if changed else QueueingHint.SKIP


PLUGIN = PluginFactory(name=NAME, factory=NodeDeclaredFeatures)
