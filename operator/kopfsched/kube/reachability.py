"""kopf's API requests while the API server cannot be reached: retried without end, one line each.

kopf retries a failed request 8 times (`networking.error_backoffs`, about 54 s), logging each
attempt with aiohttp's whole exception repr, then raises: from its API discovery, that ends its
resource observer and, with it, the whole operator (tracebacks, then a process that stops or
lingers without watching anything). kube-scheduler instead keeps retrying while the API server
is away: its informers log one line per failed list or watch and back off, /readyz says
not ready, and scheduling starts once the server answers.

`install()` wraps kopf's `request` (every kopf call to the API goes through it) for operators
whose settings carry an `ApiReachability`: each attempt is one kopf attempt, and
- when the server cannot be reached (connection refused or reset, DNS failure, connect or read
  timeout), the request is retried for ever, backing off 1, 2, 4… s up to `max_backoff`;
- an HTTP error kopf retries (5xx, 403, 429) is retried on kopf's own schedule, Retry-After
  honoured, then raised as before (kube.watches then backs off and relists) — except for API
  discovery (`/api`, `/apis`, a group version), which kopf's resource observer cannot survive
  failing, so it is retried for ever too, as kube-scheduler's discovery is;
and each failure is one line, at most one per back-off period for the same cause, however many
requests (one per watched kind) fail at once: "cannot reach the API server at
http://127.0.0.1:1: connection refused; retrying in 8s". The operator's /readyz answers 503 with
that cause while requests fail that way.
"""

from __future__ import annotations

import asyncio
import collections.abc
import errno
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp

from kopfsched.kube import kopf_internals
from kopfsched.kube.ratelimit import retry_after_seconds

logger = logging.getLogger(__name__)

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 30.0

_RETRIED_STATUS_ERRORS = (kopf_internals.APIServerError, kopf_internals.APIForbiddenError,
                          kopf_internals.APITooManyRequestsError)
_UNREACHABLE_ERRORS = (aiohttp.ClientConnectionError, TimeoutError)
_DISCOVERY = re.compile(r"/version|/api(/[^/?]+)?|/apis(/[^/?]+(/[^/?]+)?)?")
"""Discovery paths (relative to the server): `/api/v1/nodes` or `/apis/g/v/plural` are not."""


def is_discovery(url: str) -> bool:
    return _DISCOVERY.fullmatch(url.split("?", 1)[0].rstrip("/")) is not None


class ApiReachability:
    """Can the API server be reached? Updated by the wrapped requests in kopf's thread, read by
    the operator's probes in the scheduler's (each update is an attribute store: no lock)."""

    def __init__(self, server: str = "", *, max_backoff: float = MAX_BACKOFF,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        """The API server's URL, as the kubeconfig has it (for messages)."""
        self.max_backoff = max(max_backoff, 0.01)
        self._clock = clock
        self.failing_since: float | None = None
        self.failures = 0
        self.last_error = ""
        self._logged: tuple[str, float] | None = None  # (cause, when the next line is due)

    @property
    def reachable(self) -> bool:
        return self.failing_since is None

    def problem(self) -> str | None:
        """Why the API server cannot be reached now (one line), or None."""
        since = self.failing_since  # read once: kopf's thread may reset it meanwhile
        if since is None:
            return None
        return (f"cannot reach the API server at {self.server or 'the kubeconfig'}: {self.last_error} "
                f"(for {self._clock() - since:.0f}s, {self.failures} failed requests)")

    def failed(self, cause: str, delay: float) -> None:
        now = self._clock()
        if self.failing_since is None:
            self.failing_since = now
        self.failures += 1
        self.last_error = cause
        if self._logged is None or self._logged[0] != cause or now >= self._logged[1]:
            self._logged = (cause, now + 0.9 * delay)  # the retries announced: not logged again
            logger.warning("cannot reach the API server at %s: %s; retrying in %s",
                           self.server or "the kubeconfig", cause, _seconds(delay))

    def succeeded(self) -> None:
        if self.failing_since is not None:
            logger.info("the API server at %s answers again (after %d failed requests in %.0fs)",
                        self.server or "the kubeconfig", self.failures, self._clock() - self.failing_since)
            self.failing_since, self.failures, self._logged = None, 0, None


def _seconds(delay: float) -> str:
    return f"{delay:.0f}s" if delay >= 1 else f"{delay:.1f}s"


def describe(error: BaseException) -> str:
    """A failed request's cause in a few words (no aiohttp ConnectionKey repr)."""
    if isinstance(error, kopf_internals.APIError):
        return describe_status_error(error)
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return "no answer in time (timeout)"
    cause: BaseException | None = error
    if isinstance(error, aiohttp.ClientConnectorError):
        cause = error.os_error
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, ConnectionResetError):
        return "connection reset"
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return f"TLS certificate not accepted: {error.certificate_error}"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    if isinstance(cause, OSError) and cause.errno is not None:
        text = cause.strerror or errno.errorcode.get(cause.errno, "")
        if text:
            return text[0].lower() + text[1:]
    text = " ".join(str(cause or error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def describe_status_error(error: kopf_internals.APIError) -> str:
    first = error.args[0] if error.args else None  # kopf's APIError holds (message, status payload)
    message = " ".join((first if isinstance(first, str) else "").split())
    return f"{error.status} {message}" if message else str(error.status)


class _WithoutAttemptLines(logging.LoggerAdapter):
    """kopf's logger for one single-attempt request, without its "Request attempt" lines (the
    wrapper logs each failure itself, shorter)."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return msg, kwargs

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(msg, str) and msg.startswith("Request attempt"):
            return
        self.logger.log(level, msg, *args, **kwargs)


_original_request = kopf_internals.original_request


def _retry_after(error: BaseException) -> float | None:
    """The Retry-After of a kopf API error, read as our own client reads it (client-go's
    checkWait: 429 and 5xx, whole seconds)."""
    if not isinstance(error, kopf_internals.APIError):
        return None
    return retry_after_seconds(error.status, error.headers)


async def _request(method: str, url: str, *, settings: Any, logger: Any,
                   backoffs: float | Iterable[float] | None = None, **kwargs: Any) -> Any:
    """kopf's `request`, retried as the module's docstring says (kopf's own for other operators)."""
    state = getattr(settings, "api_reachability", None)
    if not isinstance(state, ApiReachability):
        return await _original_request(method, url, settings=settings, logger=logger, backoffs=backoffs, **kwargs)
    schedule = backoffs if backoffs is not None else settings.networking.error_backoffs
    status_delays = iter(schedule if isinstance(schedule, collections.abc.Iterable) else [schedule])
    quiet = _WithoutAttemptLines(logger, {})
    delay = INITIAL_BACKOFF
    while True:
        try:
            response = await _original_request(method, url, settings=settings, logger=quiet, backoffs=(), **kwargs)
        except _UNREACHABLE_ERRORS as exc:
            wait = min(delay, state.max_backoff)
            state.failed(describe(exc), wait)
            delay = min(delay * 2, state.max_backoff)
            await asyncio.sleep(wait)
            continue
        except _RETRIED_STATUS_ERRORS as exc:
            state.succeeded()  # it answered
            if is_discovery(url):
                backoff = min(delay, state.max_backoff)
                delay = min(delay * 2, state.max_backoff)
            else:
                scheduled = next(status_delays, None)
                if scheduled is None:
                    raise
                backoff = float(scheduled)
            retry_after = _retry_after(exc)
            if retry_after is not None and (settings.networking.enforce_retry_after or retry_after > backoff):
                backoff = retry_after
            _request_logger.warning("%s %s: the API server answered %s; retrying in %s", method.upper(), url,
                                    describe_status_error(exc), _seconds(backoff))
            await asyncio.sleep(backoff)
            continue
        state.succeeded()
        return response


_request_logger = logger


def install() -> None:
    """Route kopf's API requests through `_request` (idempotent)."""
    kopf_internals.install_request(_request)


__all__ = ["ApiReachability", "describe", "install"]
