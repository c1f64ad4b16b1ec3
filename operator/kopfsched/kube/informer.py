"""The informer: what client-go's informers give kube-scheduler, on top of kopf's watches.

Each kind is listed once at start-up, by kopf, and that listing fills the cache. kube.watches
relays, for every watched kind, where a LIST starts, each listed object, where it ends, then every
watch event (`WatchSink`; kube.kopf_thread.Relay brings the calls to the scheduler's loop, in
order). So:

- the cache is synced (/readyz, and the scheduling loop may start) once every kind kopf's discovery
  found served has finished its first LIST; kinds the API does not serve (an optional CRD) are not
  waited for;
- a relist (after `410 Expired`, a watch error or a reconnect that lost its resourceVersion) is
  reconciled as it ends: what the feed knows but the LIST did not show, and no event touched since
  the LIST began, vanished while the watch was away and is deleted — no second LIST of the kind;
- the SchedulerProfile kind listed empty seeds the default profile.

Measured against the operator's own paged LIST of every kind before kopf's (the previous design),
with 5000 nodes and 55 000 pods: one LIST per kind instead of two (docs/performance.md). The other
design the issue named, the operator listing and kopf watching from that resourceVersion, would have
meant reimplementing kopf's list half (paging, selectors, retries) beside it; kopf's listing-done
mark (`Bookmark.LISTED`) in the stream we already wrap gives the same signal for free.

Like kube-scheduler's informers, nothing relists on a timer unless `reconcile_interval` is set;
that periodic reconcile is the one LIST the operator still sends itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from kopfsched.framework.client import ClusterError, ConflictError, NotFoundError
from kopfsched.kube.client import KubeClusterClient
from kopfsched.kube.feed import NODE, POD, ClusterFeed
from kopfsched.kube.handlers import (
    KINDS_BY_RESOURCE,
    LIST_PAGE_SIZE,
    POD_FIELD_SELECTOR,
    PROFILE_KIND,
    WATCHED,
    WatchedKind,
)
from kopfsched.kube.waiting import stopped_within
from kopfsched.scheduler.tasks import TaskSet

logger = logging.getLogger(__name__)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def trimmed(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what the scheduler never reads and what makes it large: managedFields
    (often larger than the spec) and kubectl's last-applied annotation (a second copy of the
    object). Removed in place (a pop per event, not a copy of the top level and metadata): what
    is trimmed is the informer's own, a listed or watched object kopf hands over and then drops
    (its stream reads the resourceVersion before, and keeps nothing after), or a page of our LIST."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if annotations and LAST_APPLIED in annotations:
        del annotations[LAST_APPLIED]
    return obj


DEFAULT_SCHEDULER_PROFILE: dict[str, Any] = {
    "apiVersion": PROFILE_KIND.group_version,
    "kind": PROFILE_KIND.kind,
    "metadata": {"name": "kopfsched", "labels": {"app.kubernetes.io/name": "kopfsched",
                                                 "app.kubernetes.io/part-of": "kopfsched"}},
    "spec": {"schedulerName": "kopfsched", "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 10},
}
"""Upstream's default plugins and weights, served as `schedulerName: kopfsched`."""


@dataclass(slots=True)
class _Listing:
    token: int
    """The feed's listing token (ClusterFeed.begin_listing) taken when the LIST started."""
    seen: set[str] = field(default_factory=set)
    """Keys of the objects listed so far."""


class Informer:
    """kopf's listings and watch events of every watched kind into the feeds (SchedulerProfiles
    into their own feed, the rest into the scheduler's): kube.watches' `WatchSink`, called in the
    scheduler's loop."""

    def __init__(self, *, client: KubeClusterClient, feed: ClusterFeed, profile_feed: ClusterFeed, tasks: TaskSet,
                 seed_default_profile: bool, reconcile_interval: float | None,
                 list_page_size: int = LIST_PAGE_SIZE) -> None:
        self.client = client
        self.feed = feed
        self.profile_feed = profile_feed
        self.tasks = tasks
        self.seed_default_profile = seed_default_profile
        self.reconcile_interval = reconcile_interval
        self.list_page_size = list_page_size
        self.synced_flag = asyncio.Event()
        """Set once the initial listing is done."""
        self._served: set[str] | None = None
        """Kinds kopf's first discovery found served (None before it)."""
        self._listed_once: set[str] = set()
        self._listings: dict[str, _Listing] = {}
        """Kinds whose LIST is under way."""
        self._seeding: asyncio.Task[None] | None = None

    @property
    def synced(self) -> bool:
        """The initial listing is done: the cache holds every node and pod."""
        return self.synced_flag.is_set()

    # -- kube.watches' sink ----------------------------------------------------------------

    def kind_of(self, resource: str) -> str | None:
        return KINDS_BY_RESOURCE.get(resource)

    def served(self, kinds: Collection[str]) -> None:
        """kopf's discovery: its first scan says which kinds start-up waits for (a CRD installed
        later is watched when it appears, without holding readiness back)."""
        if self._served is not None:
            return
        self._served = set(kinds)
        if PROFILE_KIND.kind not in self._served and self.seed_default_profile:
            logger.warning("SchedulerProfile CRD is not installed: apply crds/ first")
        self._check_synced()

    def listing(self, kind: str) -> None:
        self._listings[kind] = _Listing(self._feed_of(kind).begin_listing())

    def event(self, kind: str, type: str | None, obj: dict[str, Any]) -> None:
        """One listed object (type None) or watch event."""
        feed = self.feed
        obj = trimmed(obj)
        if kind == PROFILE_KIND.kind:
            obj = {**obj, "apiVersion": obj.get("apiVersion") or PROFILE_KIND.group_version, "kind": kind}
            feed = self.profile_feed
        if type == "DELETED":
            feed.delete(kind, obj)
            return
        if type is None and (listing := self._listings.get(kind)) is not None:
            listing.seen.add(feed.key_of(kind, obj))
        feed.upsert(kind, obj)

    def listed(self, kind: str) -> None:
        """The LIST is complete: what it did not show vanished while no watch was open."""
        listing = self._listings.pop(kind, None)
        if listing is not None:
            self._feed_of(kind).forget_unseen(kind, listing.seen, token=listing.token)
        if kind in self._listed_once:
            return
        self._listed_once.add(kind)
        if kind == PROFILE_KIND.kind and self.seed_default_profile and not self.profile_feed.count(kind):
            self._seeding = self.tasks.spawn(self._seed(), "seeding the default SchedulerProfile")
        self._check_synced()

    def stopped(self, kind: str) -> None:
        """kopf stopped watching `kind` (e.g. its CRD was deleted): start-up no longer waits for it."""
        self._listings.pop(kind, None)
        if self._served is not None and not self.synced:
            self._served.discard(kind)
            self._check_synced()

    def _check_synced(self) -> None:
        if self.synced or self._served is None or self._seeding is not None or not self._served <= self._listed_once:
            return
        self.synced_flag.set()
        logger.info("initial listing done: %d nodes, %d pods", self.feed.count(NODE), self.feed.count(POD))

    def _feed_of(self, kind: str) -> ClusterFeed:
        return self.profile_feed if kind == PROFILE_KIND.kind else self.feed

    # -- the default SchedulerProfile ----------------------------------------------------------

    async def _seed(self) -> None:
        try:
            for profile in await self.create_default_profile():
                self.profile_feed.upsert(PROFILE_KIND.kind, profile)
        except ClusterError as exc:
            logger.warning("could not create the default SchedulerProfile: %s", exc)
        finally:
            self._seeding = None
            self._check_synced()

    async def create_default_profile(self) -> list[dict[str, Any]]:
        """`kubectl apply -f crds/ -f manifests/` cannot create a custom resource in the same
        run as its CRD (kubectl maps every kind before the CRD is established), so the
        default profile is created here, once, when there is no profile at all."""
        path = f"/apis/{PROFILE_KIND.group_version}/{PROFILE_KIND.plural}"
        try:
            created = await self.client.request("POST", path, body=DEFAULT_SCHEDULER_PROFILE,
                                                what="creating the default SchedulerProfile")
        except ConflictError:  # another replica was first; the watch delivers it
            return []
        except NotFoundError:
            logger.warning("SchedulerProfile CRD is not installed: apply crds/ first")
            return []
        logger.info("created the default SchedulerProfile %r", DEFAULT_SCHEDULER_PROFILE["metadata"]["name"])
        return [created] if isinstance(created, dict) and created.get("spec") else [DEFAULT_SCHEDULER_PROFILE]

    # -- the periodic reconcile (off by default) -------------------------------------------------

    async def _reconcile_kind(self, watched: WatchedKind) -> int:
        feed = self._feed_of(watched.kind)
        token = feed.begin_listing()
        listed = await self.list(watched, missing_ok=watched.kind not in (NODE, POD))
        return feed.reconcile(watched.kind, listed, token=token)

    async def reconcile(self) -> int:
        """LIST every watched kind and drop what the cache knows but the API no longer has."""
        removed = 0
        for watched in (*WATCHED, PROFILE_KIND):
            removed += await self._reconcile_kind(watched)
        return removed

    async def reconcile_loop(self, stop: asyncio.Event) -> None:
        """Reconcile every `reconcile_interval`, if set (off by default: relists reconcile)."""
        if not self.reconcile_interval:
            return
        while not await stopped_within(stop, self.reconcile_interval):
            try:
                await self.reconcile()
            except ClusterError as exc:
                logger.warning("reconcile failed: %s", exc)

    async def list(self, watched: WatchedKind, *, missing_ok: bool = False) -> list[dict[str, Any]]:
        """Every object of a kind, LIST page by page (pods: only those not finished).

        Pages after the first are served at the first page's revision; once etcd compacted it
        (after ~5 minutes), a continue answers 410 Expired: then, as client-go's pager does
        (FullListIfExpired), one fresh list without paging replaces the pages read so far."""
        prefix = "/api/v1" if watched.group_version == "v1" else f"/apis/{watched.group_version}"
        query = {"limit": str(self.list_page_size)}
        if watched.kind == POD:
            query["fieldSelector"] = POD_FIELD_SELECTOR
        items: list[dict[str, Any]] = []
        while True:
            try:
                page = await self.client.request("GET", f"{prefix}/{watched.plural}", query=query,
                                                 rate_limited=False, what=f"listing {watched.plural}")
            except NotFoundError:
                if missing_ok:
                    return []
                raise
            except ClusterError as exc:
                if "continue" not in query or getattr(exc.__cause__, "status", None) != 410:
                    raise
                logger.info("listing %s: the continue token expired after %d items; listing them all again",
                            watched.plural, len(items))
                del query["continue"], query["limit"]
                items = []
                continue
            for item in page.get("items") or ():
                item = trimmed(item)
                item.setdefault("apiVersion", watched.group_version)
                item.setdefault("kind", watched.kind)
                items.append(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            query["continue"] = token


__all__ = ["DEFAULT_SCHEDULER_PROFILE", "LIST_PAGE_SIZE", "Informer"]
