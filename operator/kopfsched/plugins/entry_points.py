"""Out-of-tree plugins: what installed packages register under the `kopfsched.plugins`
entry-point group.

The entry point's name is the plugin's name, as profiles write it; its object is either

- a `PluginFactory` (the same declaration an in-tree plugin module exports as `PLUGIN`), or
- a plugin class with a `name` class attribute, built as `cls(args, handle)`, whose args
  dataclass (if any) is its nested `Args` class with a `from_dict` classmethod.

Installing the package is all it takes: nothing here reads a module path from a profile,
so whoever can edit a SchedulerProfile can only choose among plugins an administrator
installed. Entry points are imported lazily, when a profile first enables the plugin.
Whatever goes wrong becomes one line, never a traceback: a clash with a built-in plugin
or between two packages lands in `Registry.problems` at discovery; an entry point that
fails to import, or loads something that is not a plugin, raises `PluginLoadError` on
lookup, which config validation reports against the profile that names it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from kopfsched.framework.interface import implemented_points
from kopfsched.framework.registry import PluginFactory, PluginLoadError, Registry

ENTRY_POINT_GROUP = "kopfsched.plugins"


def installed_entry_points() -> list[EntryPoint]:
    """Every entry point of the group, across installed distributions."""
    return list(entry_points(group=ENTRY_POINT_GROUP))


def add_installed_plugins(registry: Registry, *, installed: Iterable[EntryPoint] | None = None) -> None:
    """Register every installed plugin lazily; built-in plugins win any name clash."""
    by_name: dict[str, list[EntryPoint]] = {}
    for entry_point in installed_entry_points() if installed is None else installed:
        same = by_name.setdefault(entry_point.name, [])
        if not any(_origin(e) == _origin(entry_point) for e in same):
            same.append(entry_point)
    for name, found in by_name.items():
        where = "; ".join(describe(e) for e in found)
        if name in registry:
            registry.problems.append(
                f'installed plugin "{name}" ({where}) is ignored: a built-in plugin has that name')
        elif len(found) > 1:
            reason = f'plugin "{name}" is installed by more than one package ({where}); uninstall all but one'
            registry.problems.append(reason)
            registry.register_lazy(name, _broken(reason))
        else:
            registry.register_lazy(name, _loader(found[0]))


def describe(entry_point: EntryPoint) -> str:
    """`module:attr from package version`, to tell an administrator what to uninstall."""
    dist = getattr(entry_point, "dist", None)
    source = f" from {dist.name} {dist.version}" if dist is not None else ""
    return f"{entry_point.value}{source}"


def as_factory(name: str, obj: Any) -> PluginFactory:
    """The PluginFactory an entry point's object declares; PluginLoadError when it declares none."""
    if isinstance(obj, PluginFactory):
        factory = obj
    elif isinstance(obj, type) and isinstance(getattr(obj, "name", None), str):
        args_type = getattr(obj, "Args", None)
        if args_type is not None and not callable(getattr(args_type, "from_dict", None)):
            raise PluginLoadError(f'plugin "{name}": its Args class has no from_dict classmethod')
        factory = PluginFactory(name=getattr(obj, "name"), factory=obj, args_type=args_type)  # noqa: B009
    else:
        raise PluginLoadError(
            f'plugin "{name}": the entry point loads {_kind(obj)}, not a PluginFactory or a plugin class with a name')
    if factory.name != name:
        raise PluginLoadError(
            f'plugin "{name}": the entry point loads a plugin named "{factory.name}"; the names must match')
    plugin_type = factory.plugin_type
    if plugin_type is not None and not implemented_points(plugin_type):
        raise PluginLoadError(f'plugin "{name}": {plugin_type.__name__} implements no extension point')
    return factory


def _loader(entry_point: EntryPoint) -> Callable[[], PluginFactory]:
    failure: list[PluginLoadError] = []

    def load() -> PluginFactory:
        if failure:  # import once: a failed import would otherwise re-run module code on each lookup
            raise failure[0]
        try:
            try:
                obj = entry_point.load()
            except Exception as error:  # any import-time failure is the package's, reported in one line
                raise PluginLoadError(f'plugin "{entry_point.name}" ({describe(entry_point)}) cannot be loaded: '
                                      f"{type(error).__name__}: {error}") from error
            return as_factory(entry_point.name, obj)
        except PluginLoadError as error:
            failure.append(error)
            raise

    return load


def _broken(reason: str) -> Callable[[], PluginFactory]:
    def load() -> PluginFactory:
        raise PluginLoadError(reason)

    return load


def _origin(entry_point: EntryPoint) -> tuple[str, str]:
    dist = getattr(entry_point, "dist", None)
    return entry_point.value, dist.name if dist is not None else ""


def _kind(obj: Any) -> str:
    return f"a {type(obj).__name__}" if not isinstance(obj, type) else f"the class {obj.__name__} without a name"
