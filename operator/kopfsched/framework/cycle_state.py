"""CycleState: data plugins pass from one extension point to the next within one pod's cycle.

Keys are typed and namespaced by the plugin that owns them, so a read returns what was
written and two plugins cannot collide:

    PRE_FILTER_STATE = StateKey[FitState]("NodeResourcesFit", "preFilter")
    state.write(PRE_FILTER_STATE, FitState(...))
    fit = state.read(PRE_FILTER_STATE)   # -> FitState
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

T = TypeVar("T")

_NONE: frozenset[str] = frozenset()


class StateKey(Generic[T]):
    """A typed key in CycleState, owned by one plugin."""

    __slots__ = ("name", "plugin")

    def __init__(self, plugin: str, name: str) -> None:
        self.plugin = plugin
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.plugin}/{self.name})"


class StateNotFoundError(KeyError):
    """A plugin read a key nobody wrote in this cycle (a bug: its PreFilter did not run)."""


class CycleState:
    """Per-cycle storage; cloned for preemption's and nominated pods' dry runs."""

    __slots__ = ("_data", "parallel_pre_bind_plugins", "skip_filter_plugins", "skip_pre_bind_plugins",
                 "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[StateKey[Any], Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        self.skip_pre_bind_plugins: frozenset[str] = _NONE
        """PreBind plugins whose PreBindPreFlight said Skip: PreBind leaves them out."""
        self.parallel_pre_bind_plugins: frozenset[str] = _NONE
        """PreBind plugins whose PreBindPreFlight allowed them to run beside their neighbours."""

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key] = value

    def read(self, key: StateKey[T]) -> T:
        try:
            return self._data[key]
        except KeyError:
            raise StateNotFoundError(f"{key.plugin}: no {key.name!r} in the cycle state") from None

    def get(self, key: StateKey[T], default: T | None = None) -> T | None:
        return self._data.get(key, default)

    def delete(self, key: StateKey[Any]) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        """A copy whose values are cloned when they know how (`clone()`), else shared."""
        other = CycleState()
        other._data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self._data.items()}
        other.skip_filter_plugins = set(self.skip_filter_plugins)
        other.skip_score_plugins = set(self.skip_score_plugins)
        other.skip_pre_bind_plugins = self.skip_pre_bind_plugins
        other.parallel_pre_bind_plugins = self.parallel_pre_bind_plugins
        return other
