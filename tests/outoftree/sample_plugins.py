"""Objects that test entry points point at: good plugins and every way to get one wrong."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopfsched.framework import ArgsError, CycleState, NodeInfo, PluginFactory, PodInfo, Status

IMPORTED = True  # sys.modules tells whether this module was imported


class Good:
    """A Filter plugin in the class form, with args."""

    name = "Good"

    @dataclass(frozen=True)
    class Args:
        label: str = "good"

        @classmethod
        def from_dict(cls, raw: Mapping[str, Any]) -> Good.Args:
            label = raw.get("label", "good")
            if not isinstance(label, str):
                raise ArgsError([("label", f"must be a string, got {label!r}")])
            return cls(label=label)

    def __init__(self, args: Args, handle: Any) -> None:
        self.label = args.label

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None if node.labels.get(self.label) else Status.unresolvable(f"node(s) lack label {self.label}")


class _Reserve:
    name = "GoodFactory"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        pass


GOOD_FACTORY = PluginFactory(name="GoodFactory", factory=_Reserve)

NOT_A_PLUGIN = 42


class Nameless:
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None


class NoPoints:
    name = "NoPoints"


class BadArgs:
    name = "BadArgs"

    class Args:
        pass

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None
