"""Hostile input: arbitrary JSON values, and JSON shaped like what each parser expects with
any part replaced by something else."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.text(max_size=20), st.sampled_from(["", "*", "-1", "1e999999999", "0x10", "\x00", "é"]))
KEYS = st.one_of(st.text(max_size=12), st.sampled_from([
    "apiVersion", "kind", "metadata", "name", "namespace", "spec", "status", "plugins", "enabled", "disabled",
    "weight", "pluginConfig", "args", "profiles", "schedulerName", "extenders", "queueSort", "multiPoint", "score",
    "filter", "bind", "matchLabels", "matchExpressions", "key", "operator", "values", "containers", "resources",
    "requests", "limits", "cpu", "memory", "nodeName", "labels", "clusters", "users", "contexts", "current-context",
    "cluster", "user", "server", "token", "leaderElection", "clientConnection", "qps", "burst", "urlPrefix",
]))


def json_values(max_leaves: int = 30) -> st.SearchStrategy[Any]:
    return st.recursive(SCALARS, lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=5)), max_leaves=max_leaves)


def mutated(value: Any) -> st.SearchStrategy[Any]:
    """`value` with one part (at any depth) replaced by an arbitrary JSON value."""
    paths = list(_paths(value))

    @st.composite
    def mutate(draw: st.DrawFn) -> Any:
        path = draw(st.sampled_from(paths))
        replacement = draw(json_values(10))
        return _replace(value, path, replacement)
    return mutate()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Any:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


def _replace(value: Any, path: tuple[Any, ...], replacement: Any) -> Any:
    if not path:
        return replacement
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], tuple(rest), replacement)}
    copy = list(value)
    copy[head] = _replace(value[head], tuple(rest), replacement)
    return copy
