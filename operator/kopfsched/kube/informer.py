"""The informer: what client-go's informers give kube-scheduler, on top of kopf's watches.

kopf's on.event handlers forward every watch event here (through the scheduler's loop);
`on_event` routes it to the feed of its kind. kopf gives no signal when its initial
listing is done, so the operator lists every kind itself (paged) before it schedules; and
after kopf relists (a `410 Gone` says nothing of what vanished meanwhile) and every
`reconcile_interval`, a fresh LIST is reconciled with what the feeds know.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kopfsched.framework.client import ClusterError, ConflictError, NotFoundError
from kopfsched.kube.client import KubeClusterClient
from kopfsched.kube.feed import NODE, POD, ClusterFeed
from kopfsched.kube.handlers import POD_FIELD_SELECTOR, PROFILE_KIND, WATCHED, WatchedKind
from kopfsched.kube.waiting import stopped_within
from kopfsched.scheduler.tasks import TaskSet

logger = logging.getLogger(__name__)

LIST_PAGE_SIZE = 500
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def trimmed(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what the scheduler never reads and what makes it large: managedFields
    (often larger than the spec) and kubectl's last-applied annotation (a second copy of the
    object). A copy of the top level and metadata only: kopf's event object stays untouched."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    if "managedFields" not in meta and LAST_APPLIED not in (meta.get("annotations") or {}):
        return obj
    meta = {key: value for key, value in meta.items() if key != "managedFields"}
    annotations = meta.get("annotations")
    if annotations and LAST_APPLIED in annotations:
        meta["annotations"] = {key: value for key, value in annotations.items() if key != LAST_APPLIED}
    return {**obj, "metadata": meta}

DEFAULT_SCHEDULER_PROFILE: dict[str, Any] = {
    "apiVersion": PROFILE_KIND.group_version,
    "kind": PROFILE_KIND.kind,
    "metadata": {"name": "kopfsched", "labels": {"app.kubernetes.io/name": "kopfsched",
                                                 "app.kubernetes.io/part-of": "kopfsched"}},
    "spec": {"schedulerName": "kopfsched", "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 10},
}
"""Upstream's default plugins and weights, served as `schedulerName: kopfsched`."""


class Informer:
    """Watch events and LISTs of every watched kind into the feeds (SchedulerProfiles into
    their own feed, the rest into the scheduler's)."""

    def __init__(self, *, client: KubeClusterClient, feed: ClusterFeed, profile_feed: ClusterFeed, tasks: TaskSet,
                 seed_default_profile: bool, relist_reconcile_delay: float, reconcile_interval: float,
                 list_page_size: int = LIST_PAGE_SIZE) -> None:
        self.client = client
        self.feed = feed
        self.profile_feed = profile_feed
        self.tasks = tasks
        self.seed_default_profile = seed_default_profile
        self.relist_reconcile_delay = relist_reconcile_delay
        self.reconcile_interval = reconcile_interval
        self.list_page_size = list_page_size
        self.listed = False
        """The initial listing is done: the cache holds every node and pod."""
        self._reconcile_pending = False

    # -- events from kopf -------------------------------------------------------------------

    def on_event(self, kind: str, type: str | None, obj: dict[str, Any]) -> None:
        """One watch event (type None: kopf listed the object)."""
        feed = self.feed
        obj = trimmed(obj)
        if kind == PROFILE_KIND.kind:
            obj = {**obj, "apiVersion": obj.get("apiVersion") or PROFILE_KIND.group_version, "kind": kind}
            feed = self.profile_feed
        if type == "DELETED":
            feed.delete(kind, obj)
            return
        feed.upsert(kind, obj)
        if type is None and self.listed:
            # kopf (re)listed: after 410 Gone it says nothing of what vanished meanwhile.
            self._schedule_reconcile()

    # -- listing and reconciling -------------------------------------------------------------

    async def initial_listing(self) -> None:
        token = self.profile_feed.begin_listing()
        profiles = await self.list(PROFILE_KIND, missing_ok=True)
        if not profiles and self.seed_default_profile:
            profiles = await self._seed_default_profile()
        self.profile_feed.reconcile(PROFILE_KIND.kind, profiles, token=token)
        for watched in WATCHED:  # nodes and pods first
            await self._reconcile_kind(watched)
        self.listed = True
        logger.info("initial listing done: %d nodes, %d pods", self.feed.count(NODE), self.feed.count(POD))

    async def _seed_default_profile(self) -> list[dict[str, Any]]:
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

    async def _reconcile_kind(self, watched: WatchedKind) -> int:
        feed = self.profile_feed if watched is PROFILE_KIND else self.feed
        token = feed.begin_listing()
        listed = await self.list(watched, missing_ok=watched.kind not in (NODE, POD))
        return feed.reconcile(watched.kind, listed, token=token)

    async def reconcile(self) -> int:
        """LIST every watched kind and drop what the cache knows but the API no longer has."""
        removed = 0
        for watched in (*WATCHED, PROFILE_KIND):
            removed += await self._reconcile_kind(watched)
        return removed

    def _schedule_reconcile(self) -> None:
        if self._reconcile_pending:
            return
        self._reconcile_pending = True

        async def later() -> None:
            await asyncio.sleep(self.relist_reconcile_delay)
            self._reconcile_pending = False
            await self.reconcile()
        self.tasks.spawn(later(), "relist reconcile")

    async def reconcile_loop(self, stop: asyncio.Event) -> None:
        """Reconcile every `reconcile_interval` (ghosts a missed DELETED left behind)."""
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
