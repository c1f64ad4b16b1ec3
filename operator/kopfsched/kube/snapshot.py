"""`kopfsched snapshot`: every object the scheduler reads, from a live cluster, as simulate input.

Read-only: paged GETs (limit/continue) and nothing else. Each page is written out before
the next is requested, so a cluster of any size is copied in the memory of one page. Kinds
the cluster does not serve (a CRD not installed) or that the credentials may not list are
left out with a note on stderr. managedFields and the last-applied annotation are dropped:
no plugin reads them and they are often half of an object's size.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TextIO

from kubernetes_asyncio import client as k8s

from kopfsched.framework.client import ClusterError, NotFoundError
from kopfsched.framework.types import rfc3339
from kopfsched.kube.client import KubeClusterClient
from kopfsched.kube.handlers import POD_FIELD_SELECTOR, PROFILE_KIND, WATCHED, WatchedKind
from kopfsched.kube.operator import StartupError, load_configuration

PAGE_SIZE = 500
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_EXTRA_KINDS = (
    WatchedKind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses"),
    WatchedKind("CSIDriver", "storage.k8s.io/v1", "csidrivers"),
    WatchedKind("CSIStorageCapacity", "storage.k8s.io/v1", "csistoragecapacities"),
    WatchedKind("DeviceClass", "resource.k8s.io/v1", "deviceclasses"),
    WatchedKind("ResourceClaim", "resource.k8s.io/v1", "resourceclaims"),
    WatchedKind("ResourceClaimTemplate", "resource.k8s.io/v1", "resourceclaimtemplates"),
    WatchedKind("ResourceSlice", "resource.k8s.io/v1", "resourceslices"),
    PROFILE_KIND,
)
SNAPSHOT_KINDS: tuple[WatchedKind, ...] = (
    *WATCHED, *(k for k in _EXTRA_KINDS if k.plural not in {w.plural for w in WATCHED}))
"""What the operator watches, plus what simulate reads that the operator gets elsewhere
(PriorityClasses resolve into spec.priority at admission; CSI objects for volume limits;
DRA's classes, claims and slices)."""

Progress = Callable[[str], None]


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what no plugin reads and what makes it large."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if annotations and LAST_APPLIED in annotations:
            annotations.pop(LAST_APPLIED)
            if not annotations:
                meta.pop("annotations")
    return obj


async def list_pages(client: KubeClusterClient, kinds: Iterable[WatchedKind] = SNAPSHOT_KINDS, *,
                     page_size: int = PAGE_SIZE,
                     progress: Progress | None = None) -> AsyncIterator[tuple[WatchedKind, list[dict[str, Any]]]]:
    """(kind, one page of its objects, stripped, with apiVersion and kind set), page by page."""
    say = progress or (lambda line: None)
    for watched in kinds:
        prefix = "/api/v1" if watched.group_version == "v1" else f"/apis/{watched.group_version}"
        query = {"limit": str(page_size)}
        if watched.kind == "Pod":
            query["fieldSelector"] = POD_FIELD_SELECTOR  # as kube-scheduler: finished pods hold nothing
        count = 0
        began = time.monotonic()
        while True:
            try:
                page = await client.request("GET", f"{prefix}/{watched.plural}", query=query,
                                            what=f"listing {watched.plural}")
            except NotFoundError:
                say(f"{watched.plural}: not served by this cluster, left out")
                break
            except ClusterError as exc:
                if getattr(exc.__cause__, "status", None) != 403:
                    raise
                say(f"{watched.plural}: forbidden, left out")
                break
            items = page.get("items") or []
            for item in items:
                item["apiVersion"] = watched.group_version
                item["kind"] = watched.kind
                strip(item)
            count += len(items)
            yield watched, items
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                say(f"{watched.plural}: {count} in {time.monotonic() - began:.1f}s")
                break
            if count >= 10 * page_size and (count // page_size) % 10 == 0:
                say(f"{watched.plural}: {count} so far")
            query["continue"] = token


async def write_snapshot(client: KubeClusterClient, out: TextIO, *, page_size: int = PAGE_SIZE,
                         progress: Progress | None = None) -> int:
    """Every object as one YAML document each; returns how many were written.

    Each document is the object's JSON on one line (JSON is YAML): written some 25 times
    faster than block-style YAML, and still one object per line for grep."""
    written = 0
    header = f"# kopfsched snapshot, {rfc3339()}\n"
    async for _, items in list_pages(client, page_size=page_size, progress=progress):
        # The header once the cluster answered: a cluster that cannot be read leaves stdout empty.
        out.write(header + "".join(f"---\n{json.dumps(item, ensure_ascii=False, separators=(',', ':'))}\n"
                                   for item in items))
        header = ""
        written += len(items)
    out.write(header)
    return written


async def _with_client(kubeconfig: str | None, work: Callable[[KubeClusterClient], Any]) -> Any:
    configuration = await load_configuration(kubeconfig)
    async with k8s.ApiClient(configuration) as api:
        client = KubeClusterClient(api)
        try:
            return await work(client)
        finally:
            await client.close()


def _stderr(line: str) -> None:
    print(f"snapshot: {line}", file=sys.stderr, flush=True)


def snapshot(kubeconfig: str | None, out: TextIO, *, quiet: bool = False) -> int:
    """`kopfsched snapshot`: exit status 0, or 1 with one line on stderr."""
    progress = None if quiet else _stderr

    async def work(client: KubeClusterClient) -> int:
        return await write_snapshot(client, out, progress=progress)

    try:
        written = asyncio.run(_with_client(kubeconfig, work))
    except (StartupError, ClusterError) as exc:
        print(f"reading the cluster: {exc}", file=sys.stderr)  # worded as simulate and explain
        return 1
    if progress is not None:
        progress(f"{written} objects written")
    return 0


def read_cluster(kubeconfig: str | None, *, quiet: bool = False) -> list[dict[str, Any]]:
    """Every object `snapshot` would write, as plain dicts, for explain and simulate without
    files (they load them as they load a snapshot file). Raises ClusterError or StartupError
    when the cluster cannot be read."""
    progress = None if quiet else _stderr

    async def work(client: KubeClusterClient) -> list[dict[str, Any]]:
        objects: list[dict[str, Any]] = []
        async for _, items in list_pages(client, progress=progress):
            objects.extend(items)
        return objects

    return asyncio.run(_with_client(kubeconfig, work))
