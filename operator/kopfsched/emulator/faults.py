"""The test hooks (safe to call from any thread): injected request failures and throttling
(429 with Retry-After), compaction, dropped or failing watches, objects that vanish while
watches are away, grace periods ended on demand, and the mutation log for assertions."""

from __future__ import annotations

import dataclasses
import re
import time

import attrs

from kopfsched.emulator.list_watch import _WatchError, _WatchFailure
from kopfsched.emulator.store import _BOOKMARK, _DROP, _REASONS, ApiError, Mutation, StoreKey, status_object
from kopfsched.emulator.verbs import EmulatorWrites


@dataclasses.dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    message: str
    retry_after: int | None = None


@dataclasses.dataclass(frozen=True)
class _Throttle:
    """API Priority and Fairness rejecting matching requests until `until` (time.monotonic())."""

    method: str
    pattern: re.Pattern[str]
    until: float
    retry_after: int


@attrs.define(kw_only=True, slots=False)
class EmulatorFaults(EmulatorWrites):
    """The test hooks (safe to call from any thread): injected request failures and throttling"""

    def fail_next(self, method: str, path_regex: str, *, status: int = 500, times: int = 1, message: str = '',
                  retry_after: int | None = None) -> None:
        """Answer the next `times` requests whose method and path (with query) match with `status`
        (with a Retry-After header when `retry_after` is given).

        `method` is an HTTP method or '*'; `path_regex` is searched in e.g. '/api/v1/pods?watch=true'.
        """
        failure = _Failure(method.upper(), re.compile(path_regex), status, times, message or 'injected failure',
                           retry_after)
        with self._guard:
            self._failures.append(failure)

    def throttle(self, seconds: float, *, method: str = '*', path_regex: str = '', retry_after: int = 1) -> None:
        """For `seconds` from now, answer every matching request as API Priority and Fairness does
        when the request's priority level is saturated: 429, `Retry-After: retry_after`, a text body."""
        throttle = _Throttle(method.upper(), re.compile(path_regex), time.monotonic() + seconds, retry_after)
        with self._guard:
            self._throttles.append(throttle)

    def compact(self, *, on_next_continue: int = 0) -> None:
        """Compact as etcd does: every paged list in progress expires (its next continue answers 410
        Expired); with `on_next_continue`, that happens right before each of the next N continues."""
        def run() -> None:
            if on_next_continue:
                self._compact_on_continue += on_next_continue
            else:
                self._list_snapshots.clear()
        self._in_loop(run)

    def end_grace_periods(self) -> None:
        """Delete every pod in its grace period now (DELETED events), as kubelets confirming it would."""
        self._in_loop(self._end_grace_periods)

    def _end_grace_periods(self) -> None:
        for key, uid in list(self._terminating.items()):
            self._finish_termination(key, uid)

    def drop_watches(self) -> None:
        """Close every open watch stream cleanly, as an API server restart would."""
        self._in_loop(self._drop_watches)

    def remove_unseen(self, plural: str, namespace: str | None, name: str, *, group: str = '') -> None:
        """Remove an object without a DELETED event, leaving histories and watches as they are:
        gone while a watch was away, not noticed yet (a relist or a reconcile must notice)."""
        def remove() -> None:
            self._store[group, plural].pop((namespace, name), None)
        self._in_loop(remove)

    def vanish_while_watches_are_away(self, *objects: tuple[str, str | None, str], group: str = '') -> None:
        """Remove (plural, namespace, name) objects without DELETED events, compact every
        history to now and end every watch: a watcher resuming gets 410 Gone and must relist,
        as after a long disconnection from a real API server (the relist lacks the objects)."""
        def vanish() -> None:
            for plural, namespace, name in objects:
                self._store[group, plural].pop((namespace, name), None)
            # The removal is a write: a watcher that saw everything before it is behind it too,
            # so resuming from its last resourceVersion must expire, not look up to date.
            self._rv += 1
            for key, history in self._history.items():
                history.clear()
                self._compacted_rv[key] = self._rv
            self._drop_watches()
        self._in_loop(vanish)

    def send_bookmarks(self) -> None:
        """Send a BOOKMARK now on every open watch that allowed bookmarks."""
        self._in_loop(lambda: self._broadcast(_BOOKMARK))

    def watch_error(self, plural: str, *, group: str = '', code: int = 500, message: str = '',
                    times: int | None = 0) -> None:
        """Send an ERROR event with a `code` Status into every open watch of the resource, then close
        it, as the API server does when its watch cache or etcd fails (e.g. 500 InternalError); the
        next `times` watches of it (None: every one until `heal_watches()`) get the same right away."""
        status = status_object(code, message or f'injected watch error {code}',
                               reason=_REASONS.get(code, 'InternalError'))
        self._in_loop(lambda: self._watch_error((group, plural), _WatchError(status), times))

    def heal_watches(self) -> None:
        """New watches succeed again after `watch_error(times=...)`."""
        self._in_loop(self._watch_failures.clear)

    def mutations(self, method: str | None = None, path_regex: str | None = None) -> list[Mutation]:
        """The most recent mutating requests (bounded), oldest first, optionally filtered."""
        with self._guard:
            logged = list(self._mutations)
        pattern = re.compile(path_regex) if path_regex else None
        return [m for m in logged
                if (method is None or m.method == method.upper()) and (pattern is None or pattern.search(m.path))]

    def _drop_watches(self) -> None:
        self._broadcast(_DROP)

    def _watch_error(self, key: StoreKey, error: _WatchError, times: int | None) -> None:
        if key not in self._watchers:
            raise ApiError(404, f'no resource {key[1]} in group {key[0]!r}')
        if times is None or times > 0:
            self._watch_failures[key] = _WatchFailure(error, times)
        for queue in self._watchers[key]:
            queue.put_nowait(error)

    def _take_failure(self, method: str, path_qs: str) -> _Failure | None:
        if not self._failures:
            return None
        with self._guard:
            for failure in self._failures:
                if failure.method in ('*', method) and failure.pattern.search(path_qs):
                    failure.times -= 1
                    if failure.times <= 0:
                        self._failures.remove(failure)
                    return failure
        return None

    def _throttled(self, method: str, path_qs: str) -> _Throttle | None:
        if not self._throttles or path_qs.startswith('/_emulator/'):
            return None
        now = time.monotonic()
        with self._guard:
            self._throttles = [t for t in self._throttles if t.until > now]
            return next((t for t in self._throttles if t.method in ('*', method) and t.pattern.search(path_qs)), None)
