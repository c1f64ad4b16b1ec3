"""kopf's watch streams: our resources' events relayed straight to the feed, and errors handled
as client-go's reflector handles them.

**Relay.** kopf's `infinite_watch` calls `continuous_watch` (one LIST, page by page, then watches
from the list's resourceVersion until an error) through its module's globals; `install()` wraps that
one function. For the resources of a `WatchSink` (every kind the scheduler watches), the wrapper hands
each listed object and watch event to the sink and gives kopf only the end-of-listing mark: kopf still
discovers the resources, lists and watches them, follows resourceVersions, reconnects and retries its
requests, but its per-object machinery (a queue and a worker task per object, cause detection, handler
invocation, costing more per event than the scheduler's own work per pod) never runs for them.
The sink also learns where each listing starts and ends (`listing`, `listed`): that is the informer's
"synced" signal and the relist reconcile, so no kind is listed twice at start-up, nor after a relist.
Which of our resources the API serves comes from kopf's own discovery (`served`, from its first
`scan_resources`), so readiness waits for exactly the kinds kopf watches. kopf's CRD watch (its
resource observer) passes through untouched.

**Errors.** A real API server ends a watch with an ERROR event: 410 Expired when the resourceVersion is
compacted, and other Status codes too (500 from the watch cache or etcd, 429, 503...). kopf 1.45
restarts its list+watch on 410 only: any other ERROR event raises WatchingError out of
`continuous_watch`, which kills that resource's watcher task, then kopf's orchestrator, then the
whole operator — or leaves its thread stuck in shutdown. Likewise a list or watch request that still
fails after kopf's own retries (`networking.error_backoffs`, ~54 s) raises an APIError.
client-go's reflector treats both as the end of one ListAndWatch: it backs off (800 ms doubling to
30 s, jittered up to twice that, reset after 2 minutes without a failure) and lists and watches
again; so does the wrapper, which keeps kopf's watcher, orchestrator and thread alive. A paged list
whose continue token expired (410 before the listing ended) is listed again at once without paging,
as client-go's pager does (FullListIfExpired). The wrapper applies only to operators whose settings
are `KopfschedSettings` with a `WatchHealth`; any other kopf in the process keeps kopf's behaviour.

**Decoding.** kopf's stream decodes each watch line with the standard library's `json.loads`:
most of kopf's thread's CPU while pods are bound (a real API server sends every object with
its managedFields), and aiohttp's `json()` decodes kopf's LIST pages with it too (most of kopf's
thread at start-up). `install()` gives kopf's HTTP module orjson's `loads` for both,
which reads the same JSON into the same dicts faster (docs/performance.md); what orjson refuses (NaN, a lone
surrogate) is read by `json.loads` as before. (orjson reads an integer beyond 64 bits as a float;
an API server never sends one: it keeps JSON numbers as int64 or float64.)

`WatchHealth` also records, per resource, whether its list+watch works, so /healthz can fail when
a watch is really gone (failing for longer than `down_after`, or stopped by kopf while we did not
ask it to stop) instead of answering 200 while no event ever arrives again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import random
import time
import types
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any, Protocol, cast

import kopf
import orjson
from kopf._cogs.clients import api as kopf_api
from kopf._cogs.clients import errors as kopf_errors
from kopf._cogs.clients import scanning as kopf_scanning
from kopf._cogs.clients import watching as kopf_watching

logger = logging.getLogger(__name__)

# client-go's reflector: wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0, clock).
INITIAL_BACKOFF = 0.8
MAX_BACKOFF = 30.0
BACKOFF_RESET_AFTER = 120.0
DOWN_AFTER = 60.0
"""/healthz fails once a watch has been failing for this long without recovering."""
SETTLE = 10.0
"""A watch that has stayed open this long since its last failure counts as working again."""
WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


class Backoff:
    """client-go's exponential backoff manager: each delay doubles up to `cap` and is jittered
    up to twice itself; after `reset_after` seconds without a back-off it starts over."""

    def __init__(self, *, initial: float = INITIAL_BACKOFF, cap: float = MAX_BACKOFF,
                 reset_after: float = BACKOFF_RESET_AFTER, clock: Callable[[], float] = time.monotonic,
                 jitter: Callable[[], float] = random.random) -> None:
        self.initial, self.cap, self.reset_after = initial, cap, reset_after
        self._clock, self._jitter = clock, jitter
        self._next = initial
        self._last: float | None = None

    def next(self) -> float:
        now = self._clock()
        if self._last is None or now - self._last > self.reset_after:
            self._next = self.initial
        self._last = now
        delay = self._next
        self._next = min(self._next * 2.0, self.cap)
        return delay + delay * self._jitter()


@dataclasses.dataclass(slots=True)
class _WatchState:
    backoff: Backoff
    failing_since: float | None = None
    last_failure: float | None = None
    last_error: str = ""
    started: float | None = None  # when the current list succeeded and its watch began
    stopped: bool = False
    failures: int = 0


class WatchHealth:
    """Per watched resource: does its list+watch work? Fed by the wrapped `continuous_watch`
    in kopf's thread, read by the operator's health check in the scheduler's: every update is
    one attribute store, so no lock is needed."""

    def __init__(self, *, down_after: float = DOWN_AFTER, settle: float = SETTLE,
                 initial_backoff: float = INITIAL_BACKOFF, max_backoff: float = MAX_BACKOFF,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.down_after, self.settle = down_after, settle
        self.initial_backoff, self.max_backoff = initial_backoff, max_backoff
        self._clock = clock
        self._states: dict[str, _WatchState] = {}

    def _state(self, resource: str) -> _WatchState:
        state = self._states.get(resource)
        if state is None:
            backoff = Backoff(initial=self.initial_backoff, cap=self.max_backoff, clock=self._clock)
            state = self._states[resource] = _WatchState(backoff=backoff)
        return state

    def listed(self, resource: str) -> None:
        """The list succeeded; its watch starts now."""
        state = self._state(resource)
        state.started, state.stopped = self._clock(), False

    def event(self, resource: str) -> None:
        """A watch event arrived: the watch works."""
        state = self._states.get(resource)
        if state is not None and state.failing_since is not None:
            logger.info("watch of %s works again after %d failure(s)", resource, state.failures)
            state.failing_since, state.failures = None, 0

    def failed(self, resource: str, error: BaseException) -> float:
        """The list or watch failed: record it; the seconds to back off before listing again."""
        state = self._state(resource)
        now = self._clock()
        if state.failing_since is None:
            state.failing_since = now
        state.last_failure, state.last_error, state.started = now, _describe(error), None
        state.failures += 1
        return state.backoff.next()

    def stopped(self, resource: str) -> None:
        """kopf cancelled the watch (its shutdown, or the resource is no longer served)."""
        state = self._state(resource)
        state.stopped, state.started, state.failing_since = True, None, None

    def stopped_of(self, resources: tuple[str, ...]) -> list[str]:
        """Which of `resources` kopf stopped watching."""
        return [name for name in resources if (state := self._states.get(name)) is not None and state.stopped]

    def problems(self, *, required: tuple[str, ...] = ()) -> list[str]:
        """What is wrong with the watches now, one line each: those failing for longer than
        `down_after`, and those of `required` that kopf stopped."""
        now = self._clock()
        found = [f"the watch of {name} was stopped" for name in self.stopped_of(required)]
        for resource, state in sorted(self._states.items()):
            if state.failing_since is None or now - state.failing_since <= self.down_after:
                continue
            if state.started is not None and now - state.started >= self.settle:
                continue  # open without a failure for a while: a quiet watch, not a broken one
            found.append(f"the watch of {resource} has failed for {now - state.failing_since:.0f}s "
                         f"({state.failures} times; last: {state.last_error})")
        return found


class WatchSink(Protocol):
    """Where the wrapped `continuous_watch` hands our resources' listings and events. Called in
    kopf's thread, in the order kopf reads them (one resource's calls never interleave with
    another listing of the same resource)."""

    def kind_of(self, resource: str) -> str | None:
        """The kind of a resource (`resource_key`), or None when it is not ours."""

    def served(self, kinds: Collection[str]) -> None:
        """kopf's discovery found these of our kinds served by the API (first scan, then each rescan)."""

    def listing(self, kind: str) -> None:
        """A LIST of `kind` starts (the first, or a relist after an error or 410 Gone)."""

    def event(self, kind: str, type: str | None, obj: dict[str, Any]) -> None:
        """A listed object (type None) or a watch event (ADDED, MODIFIED, DELETED)."""

    def listed(self, kind: str) -> None:
        """The LIST is complete: every object it holds was handed over; watching follows."""

    def stopped(self, kind: str) -> None:
        """kopf stopped watching `kind` (its shutdown, or the resource is no longer served)."""


@dataclasses.dataclass
class KopfschedSettings(kopf.OperatorSettings):
    """kopf's settings plus where our wrapped `continuous_watch` reports."""

    watch_health: WatchHealth | None = None
    watch_sink: WatchSink | None = None


def resource_name(resource: Any) -> str:
    group = getattr(resource, "group", "")
    return f"{resource.plural}.{group}" if group else resource.plural


def resource_key(resource: Any) -> str:
    """`v1/pods`, `storage.k8s.io/v1/storageclasses`: a served resource, version included."""
    group = getattr(resource, "group", "")
    return f"{group}/{resource.version}/{resource.plural}" if group else f"{resource.version}/{resource.plural}"


_original_continuous_watch = kopf_watching.continuous_watch
_original_scan_resources = kopf_scanning.scan_resources


async def _scan_resources(*, settings: kopf.OperatorSettings, logger: Any,
                          groups: Collection[str] | None = None) -> Collection[Any]:
    """kopf's discovery, telling the sink which of our resources the API serves."""
    resources = await _original_scan_resources(settings=settings, logger=logger, groups=groups)
    sink = getattr(settings, "watch_sink", None)
    if sink is not None:
        sink.served([kind for resource in resources if (kind := sink.kind_of(resource_key(resource)))])
    return resources


async def _continuous_watch(*, settings: kopf.OperatorSettings, resource: Any, namespace: Any,
                            operator_pause_waiter: Any) -> AsyncIterator[Any]:
    """kopf's continuous_watch (one list, then watches until an error): our resources' events to
    the sink, and a back-off instead of an exception when the stream carries an ERROR other than
    410 or a request fails."""
    health = getattr(settings, "watch_health", None)
    if not isinstance(health, WatchHealth):
        async for item in _original_continuous_watch(settings=settings, resource=resource, namespace=namespace,
                                                     operator_pause_waiter=operator_pause_waiter):
            yield item
        return
    sink: WatchSink | None = getattr(settings, "watch_sink", None)
    kind = sink.kind_of(resource_key(resource)) if sink is not None else None
    name = resource_name(resource)
    finished = False
    try:
        while True:
            listing = True
            if sink is not None and kind is not None:
                sink.listing(kind)
            stream = _original_continuous_watch(settings=settings, resource=resource, namespace=namespace,
                                                operator_pause_waiter=operator_pause_waiter)
            try:
                async for item in stream:
                    if item is kopf_watching.Bookmark.LISTED:
                        listing = False
                        health.listed(name)
                        if sink is not None and kind is not None:
                            sink.listed(kind)
                        yield item
                    elif sink is not None and kind is not None:
                        if item.get("type") != "BOOKMARK":
                            sink.event(kind, item.get("type"), cast(dict[str, Any], item["object"]))
                        if listing:
                            continue
                        health.event(name)
                    else:
                        if isinstance(item, dict) and item.get("type") in WATCH_EVENT_TYPES:
                            health.event(name)
                        yield item
            except kopf_errors.APIError as exc:
                if not (listing and exc.status == 410 and settings.watching.chunk_size):
                    raise
                logger.info("listing %s: the continue token expired; listing it all again without paging", name)
                settings = _unpaged(settings)
                continue
            break
        finished = True
    except (kopf_watching.WatchingError, kopf_errors.APIError) as exc:
        delay = health.failed(name, exc)
        logger.warning("list+watch of %s failed: %s; listing again in %.1fs", name, _describe(exc), delay)
        await asyncio.sleep(delay)
        finished = True  # kopf's infinite_watch lists and watches again
    finally:
        if not finished:  # cancelled or closed: kopf stopped this watch
            health.stopped(name)
            if sink is not None and kind is not None:
                sink.stopped(kind)


def _unpaged(settings: kopf.OperatorSettings) -> kopf.OperatorSettings:
    """The same settings, listing in one request (for one list+watch: kopf's next relist pages again)."""
    return dataclasses.replace(settings, watching=dataclasses.replace(settings.watching, chunk_size=None))


def json_loads(text: str | bytes) -> Any:
    """orjson's loads, or json's for what orjson refuses (NaN, lone surrogates)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


_KOPF_JSON = types.SimpleNamespace(**{**{name: getattr(json, name) for name in json.__all__}, "loads": json_loads})
"""The `json` kopf's HTTP module sees: the standard library's, with a faster `loads`."""


async def _get(
    url: str,
    *,
    settings: kopf.OperatorSettings,
    payload: object | None = None,
    headers: dict[str, str] | None = None,
    timeout: Any = None,
    logger: Any,
) -> Any:
    """kopf's `api.get` (its LISTs and discovery), decoding the answer with `json_loads` and the
    cyclic GC paused. A LIST page is tens of thousands of new objects and no cycle: decoded with the
    GC on, the allocations alone set off collections that traverse the growing heap again and
    again, most of the start-up CPU once spent "in json" (docs/performance.md). Paused, the page is
    examined once, at the next collection, as young objects."""
    response = await kopf_api.request(
        method="get", url=url, payload=payload, headers=headers, timeout=timeout, settings=settings, logger=logger
    )
    async with response:
        body = await response.read()
    if not body.strip():
        return None
    collecting = gc.isenabled()
    gc.disable()
    try:
        return json_loads(body)
    finally:
        if collecting:
            gc.enable()


def install() -> None:
    """Route kopf's watch streams through `_continuous_watch`, its discovery through
    `_scan_resources`, and its JSON decoding (watch lines, LIST and discovery answers) through
    orjson (idempotent). kopf is pinned to a minor version (pyproject.toml): the e2e tests fail if
    a kopf upgrade moves these seams."""
    if kopf_watching.continuous_watch is not _continuous_watch:
        kopf_watching.continuous_watch = _continuous_watch
    if kopf_scanning.scan_resources is not _scan_resources:
        kopf_scanning.scan_resources = _scan_resources
    if getattr(kopf_api, "json", None) is json:
        kopf_api.json = _KOPF_JSON  # type: ignore[assignment]
    if kopf_api.get is not _get:
        kopf_api.get = _get


def _describe(error: BaseException) -> str:
    if isinstance(error, kopf_watching.WatchingError):
        return str(error)
    if isinstance(error, kopf_errors.APIError):
        return f"{error.status} {' '.join(str(error).split())}"
    return f"{type(error).__name__}: {error}"
