"""The one timing helper of the runtime: upstream's framework_extension_point_duration_seconds,
measured around each `Framework.run_*` method and reported to the profile's observer."""

from __future__ import annotations

import functools
import inspect
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


def no_status(result: object) -> None:
    """Points whose result carries no status (Filter reports per node): observed as Success."""
    return None


def timed(point: str, status_of: Callable[[Any], Status | None] | None = None) -> Callable[[F], F]:
    """Time a `run_*` method of Framework and report (point, result code, seconds) to its
    observer: upstream's framework_extension_point_duration_seconds. `status_of` finds the
    status in the result (None: the result is the status)."""
    def wrap(run: F) -> F:
        # One wrapper per kind of point, each with the code's lookup written out: they run
        # some ten times per pod, so a call less in each counts.
        if inspect.iscoroutinefunction(run):
            if status_of is None:
                @functools.wraps(run)
                async def timed_async_status(self: Any, *args: Any, **kwargs: Any) -> Any:
                    start = perf_counter()
                    result = await run(self, *args, **kwargs)
                    self.observe(point, "Success" if result is None else result.code.upstream_name,
                                 perf_counter() - start)
                    return result
                return cast(F, timed_async_status)

            @functools.wraps(run)
            async def timed_async(self: Any, *args: Any, **kwargs: Any) -> Any:
                start = perf_counter()
                result = await run(self, *args, **kwargs)
                self.observe(point, _code_name(status_of(result)), perf_counter() - start)
                return result
            return cast(F, timed_async)
        if status_of is None:
            # The result is the status: the commonest case, with no call to find it.
            @functools.wraps(run)
            def timed_status(self: Any, *args: Any, **kwargs: Any) -> Any:
                start = perf_counter()
                result = run(self, *args, **kwargs)
                self.observe(point, "Success" if result is None else result.code.upstream_name,
                             perf_counter() - start)
                return result
            return cast(F, timed_status)
        if status_of is no_status:
            @functools.wraps(run)
            def timed_success(self: Any, *args: Any, **kwargs: Any) -> Any:
                start = perf_counter()
                result = run(self, *args, **kwargs)
                self.observe(point, "Success", perf_counter() - start)
                return result
            return cast(F, timed_success)

        @functools.wraps(run)
        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            start = perf_counter()
            result = run(self, *args, **kwargs)
            status = status_of(result)
            self.observe(point, "Success" if status is None else status.code.upstream_name, perf_counter() - start)
            return result
        return cast(F, timed)
    return wrap
