"""A registry of fake plugins with upstream's names and extension points, so the config
logic is tested apart from the real plugins."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.interface import EXTENSION_POINTS, protocol_methods
from kopfsched.framework.registry import ArgsError, PluginFactory, Registry
from kopfsched.plugins.registry import IN_TREE_MODULES

SCORING = ("preFilter", "filter", "preScore", "score")

# Extension points as upstream's plugins implement them (the default set minus VolumeBinding and
# DynamicResources).
FAKE_POINTS: dict[str, tuple[str, ...]] = {
    "SchedulingGates": ("preEnqueue",),
    "PrioritySort": ("queueSort",),
    "NodeUnschedulable": ("filter",),
    "NodeName": ("filter",),
    "TaintToleration": ("filter", "preScore", "score"),
    "NodeAffinity": SCORING,
    "NodePorts": ("preFilter", "filter"),
    "NodeResourcesFit": SCORING,
    "VolumeRestrictions": ("preFilter", "filter"),
    "NodeVolumeLimits": ("preFilter", "filter"),
    "VolumeZone": ("preFilter", "filter"),
    "PodTopologySpread": SCORING,
    "InterPodAffinity": SCORING,
    "DefaultPreemption": ("preEnqueue", "postFilter"),
    "NodeResourcesBalancedAllocation": ("preScore", "score"),
    "ImageLocality": ("score",),
    "DefaultBinder": ("bind",),
    "NodeDeclaredFeatures": ("preFilter", "filter"),
    # Out-of-tree style plugins.
    "MyPlugin": SCORING,
    "OtherSort": ("queueSort",),
    "OtherBinder": ("bind",),
}


@dataclass(frozen=True, slots=True)
class FakeArgs:
    """Args with one integer field, 1..100, default 10."""

    level: int = 10

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> FakeArgs:
        problems: list[tuple[str, str]] = [(key, "unknown field") for key in raw if key != "level"]
        level = raw.get("level", 10)
        if not isinstance(level, int) or not 1 <= level <= 100:
            problems.append(("level", f"must be in 1..100, got {level!r}"))
        if problems:
            raise ArgsError(problems)
        return cls(level)


WITH_ARGS = {"NodeResourcesFit", "MyPlugin", "PrioritySort"}


def _noop(self, *args: Any) -> None:
    return None


def fake_class(name: str, points: tuple[str, ...]) -> type:
    methods = {m: _noop for point in points for m in protocol_methods(EXTENSION_POINTS[point])}
    return type(name, (), {"name": name, **methods})


def fake_registry(names: list[str] | None = None) -> Registry:
    registry = Registry()
    for name in names if names is not None else FAKE_POINTS:
        args_type = FakeArgs if name in WITH_ARGS else None
        registry.register(PluginFactory(name=name, factory=fake_class(name, FAKE_POINTS[name]), args_type=args_type))
    return registry


def scheduler_profile(spec: dict[str, Any] | None = None, name: str = "test") -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile",
                           "metadata": {"name": name}}
    if spec is not None:
        obj["spec"] = spec
    return obj


def every_in_tree_plugin() -> Registry:
    """The real plugins, each module IN_TREE_MODULES names imported now: a module that is missing
    or has no PLUGIN fails the test instead of leaving its plugin out."""
    registry = Registry()
    for name, module in IN_TREE_MODULES.items():
        factory = importlib.import_module(module).PLUGIN
        assert factory.name == name, f"{module}.PLUGIN is {factory.name!r}, registered as {name!r}"
        registry.register(factory)
    return registry
