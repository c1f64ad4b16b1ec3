"""The one timing helper of the runtime: upstream's framework_extension_point_duration_seconds,
measured around each `Framework.run_*` method and reported to the profile's observer."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from time import perf_counter
from typing import Any, TypeVar, cast

from kopfsched.framework.status import Status

Observer = Callable[[str, str, float], None]
"""(extension point, status code name, seconds) — e.g. the extension-point duration histogram."""


def ignore(point: str, code: str, seconds: float) -> None:
    pass


def _code_name(status: Status | None) -> str:
    return "Success" if status is None else status.code.upstream_name


F = TypeVar("F", bound=Callable[..., Any])


def _same(result: Any) -> Status | None:
    return cast("Status | None", result)


def no_status(result: object) -> None:
    """Points whose result carries no status (Filter reports per node): observed as Success."""
    return None


def timed(point: str, status_of: Callable[[Any], Status | None] | None = None) -> Callable[[F], F]:
    """Time a `run_*` method of Framework and report (point, result code, seconds) to its
    observer: upstream's framework_extension_point_duration_seconds. `status_of` finds the
    status in the result (None: the result is the status)."""
    def wrap(run: F) -> F:
        if status_of is None and not inspect.iscoroutinefunction(run):
            # The result is the status: the commonest case, with no call to find it.
            @functools.wraps(run)
            def timed_status(self: Any, *args: Any, **kwargs: Any) -> Any:
                start = perf_counter()
                result = run(self, *args, **kwargs)
                self.observe(point, "Success" if result is None else result.code.upstream_name,
                             perf_counter() - start)
                return result
            return cast(F, timed_status)
        find = _same if status_of is None else status_of
        if inspect.iscoroutinefunction(run):
            @functools.wraps(run)
            async def timed_async(self: Any, *args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                result = await run(self, *args, **kwargs)
                self.observe(point, _code_name(find(result)), time.perf_counter() - start)
                return result
            return cast(F, timed_async)

        @functools.wraps(run)
        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            start = perf_counter()
            result = run(self, *args, **kwargs)
            self.observe(point, _code_name(find(result)), perf_counter() - start)
            return result
        return cast(F, timed)
    return wrap
