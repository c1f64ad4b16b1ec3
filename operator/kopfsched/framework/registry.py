"""The plugin registry: plugin name → factory and args type.

A plugin module declares itself with one `PluginFactory`:

    PLUGIN = PluginFactory(name="NodeName", factory=NodeName)

A factory is called as `factory(args, handle)`. When the plugin has arguments, `args_type`
is a dataclass whose every field has upstream's default and whose classmethod
`from_dict(raw)` decodes the profile's `pluginConfig[].args`, raising `ArgsError` with
every problem; otherwise args is None.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kopfsched.framework.handle import Handle


class ArgsError(ValueError):
    """Invalid plugin arguments: (field path inside args, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]] | str) -> None:
        if isinstance(problems, str):
            problems = [("", problems)]
        self.problems = problems
        super().__init__("; ".join(f"{p}: {m}" if p else m for p, m in problems))


class CheckableArgs(Protocol):
    def problems(self) -> list[tuple[str, str]]: ...


A = TypeVar("A", bound=CheckableArgs)


def checked_args(args: A, decoding: list[tuple[str, str]] | None = None) -> A:
    """`args` once valid: raises ArgsError with the problems found while decoding them and
    those of their own `problems()` (upstream's Validate...Args)."""
    problems = [*(decoding or ()), *args.problems()]
    if problems:
        raise ArgsError(problems)
    return args


class PluginLoadError(Exception):
    """An installed plugin that cannot be used: its entry point fails to import, is not a
    plugin, or clashes with another. The message says which and why, in one line."""


@dataclass(frozen=True, slots=True)
class PluginFactory:
    name: str
    factory: Callable[[Any, Handle], Any]
    args_type: Any = None

    def decode_args(self, raw: Mapping[str, Any] | None) -> Any:
        """Decoded args (upstream defaults for what `raw` leaves out), or None for arg-less plugins."""
        if self.args_type is None:
            if raw:
                raise ArgsError(f"plugin {self.name} takes no args")
            return None
        if raw is None:
            return self.args_type()
        if not isinstance(raw, Mapping):
            raise ArgsError("args must be an object")
        return self.args_type.from_dict(raw)

    def new(self, args: Any, handle: Handle) -> Any:
        return self.factory(args, handle)

    @property
    def plugin_type(self) -> Any:
        """The plugin's class, for checking which extension points it implements."""
        return self.factory if isinstance(self.factory, type) else getattr(self.factory, "plugin_type", None)


class Registry:
    """Name → PluginFactory; rejects two plugins with one name.

    A lazy loader may raise `PluginLoadError`; `get` then raises it again on every call,
    so config validation can report the plugin as broken rather than unknown."""

    def __init__(self, factories: Mapping[str, PluginFactory] | None = None) -> None:
        self._factories: dict[str, PluginFactory] = {}
        self._lazy: dict[str, Callable[[], PluginFactory]] = {}
        self.problems: list[str] = []
        """Problems found while filling the registry (e.g. clashing installed plugins), one line
        each, for `kopfsched validate` and the operator to report; they never stop start-up."""
        for factory in (factories or {}).values():
            self.register(factory)

    def register(self, factory: PluginFactory) -> None:
        if factory.name in self:
            raise ValueError(f"a plugin named {factory.name!r} is already registered")
        self._factories[factory.name] = factory

    def register_lazy(self, name: str, load: Callable[[], PluginFactory]) -> None:
        """Register a plugin whose module is imported only when a profile uses it."""
        if name in self:
            raise ValueError(f"a plugin named {name!r} is already registered")
        self._lazy[name] = load

    def get(self, name: str) -> PluginFactory | None:
        factory = self._factories.get(name)
        if factory is None and name in self._lazy:
            # Keep the loader until it succeeds: a broken plugin stays broken, not unknown.
            factory = self._factories[name] = self._lazy[name]()
            del self._lazy[name]
        return factory

    def __contains__(self, name: object) -> bool:
        return name in self._factories or name in self._lazy

    def names(self) -> Iterator[str]:
        yield from self._factories
        yield from self._lazy

    def merged(self, other: Registry) -> Registry:
        merged = Registry()
        merged.problems = [*self.problems, *other.problems]
        for registry in (self, other):
            for name, factory in registry._factories.items():
                merged.register(factory) if name not in merged else merged._duplicate(name)
            for name, load in registry._lazy.items():
                merged.register_lazy(name, load) if name not in merged else merged._duplicate(name)
        return merged

    def overridden_by(self, other: Registry) -> Registry:
        """This registry with `other`'s plugins in place of those of the same name: a test's
        working copy of a plugin wins over the installed package of the same plugin."""
        merged = Registry()
        merged.problems = list(self.problems)
        for name, factory in self._factories.items():
            if name not in other:
                merged.register(factory)
        for name, load in self._lazy.items():
            if name not in other:
                merged.register_lazy(name, load)
        return merged.merged(other)

    @staticmethod
    def _duplicate(name: str) -> None:
        raise ValueError(f"a plugin named {name!r} is already registered")


def int_field(raw: Mapping[str, Any], key: str, default: int, problems: list[tuple[str, str]], *,
              minimum: int | None = None, maximum: int | None = None) -> int:
    """Read an integer arg, recording a problem (and returning the default) when it is bad."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append((key, f"must be an integer, got {value!r}"))
        return default
    if minimum is not None and value < minimum:
        problems.append((key, f"must be at least {minimum}, got {value}"))
    if maximum is not None and value > maximum:
        problems.append((key, f"must be at most {maximum}, got {value}"))
    return value


def check_known_fields(raw: Mapping[str, Any], known: set[str], problems: list[tuple[str, str]]) -> None:
    """Record unknown keys (upstream decodes args strictly)."""
    for key in raw:
        if key not in known and key not in ("apiVersion", "kind"):
            problems.append((key, "unknown field"))
