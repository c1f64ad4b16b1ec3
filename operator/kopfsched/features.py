"""Feature gates: kube-scheduler's `--feature-gates`, at the release kopfsched follows (v1.37.2).

`UPSTREAM` is every gate kube-scheduler v1.37.2 consults (pkg/scheduler and its plugins) with
its stage and default there (pkg/features/kube_features.go); docs/feature-gates.md says what
kopfsched does with each. The gates in `SWITCHABLE` change kopfsched's behaviour when switched;
the process-wide `GATES` is what the Scheduler and the plugins read when they are built, as
upstream reads its DefaultFeatureGate. The CLI sets it from `--feature-gates Name=true|false,...`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

RELEASE = "v1.37.2"
"""The kube-scheduler release whose gates, defaults and strings kopfsched follows."""

POP_FROM_BACKOFF_Q = "SchedulerPopFromBackoffQ"
STORAGE_CAPACITY_SCORING = "StorageCapacityScoring"
NODE_DECLARED_FEATURES = "NodeDeclaredFeatures"
DRA_PRIORITIZED_LIST = "DRAPrioritizedList"
VOLUME_LIMIT_SCALING = "VolumeLimitScaling"
DRA_DEVICE_TAINTS = "DRADeviceTaints"
DRA_DEVICE_TAINT_RULES = "DRADeviceTaintRules"
NOMINATED_NODE_NAME_FOR_EXPECTATION = "NominatedNodeNameForExpectation"
OPPORTUNISTIC_BATCHING = "OpportunisticBatching"


@dataclass(frozen=True)
class Gate:
    """One upstream gate at RELEASE."""

    stage: str
    """"Alpha", "Beta" or "GA"."""
    default: bool
    locked: bool = False
    """LockToDefault: kube-scheduler refuses any other value."""


def _gates(rows: str) -> dict[str, Gate]:
    table = {}
    for line in rows.strip().splitlines():
        name, stage, default, *locked = line.split()
        table[name] = Gate(stage, default == "on", bool(locked))
    return table


UPSTREAM: Mapping[str, Gate] = _gates("""
CompositePodGroup                             Alpha off
DRAAdminAccess                                GA    on  locked
DRAConsumableCapacity                         Beta  on
DRADerivedAttributes                          Alpha off
DRADeviceBindingConditions                    Beta  on
DRADeviceCompatibilityGroups                  Alpha off
DRADeviceTaintRules                           GA    on
DRADeviceTaints                               GA    on
DRAExtendedResource                           GA    on  locked
DRAFractionalCapacityRange                    Beta  on
DRAListTypeAttributes                         Alpha off
DRANodeAllocatableResources                   Alpha off
DRAOptionalNodeOperations                     Alpha off
DRAPartitionableDevices                       Beta  on
DRAPrioritizedList                            GA    on  locked
DRAResourceClaimDeviceStatus                  GA    on  locked
DRASchedulerFilterTimeout                     Beta  on
DRAWorkloadResourceClaims                     Beta  off
DynamicResourceAllocation                     GA    on  locked
GenericWorkload                               Beta  off
InPlacePodLevelResourcesVerticalScaling       Beta  on
InPlacePodVerticalScaling                     GA    on  locked
InPlacePodVerticalScalingSchedulerPreemption  Alpha off
InterPodAffinityHostnameFastPath              Alpha off
MatchLabelKeysInPodTopologySpread             Beta  on
NodeDeclaredFeatures                          GA    on  locked
NodeInclusionPolicyInPodTopologySpread        GA    on  locked
NominatedNodeNameForExpectation               Beta  on
OpportunisticBatching                         Beta  on
PodGroupPreemptionPolicy                      Alpha off
PodLevelResources                             Beta  on
SchedulerAsyncAPICalls                        Beta  off
SchedulerAsyncPreemption                      Beta  on
SchedulerPopFromBackoffQ                      Beta  on
SchedulerPreQueueingHints                     Alpha off
StorageCapacityScoring                        Beta  on
TaintTolerationComparisonOperators            Alpha off
TopologyAwareWorkloadScheduling               Alpha off
VolumeAttributesClass                         GA    on  locked
VolumeLimitScaling                            Beta  on
""")
"""Every gate kube-scheduler v1.37.2 reads, with its stage and default there."""

SWITCHABLE: frozenset[str] = frozenset({NOMINATED_NODE_NAME_FOR_EXPECTATION, POP_FROM_BACKOFF_Q,
                                        STORAGE_CAPACITY_SCORING, VOLUME_LIMIT_SCALING, DRA_DEVICE_TAINTS,
                                        DRA_DEVICE_TAINT_RULES, OPPORTUNISTIC_BATCHING})
"""The gates whose other value kopfsched implements too."""

DEPENDENCIES: Mapping[str, tuple[str, ...]] = {DRA_DEVICE_TAINT_RULES: (DRA_DEVICE_TAINTS,)}
"""Gate -> the gates it needs on (kube_features.go's defaultKubernetesFeatureGateDependencies),
for the switchable ones: the others cannot change, so neither can their dependencies' answer."""

KNOWN: Mapping[str, bool] = {name: gate.default for name, gate in UPSTREAM.items()}
"""Gate -> its default at RELEASE."""


class FeatureGates:
    """The gates' values: the defaults, with the overrides given.

    A gate may be set to its default whatever it is (kube-scheduler accepts that too); to the
    other value only if it is switchable here, and never when upstream locks it."""

    def __init__(self, overrides: Mapping[str, bool] | None = None) -> None:
        for name, value in sorted((overrides or {}).items()):
            gate = UPSTREAM.get(name)
            if gate is None:
                raise ValueError(f"unrecognized feature gate {name!r} (kube-scheduler {RELEASE} has no such "
                                 f"gate; kopfsched can switch: {', '.join(sorted(SWITCHABLE))})")
            if value == gate.default:
                continue
            if gate.locked:  # upstream's words
                raise ValueError(f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to "
                                 f"{str(gate.default).lower()}")
            if name not in SWITCHABLE:
                raise ValueError(f"feature gate {name} cannot be switched in kopfsched: it stays "
                                 f"{'on' if gate.default else 'off'}, as its default (see docs/feature-gates.md; "
                                 f"kopfsched can switch: {', '.join(sorted(SWITCHABLE))})")
        self._values = {**KNOWN, **(overrides or {})}
        for name, needs in sorted(DEPENDENCIES.items()):
            disabled = [need for need in needs if not self._values[need]]
            if self._values[name] and disabled:  # upstream's words (component-base featuregate)
                raise ValueError(f"{name} is enabled, but depends on features that are disabled: "
                                 f"[{' '.join(disabled)}]")

    def enabled(self, name: str) -> bool:
        return self._values[name]

    def __repr__(self) -> str:
        changed = {name: value for name, value in self._values.items() if value != KNOWN[name]}
        return f"FeatureGates({changed!r})"


def parse(text: str) -> FeatureGates:
    """`Name=true,Other=false` (kube-scheduler's --feature-gates syntax); ValueError, one line, otherwise."""
    overrides: dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or not name or value not in ("true", "false"):
            raise ValueError(f"invalid feature gate {item!r}: expected Name=true or Name=false")
        overrides[name] = value == "true"
    return FeatureGates(overrides)


GATES = FeatureGates()
"""The process's gates; `set_gates` replaces them (before any Scheduler is built)."""


def set_gates(gates: FeatureGates) -> None:
    global GATES
    GATES = gates


def enabled(name: str) -> bool:
    return GATES.enabled(name)
