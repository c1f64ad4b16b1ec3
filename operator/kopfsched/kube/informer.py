"""The informer: what client-go's informers give kube-scheduler, on top of kopf's watches.

kopf's on.event handlers forward every watch event here (through the scheduler's loop);
`on_event` routes it to the feed of its kind. kopf gives no signal when its initial
listing is done, so the operator lists every kind itself (paged) before it schedules; and
after kopf relists a kind (after `410 Expired` or a watch error: a relist says nothing of
what vanished meanwhile), a fresh LIST of that kind is reconciled with what its feed knows.
Like kube-scheduler's informers, nothing relists on a timer unless `reconcile_interval` is set.
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


def resource_name(watched: WatchedKind) -> str:
    """How kube.watches names the resource of a kind: `pods`, `storageclasses.storage.k8s.io`."""
    group = watched.group_version.rpartition("/")[0]
    return f"{watched.plural}.{group}" if group else watched.plural


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
                 seed_default_profile: bool, relist_reconcile_delay: float, reconcile_interval: float | None,
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
        self._pending_kinds: set[WatchedKind] = set()
        """Kinds a relist reconcile is scheduled for."""
        self._last_relisted = 0.0
        """Loop time kopf last listed something after our initial listing."""
        self._by_kind = {watched.kind: watched for watched in (*WATCHED, PROFILE_KIND)}
        self._by_resource = {resource_name(watched): watched for watched in (*WATCHED, PROFILE_KIND)}

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
            self._schedule_reconcile(self._by_kind[kind])

    def relisted(self, resource: str) -> None:
        """kopf listed `resource` again (kube.watches reports it): reconcile that kind, also
        when the list came back empty and kopf forwarded no event at all."""
        watched = self._by_resource.get(resource)
        if watched is not None and self.listed:
            self._schedule_reconcile(watched)

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

    def _schedule_reconcile(self, watched: WatchedKind) -> None:
        """Reconcile `watched` once kopf's listing has gone quiet for relist_reconcile_delay,
        with every kind relisted meanwhile."""
        self._last_relisted = asyncio.get_running_loop().time()
        if self._pending_kinds:
            self._pending_kinds.add(watched)
            return
        self._pending_kinds.add(watched)

        async def later() -> None:
            # A trailing debounce: one reconcile after the whole listing, not one after another
            # while 50 000 listed pods trickle in (each a LIST of the kind, which kept the API
            # server and this loop busy for minutes at start-up).
            loop = asyncio.get_running_loop()
            while (wait := self._last_relisted + self.relist_reconcile_delay - loop.time()) > 0:
                await asyncio.sleep(wait)
            kinds = [kind for kind in (*WATCHED, PROFILE_KIND) if kind in self._pending_kinds]
            self._pending_kinds.clear()
            for kind in kinds:
                await self._reconcile_kind(kind)
        self.tasks.spawn(later(), "relist reconcile")

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
