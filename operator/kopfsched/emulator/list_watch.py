"""Reads: GET, LIST with selectors and paging (continue tokens served at the first page's
revision until compacted, then 410 Expired), and WATCH streams resumed from the history,
with bookmarks, timeouts and injected ERROR events."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp.web
import attrs

from kopfsched.emulator import selectors
from kopfsched.emulator.resources import ResourceDef
from kopfsched.emulator.store import (
    _BOOKMARK,
    _DROP,
    ApiError,
    EmulatorStore,
    Obj,
    StoreKey,
    _dumps,
    _Event,
    _not_found,
    status_object,
)


@dataclasses.dataclass(frozen=True)
class _WatchError:
    """A watch queue item: send an ERROR event with this Status, then close the stream."""

    status: Obj

    def line(self) -> bytes:
        return _dumps({'type': 'ERROR', 'object': self.status}) + b'\n'


@dataclasses.dataclass
class _WatchFailure:
    """New watches of a resource answer an ERROR event right away (`times` more, or all when None)."""

    error: _WatchError
    times: int | None


@dataclasses.dataclass
class _ListSnapshot:
    """A paged list in progress: its items at the first page's revision."""

    rv: int
    created: float  # time.monotonic()
    items: list[Obj]


MAX_LIST_SNAPSHOTS = 256


EXPIRED_CONTINUE = ('The provided continue parameter is too old to display a consistent list result. You can start a '
                    'new list without the continue parameter.')


def _event_line(event: _Event, matches: Callable[[Obj], bool]) -> bytes | None:
    """The event as this watcher sees it: objects entering or leaving its selector are ADDED or DELETED."""
    now = event.type != 'DELETED' and matches(event.obj)
    before = event.old is not None and matches(event.old)
    if event.type == 'DELETED':
        return event.line('DELETED') if before else None
    if now and before:
        return event.line(event.type)
    if now:
        return event.line('ADDED')
    if before:
        return event.line('DELETED')
    return None


def _continue_token(snapshot_id: int, offset: int) -> str:
    return base64.urlsafe_b64encode(_dumps({'id': snapshot_id, 'offset': offset})).decode()


def _int_query(query: Mapping[str, str], name: str) -> int:
    try:
        return int(query[name])
    except ValueError:
        raise ApiError(400, f'invalid {name} {query[name]!r}') from None


@attrs.define(kw_only=True, slots=False)
class EmulatorReads(EmulatorStore):
    """Reads: GET, LIST with selectors and paging (continue tokens served at the first page's"""

    def _get(self, resource: ResourceDef, namespace: str | None, name: str) -> Obj:
        obj = self._store[resource.store_key].get((namespace, name))
        if obj is None:
            raise _not_found(resource, name)
        return obj

    def _list(self, resource: ResourceDef, *, namespace: str | None, query: Mapping[str, str]) -> Obj:
        limit = _int_query(query, 'limit') if query.get('limit') else 0
        if query.get('continue'):
            snapshot_id, snapshot, offset = self._continued(query['continue'])
        else:
            matches = self._matcher(resource, namespace=namespace, query=query)
            objects = sorted(self._store[resource.store_key].items(), key=lambda item: (item[0][0] or '', item[0][1]))
            snapshot_id, snapshot, offset = -1, _ListSnapshot(self._rv, time.monotonic(),
                                                              [obj for _, obj in objects if matches(obj)]), 0
        items = snapshot.items
        metadata: Obj = {'resourceVersion': str(snapshot.rv)}
        if limit and offset + limit < len(items):
            if snapshot_id < 0:
                snapshot_id = self._keep_list_snapshot(snapshot)
            metadata['continue'] = _continue_token(snapshot_id, offset + limit)
            metadata['remainingItemCount'] = len(items) - offset - limit
        items = items[offset:offset + limit] if limit else items[offset:]
        if self.items_without_type and not resource.custom:
            items = [{k: v for k, v in obj.items() if k not in ('kind', 'apiVersion')} for obj in items]
        return {'kind': f'{resource.kind}List', 'apiVersion': resource.api_version, 'metadata': metadata,
                'items': items}

    def _keep_list_snapshot(self, snapshot: _ListSnapshot) -> int:
        snapshot_id = next(self._list_snapshot_ids)
        self._list_snapshots[snapshot_id] = snapshot
        while len(self._list_snapshots) > MAX_LIST_SNAPSHOTS:
            del self._list_snapshots[next(iter(self._list_snapshots))]
        return snapshot_id

    def _continued(self, token: str) -> tuple[int, _ListSnapshot, int]:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            snapshot_id, offset = int(decoded['id']), int(decoded['offset'])
        except (ValueError, KeyError, TypeError) as e:
            raise ApiError(400, f'continue key is not valid: {e}') from None
        if self._compact_on_continue:
            self._compact_on_continue -= 1
            self._list_snapshots.clear()
        snapshot = self._list_snapshots.get(snapshot_id)
        if snapshot is not None and self.continue_ttl is not None and \
                time.monotonic() - snapshot.created > self.continue_ttl:
            del self._list_snapshots[snapshot_id]
            snapshot = None
        if snapshot is None:
            raise ApiError(410, EXPIRED_CONTINUE, reason='Expired')
        return snapshot_id, snapshot, offset

    def _matcher(self, resource: ResourceDef, *, namespace: str | None, query: Mapping[str, str],
                 name: str | None = None) -> Callable[[Obj], bool]:
        try:
            by_label = selectors.parse_label_selector(query.get('labelSelector'))
            by_field = selectors.parse_field_selector(query.get('fieldSelector'), plural=resource.plural)
        except selectors.SelectorError as e:
            raise ApiError(400, str(e)) from e
        checks = [check for check in (by_label, by_field) if check is not None]
        if namespace is not None:
            checks.append(lambda obj: obj['metadata'].get('namespace') == namespace)
        if name is not None:
            checks.append(lambda obj: obj['metadata']['name'] == name)
        return lambda obj: all(check(obj) for check in checks)

    async def _watch(self, raw: aiohttp.web.BaseRequest, resource: ResourceDef, *, namespace: str | None,
                     name: str | None) -> aiohttp.web.StreamResponse:
        query = raw.query
        matches = self._matcher(resource, namespace=namespace, query=query, name=name)
        since = query.get('resourceVersion') or '0'
        if not since.isdigit():
            raise ApiError(400, f'invalid resourceVersion {since!r}')
        key = resource.store_key
        timeout = self._watch_timeout(query.get('timeoutSeconds'))
        bookmarks = (query.get('allowWatchBookmarks') or '').lower() in ('true', '1')

        # Subscribe and read the snapshot or backlog in one synchronous step: nothing falls in between.
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._watchers[key].add(queue)
        try:
            if (error := self._take_watch_failure(key)) is not None:
                lines = [error.line()]
                queue.put_nowait(_DROP)
            elif since == '0':
                initial = [obj for obj in self._store[key].values() if matches(obj)]
                lines = [_dumps({'type': 'ADDED', 'object': obj}) + b'\n' for obj in initial]
            elif int(since) < self._compacted_rv[key]:
                lines = [_dumps({'type': 'ERROR', 'object': status_object(
                    410, f'too old resource version: {since} ({self._compacted_rv[key] + 1})', reason='Expired')})
                    + b'\n']
                queue.put_nowait(_DROP)
            else:
                backlog = [event for event in self._history[key] if event.rv > int(since)]
                lines = [line for event in backlog if (line := _event_line(event, matches))]
            last_rv = self._rv
            response = aiohttp.web.StreamResponse(headers={'Content-Type': 'application/json'})
            await response.prepare(raw)
            if lines:
                await response.write(b''.join(lines))
            with contextlib.suppress(ConnectionError):
                await self._stream_events(response, queue, matches, last_rv=last_rv, timeout=timeout,
                                          bookmarks=bookmarks, resource=resource)
            return response
        finally:
            self._watchers[key].discard(queue)

    def _watch_timeout(self, timeout_seconds: str | None) -> float | None:
        """How long a watch lasts: timeoutSeconds, else the API server's random 1-2x --min-request-timeout."""
        try:
            seconds = int(timeout_seconds or 0)
        except ValueError:
            raise ApiError(400, f'invalid timeoutSeconds {timeout_seconds!r}') from None
        if seconds > 0:
            return float(seconds)
        if self.min_request_timeout is None:
            return None
        return self.min_request_timeout * (1.0 + random.random())

    async def _stream_events(self, response: aiohttp.web.StreamResponse, queue: asyncio.Queue[Any],
                             matches: Callable[[Obj], bool], *, last_rv: int, timeout: float | None,
                             bookmarks: bool, resource: ResourceDef) -> None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            wait = self.bookmark_interval if bookmarks else None
            if deadline is not None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                wait = remaining if wait is None else min(wait, remaining)
            try:
                item = await asyncio.wait_for(queue.get(), wait)
            except TimeoutError:
                item = _BOOKMARK if bookmarks else None
            if item is _DROP:
                break
            if isinstance(item, _WatchError):
                await response.write(item.line())
                break
            if item is None:
                continue
            if item is _BOOKMARK:
                if bookmarks and queue.empty():
                    await response.write(_dumps({'type': 'BOOKMARK', 'object': {
                        'kind': resource.kind, 'apiVersion': resource.api_version,
                        'metadata': {'resourceVersion': str(self._rv)}}}) + b'\n')
                continue
            if item.rv > last_rv and (line := _event_line(item, matches)):
                await response.write(line)
        await response.write_eof()

    def _take_watch_failure(self, key: StoreKey) -> _WatchError | None:
        failure = self._watch_failures.get(key)
        if failure is None:
            return None
        if failure.times is not None:
            failure.times -= 1
            if failure.times <= 0:
                del self._watch_failures[key]
        return failure.error
