"""Args of NodeResourcesFit and NodeResourcesBalancedAllocation, as kubescheduler.config.k8s.io/v1.

Decoding applies upstream's v1 defaults (defaults.go) and then upstream's validation
(validation_pluginargs.go); every problem is reported at once, with its field path and
the wording of upstream's field errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopfsched.framework.registry import check_known_fields, checked_args

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SUPPORTED_SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_CUSTOM_PRIORITY_SCORE = 10

Problems = list[tuple[str, str]]


# --- upstream's field error wording ------------------------------------------------------

def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def invalid(value: Any, detail: str) -> str:
    return f"Invalid value: {_show(value)}: {detail}"


def not_supported(value: Any, supported: tuple[str, ...]) -> str:
    return f"Unsupported value: {_show(value)}: supported values: " + ", ".join(f'"{s}"' for s in supported)


def required(detail: str) -> str:
    return f"Required value: {detail}"


def forbidden(detail: str) -> str:
    return f"Forbidden: {detail}"


def duplicate(value: Any) -> str:
    return f"Duplicate value: {_show(value)}"


# --- qualified names, as apimachinery's IsQualifiedName ----------------------------------

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    f"character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{_QUALIFIED_NAME_FMT}')"
)
_DNS1123_SUBDOMAIN_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    f"start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_DNS1123_SUBDOMAIN_FMT}')"
)


def qualified_name_errors(value: str) -> list[str]:
    """The messages apimachinery's IsQualifiedName gives for `value` (empty when valid)."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN.match(prefix):
                errors.append("prefix part " + _DNS1123_SUBDOMAIN_MSG)
    else:
        return ["a qualified name " + _QUALIFIED_NAME_MSG
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.match(name):
        errors.append("name part " + _QUALIFIED_NAME_MSG)
    return errors


# --- decoding helpers --------------------------------------------------------------------

def _obj(raw: Any, path: str, problems: Problems) -> Mapping[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append((path, f"must be an object, got {raw!r}"))
        return None
    return raw


def _list(raw: Any, path: str, problems: Problems) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append((path, f"must be a list, got {raw!r}"))
        return []
    return raw


def _int(raw: Any, path: str, problems: Problems) -> int:
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int):
        problems.append((path, f"must be an integer, got {raw!r}"))
        return 0
    return raw


def _str(raw: Any, path: str, problems: Problems) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        problems.append((path, f"must be a string, got {raw!r}"))
        return ""
    return raw


def _strict(raw: Mapping[str, Any], known: set[str], path: str, problems: Problems) -> None:
    nested: Problems = []
    check_known_fields(raw, known, nested)
    problems.extend((f"{path}.{p}" if path else p, m) for p, m in nested)


# --- the args ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A resource to score and its weight."""

    name: str
    weight: int = 1
    """Weight in the weighted mean; 0 (unset) defaults to 1."""


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def _decode_resources(raw: Any, path: str, problems: Problems) -> tuple[ResourceSpec, ...]:
    specs = []
    for i, item in enumerate(_list(raw, path, problems)):
        item_path = f"{path}[{i}]"
        obj = _obj(item, item_path, problems) or {}
        _strict(obj, {"name", "weight"}, item_path, problems)
        weight = _int(obj.get("weight"), f"{item_path}.weight", problems)
        specs.append(ResourceSpec(_str(obj.get("name"), f"{item_path}.name", problems), weight or 1))
    return tuple(specs) or DEFAULT_RESOURCES


@dataclass(frozen=True, slots=True)
class UtilizationShapePoint:
    utilization: int
    """Utilization on the x axis, 0..100."""
    score: int
    """Score on the y axis, 0..10 (scaled to 0..100 when scoring)."""


@dataclass(frozen=True, slots=True)
class RequestedToCapacityRatioParam:
    shape: tuple[UtilizationShapePoint, ...] = ()
    """Points of the broken-line function from utilization to score, sorted by utilization."""


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    type: str = LEAST_ALLOCATED
    """LeastAllocated, MostAllocated or RequestedToCapacityRatio."""
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    """Resources to score with their weights; default cpu=1, memory=1."""
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None
    """The shape; required with RequestedToCapacityRatio, validated and ignored with the other types."""


def _decode_strategy(raw: Mapping[str, Any], path: str, problems: Problems) -> ScoringStrategy:
    _strict(raw, {"type", "resources", "requestedToCapacityRatio"}, path, problems)
    rtcr = None
    rtcr_raw = _obj(raw.get("requestedToCapacityRatio"), f"{path}.requestedToCapacityRatio", problems)
    if rtcr_raw is not None:
        rtcr_path = f"{path}.requestedToCapacityRatio"
        _strict(rtcr_raw, {"shape"}, rtcr_path, problems)
        points = []
        for i, item in enumerate(_list(rtcr_raw.get("shape"), f"{rtcr_path}.shape", problems)):
            point_path = f"{rtcr_path}.shape[{i}]"
            obj = _obj(item, point_path, problems) or {}
            _strict(obj, {"utilization", "score"}, point_path, problems)
            points.append(UtilizationShapePoint(_int(obj.get("utilization"), f"{point_path}.utilization", problems),
                                                _int(obj.get("score"), f"{point_path}.score", problems)))
        rtcr = RequestedToCapacityRatioParam(tuple(points))
    return ScoringStrategy(
        type=_str(raw.get("type"), f"{path}.type", problems),
        resources=_decode_resources(raw.get("resources"), f"{path}.resources", problems),
        requested_to_capacity_ratio=rtcr,
    )


def _validate_shape(shape: tuple[UtilizationShapePoint, ...], path: str, problems: Problems) -> None:
    if not shape:
        problems.append((path, required("at least one point must be specified")))
        return
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            problems.append((f"{path}[{i}].utilization",
                             invalid(shape[i].utilization, "values must be sorted in increasing order")))
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= 100:
            problems.append((f"{path}[{i}].utilization", invalid(point.utilization, "not in valid range [0, 100]")))
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            problems.append((f"{path}[{i}].score",
                             invalid(point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")))


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs:
    """Args of NodeResourcesFit."""

    ignored_resources: tuple[str, ...] = ()
    """Extended resources Filter does not check."""
    ignored_resource_groups: tuple[str, ...] = ()
    """Extended-resource prefixes (the part before '/') Filter does not check."""
    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)
    """How Score ranks nodes; default LeastAllocated over cpu=1, memory=1."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NodeResourcesFitArgs:
        problems: Problems = []
        _strict(raw, {"ignoredResources", "ignoredResourceGroups", "scoringStrategy"}, "", problems)
        ignored = tuple(_str(v, f"ignoredResources[{i}]", problems)
                        for i, v in enumerate(_list(raw.get("ignoredResources"), "ignoredResources", problems)))
        groups = tuple(_str(v, f"ignoredResourceGroups[{i}]", problems)
                       for i, v in enumerate(_list(raw.get("ignoredResourceGroups"), "ignoredResourceGroups",
                                                   problems)))
        strategy_raw = _obj(raw.get("scoringStrategy"), "scoringStrategy", problems)
        strategy = ScoringStrategy() if strategy_raw is None else _decode_strategy(strategy_raw, "scoringStrategy",
                                                                                   problems)
        return checked_args(cls(ignored, groups, strategy), problems)

    def problems(self) -> Problems:
        """upstream ValidateNodeResourcesFitArgs."""
        problems: Problems = []
        for i, name in enumerate(self.ignored_resources):
            problems.extend((f"ignoredResources[{i}]", invalid(name, msg)) for msg in qualified_name_errors(name))
        for i, group in enumerate(self.ignored_resource_groups):
            path = f"ignoredResourceGroups[{i}]"
            if "/" in group:
                problems.append((path, invalid(group, "resource group name can't contain '/'")))
            problems.extend((path, invalid(group, msg)) for msg in qualified_name_errors(group))
        strategy = self.scoring_strategy
        path = "scoringStrategy"
        if strategy.type not in SUPPORTED_SCORING_STRATEGY_TYPES:
            problems.append((f"{path}.type", not_supported(strategy.type, SUPPORTED_SCORING_STRATEGY_TYPES)))
        for i, spec in enumerate(strategy.resources):
            if not 0 < spec.weight <= 100:
                problems.append((f"{path}.resources[{i}].weight",
                                 invalid(spec.weight, f"resource weight of {spec.name} not in valid range (0, 100]")))
        # As upstream: a given shape is validated whatever the type (other types ignore it),
        # and its errors sit at scoringStrategy.shape.
        if strategy.requested_to_capacity_ratio is not None:
            _validate_shape(strategy.requested_to_capacity_ratio.shape, f"{path}.shape", problems)
        elif strategy.type == REQUESTED_TO_CAPACITY_RATIO:
            # Upstream has no such check and dereferences the missing shape in NewFit (a panic).
            problems.append((f"{path}.requestedToCapacityRatio",
                             required("must be specified when type is RequestedToCapacityRatio")))
        return problems


@dataclass(frozen=True, slots=True)
class NodeResourcesBalancedAllocationArgs:
    """Args of NodeResourcesBalancedAllocation."""

    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    """Resources whose requested fractions are balanced; every weight must be 1. Default cpu, memory."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NodeResourcesBalancedAllocationArgs:
        problems: Problems = []
        _strict(raw, {"resources"}, "", problems)
        return checked_args(cls(_decode_resources(raw.get("resources"), "resources", problems)), problems)

    def problems(self) -> Problems:
        """upstream ValidateNodeResourcesBalancedAllocationArgs."""
        problems: Problems = []
        seen: set[str] = set()
        for i, spec in enumerate(self.resources):
            if spec.name in seen:
                problems.append((f"resources[{i}].name", duplicate(spec.name)))
            seen.add(spec.name)
            if spec.weight != 1:
                problems.append((f"resources[{i}].weight", invalid(spec.weight, "must be 1")))
        return problems
