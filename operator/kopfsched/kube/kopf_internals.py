"""Every use of kopf's private modules, in one place (kopf's public API is used everywhere else).

The scheduler needs three things kopf's public API does not offer: its watch streams relayed
straight to our feed with client-go's error handling (kube/watches.py), its discovery telling
us which resources are served (kube/watches.py), and its API requests retried as client-go
retries them while the server is unreachable (kube/reachability.py). kopf exposes no hook for
any of them, so the kube layer replaces four functions in kopf's modules (`install_*` below)
and reads a few of its classes. Nothing else of ours imports `kopf._cogs` or `kopf._core`.

`SYMBOLS` lists each private symbol we rely on with what we rely on (its parameters, its
members); `check()` answers one problem line per symbol a kopf release changed, and
tests/kube/test_kopf_internals.py turns each into a failing test naming the symbol. kopf is
pinned below the next minor version (pyproject.toml) for the same reason; raise the pin once
those tests pass on the new release.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kopf._cogs.clients import api as _api
from kopf._cogs.clients import errors as _errors
from kopf._cogs.clients import scanning as _scanning
from kopf._cogs.clients import watching as _watching

APIError = _errors.APIError
"""A request kopf made failed with an HTTP status (`.status`, `.headers`, args: message, payload)."""
APIServerError = _errors.APIServerError
APIForbiddenError = _errors.APIForbiddenError
APITooManyRequestsError = _errors.APITooManyRequestsError
WatchingError = _watching.WatchingError
"""A watch stream carried an ERROR event other than 410 Gone."""
LISTED = _watching.Bookmark.LISTED
"""What `continuous_watch` yields once the initial listing is over."""
REACTOR_LOGGER = "kopf._core.reactor.running"
"""The logger of kopf's task orchestration (its 'OS signals are ignored' warning)."""

original_continuous_watch = _watching.continuous_watch
"""kopf's list-then-watch of one resource, as kopf shipped it (before `install_continuous_watch`)."""
original_scan_resources = _scanning.scan_resources
"""kopf's API discovery, as kopf shipped it."""
original_request = _api.request
"""kopf's HTTP request with its own retries, as kopf shipped it."""
original_get = _api.get
"""kopf's GET decoding JSON (its LISTs and discovery), as kopf shipped it."""


def install_continuous_watch(replacement: Callable[..., Any]) -> None:
    """kopf's `infinite_watch` calls `continuous_watch` through its module's globals."""
    if _watching.continuous_watch is not replacement:
        _watching.continuous_watch = replacement


def install_scan_resources(replacement: Callable[..., Any]) -> None:
    if _scanning.scan_resources is not replacement:
        _scanning.scan_resources = replacement


def install_request(replacement: Callable[..., Any]) -> None:
    if _api.request is not replacement:
        _api.request = replacement


def install_get(replacement: Callable[..., Any]) -> None:
    if _api.get is not replacement:
        _api.get = replacement


def install_json(replacement: types.SimpleNamespace, *, instead_of: types.ModuleType) -> None:
    """The `json` module kopf's HTTP module decodes watch lines and responses with."""
    if getattr(_api, "json", None) is instead_of:
        _api.json = replacement  # type: ignore[assignment]


async def request(**kwargs: Any) -> Any:
    """kopf's request as installed now (retried by kube/reachability.py when it is installed)."""
    return await _api.request(**kwargs)


@dataclass(frozen=True, slots=True)
class Symbol:
    """A private kopf symbol and what we rely on of it."""

    module: types.ModuleType
    name: str
    parameters: tuple[str, ...] | None = None
    """Keyword parameters we pass (a function), or None."""
    members: tuple[str, ...] = ()
    """Attributes we read (a class or an enum)."""

    @property
    def path(self) -> str:
        return f"{self.module.__name__}.{self.name}"

    def problem(self) -> str | None:
        """Why kopf's current symbol no longer is what we rely on; None when it is."""
        found = getattr(self.module, self.name, None)
        if found is None:
            return f"{self.path}: gone from kopf"
        if self.parameters is not None:
            function = {
                "continuous_watch": original_continuous_watch, "scan_resources": original_scan_resources,
                "request": original_request, "get": original_get,
            }.get(self.name, found)
            params = inspect.signature(function).parameters
            missing = [p for p in self.parameters if p not in params]
            if missing:
                return f"{self.path}: no parameter {', '.join(missing)} (has {', '.join(params)})"
        missing = [m for m in self.members if not hasattr(found, m)]
        if missing:
            return f"{self.path}: no {', '.join(missing)}"
        return None


SYMBOLS = (
    Symbol(_watching, "continuous_watch", ("settings", "resource", "namespace", "operator_pause_waiter")),
    Symbol(_watching, "Bookmark", members=("LISTED",)),
    Symbol(_watching, "WatchingError"),
    Symbol(_scanning, "scan_resources", ("settings", "logger", "groups")),
    Symbol(_api, "request", ("method", "url", "settings", "logger", "backoffs", "payload", "headers", "timeout")),
    Symbol(_api, "get", ("url", "settings", "payload", "headers", "timeout", "logger")),
    Symbol(_api, "json"),
    Symbol(_errors, "APIError", members=("status", "headers")),
    Symbol(_errors, "APIServerError"),
    Symbol(_errors, "APIForbiddenError"),
    Symbol(_errors, "APITooManyRequestsError"),
)


def check() -> list[str]:
    """One line per private kopf symbol that is no longer what we rely on."""
    return [problem for symbol in SYMBOLS if (problem := symbol.problem()) is not None]
