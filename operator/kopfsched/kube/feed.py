"""ClusterFeed: watch events (kopf's, our own LISTs') → the scheduler's EventHandlers.

What a client-go informer would give the scheduler and a kopf on.event handler does not:

- the previous version of an object (kopf's on.event has no `old`): kept per object here;
- ordering: an event older (by resourceVersion) than what is known is dropped (a relist's
  copy of what is known, or the optional periodic reconcile's LIST racing the watch), a pod
  never goes back from bound to unbound, and a recent deletion is not undone by an older LIST;
- deletions a relist cannot show (no DELETED comes for objects that vanished while a watch
  was down, e.g. after 410 Gone): `forget_unseen` (and `reconcile`, for a whole LIST at once)
  deletes what the LIST lacked and no event touched since the LIST began.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from kopfsched.framework.types import Obj
from kopfsched.scheduler.event_handlers import EventHandlers

logger = logging.getLogger(__name__)

POD, NODE = "Pod", "Node"
TOMBSTONES = 10_000
"""Recently deleted objects remembered per kind, so an older LIST cannot resurrect them."""


def _rv(obj: Obj) -> int | None:
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _assigned(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


@dataclass(slots=True)
class _Known:
    obj: Obj
    epoch: int
    rv: int | None
    """obj's resourceVersion as a number (parsed once, compared with every later event's)."""


class ClusterFeed:
    """Keeps the last version of every watched object and tells the EventHandlers."""

    def __init__(self, handlers: EventHandlers) -> None:
        self.handlers = handlers
        self._known: dict[str, dict[str, _Known]] = {}
        self._tombstones: dict[str, OrderedDict[str, int | None]] = {}
        self._failing: set[tuple[str, str]] = set()
        self.epoch = 0

    @staticmethod
    def key_of(kind: str, obj: Obj) -> str:
        meta = obj.get("metadata") or {}
        if kind == POD:
            return meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        namespace = meta.get("namespace")
        return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))

    def count(self, kind: str) -> int:
        return len(self._known.get(kind, ()))

    def known(self, kind: str) -> list[Obj]:
        return [entry.obj for entry in self._known.get(kind, {}).values()]

    # -- events ----------------------------------------------------------------------------

    def upsert(self, kind: str, obj: Obj) -> None:
        """ADDED, MODIFIED, or listed. The object counts as known only once its handler
        succeeded: a failing one is retried by its next event or the next relist."""
        key = self.key_of(kind, obj)
        known = self._known.get(kind)
        if known is None:
            known = self._known[kind] = {}
        entry = known.get(key)
        rv = _rv(obj)
        if self._stale(kind, key, obj, rv, entry):
            return
        old = entry.obj if entry is not None else None
        try:
            self._dispatch_upsert(kind, obj, old)
        except Exception:  # one bad object must not stop the feed
            self._report(kind, key, "handle")
            return
        if entry is None:
            tombstones = self._tombstones.get(kind)
            if tombstones:
                tombstones.pop(key, None)
        known[key] = _Known(obj, self.epoch, rv)
        if self._failing:
            self._failing.discard((kind, key))

    def delete(self, kind: str, obj: Obj) -> None:
        """DELETED, or gone from a relist. The object stays known until its handler
        succeeded, so the next relist's reconcile retries a deletion that failed."""
        key = self.key_of(kind, obj)
        known, rv = self._known.get(kind, {}), _rv(obj)
        current = known.get(key)
        if current is not None and rv is not None and (current.rv or 0) > rv:
            return  # the DELETED of an earlier object of the same name (our LIST saw the new one first)
        try:
            self._dispatch_delete(kind, obj if current is None else current.obj)
        except Exception:
            self._report(kind, key, "handle the deletion of")
            return
        known.pop(key, None)
        self._failing.discard((kind, key))
        tombstones = self._tombstones.setdefault(kind, OrderedDict())
        tombstones[key] = rv
        while len(tombstones) > TOMBSTONES:
            tombstones.popitem(last=False)

    def failing(self) -> list[tuple[str, str]]:
        """(kind, key) of the objects whose last event failed in its handler."""
        return sorted(self._failing)

    def _report(self, kind: str, key: str, what: str) -> None:
        """Log a failing object's traceback once; its retries fail quietly until one succeeds."""
        if (kind, key) in self._failing:
            logger.debug("failed again to %s %s %s", what, kind, key, exc_info=True)
            return
        self._failing.add((kind, key))
        logger.exception("failed to %s %s %s; retrying on its next event or relist", what, kind, key)

    def _stale(self, kind: str, key: str, obj: Obj, new_rv: int | None, entry: _Known | None) -> bool:
        if entry is None:
            tombstones = self._tombstones.get(kind)
            if tombstones is not None and key in tombstones:
                gone_rv = tombstones[key]
                return new_rv is None or gone_rv is None or new_rv <= gone_rv
            return False
        if entry.obj is obj:
            return True
        old_rv = entry.rv
        if new_rv is not None and old_rv is not None and new_rv <= old_rv:
            return True  # older, or a relist's copy of what is known
        # A pod is never unbound: an unbound version after a bound one is an old one.
        return kind == POD and _assigned(entry.obj) and not _assigned(obj)

    def _dispatch_upsert(self, kind: str, obj: Obj, old: Obj | None) -> None:
        if kind == POD:
            self.handlers.on_pod_upsert(obj, old)
        elif kind == NODE:
            self.handlers.on_node_upsert(obj, old)
        else:
            self.handlers.on_object_upsert(kind, obj)

    def _dispatch_delete(self, kind: str, obj: Obj) -> None:
        if kind == POD:
            self.handlers.on_pod_delete(obj)
        elif kind == NODE:
            self.handlers.on_node_delete(obj)
        else:
            self.handlers.on_object_delete(kind, obj)

    # -- relist reconciliation ---------------------------------------------------------------

    def begin_listing(self) -> int:
        """Call right before a LIST is sent; returns the token for `reconcile`."""
        self.epoch += 1
        return self.epoch

    def reconcile(self, kind: str, listed: Iterable[Obj], *, token: int) -> int:
        """Apply a LIST taken after `begin_listing()` returned `token`: upsert what it shows,
        delete what it does not show unless an event touched it since. Returns the number
        of objects deleted."""
        seen: set[str] = set()
        for obj in listed:
            seen.add(self.key_of(kind, obj))
            self.upsert(kind, obj)
        return self.forget_unseen(kind, seen, token=token)

    def forget_unseen(self, kind: str, seen: Collection[str], *, token: int) -> int:
        """A LIST that started at `token` is complete and showed the objects of keys `seen`
        (each already upserted): delete the others no event touched since. Returns how many."""
        ghosts = [entry.obj for key, entry in self._known.get(kind, {}).items()
                  if key not in seen and entry.epoch < token]
        for obj in ghosts:
            logger.info("%s %s vanished while the watch was away; removing it", kind, self.key_of(kind, obj))
            self.delete(kind, obj)
        return len(ghosts)

