"""ImageLocality: prefer nodes that already hold the pod's images.

Each image found on the node adds its size scaled by how widely it has spread
(nodes with the image / all nodes), which damps the "node heating" of piling pods onto the
few nodes that happen to have a big image. The sum, clamped to [23 MiB, 1000 MiB * number
of images], maps linearly onto 0..100. Images come from init containers, containers and
image volumes; names without a tag get ":latest", as the container runtime reports them.

The batch Score avoids a dict lookup per node and image: for each image name it keeps a
mask of the NodeTable rows holding it, rebuilt only when some node's set of image names
changes (seen through a column of per-node image-set hashes, compared only after a Node
object changed). It relies on the cache
sharing one ImageStateSummary per image name across nodes, so one summary gives the
scaled score of every row that holds the image.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import MAX_NODE_SCORE, SignFragment
from kopfsched.framework.node_table import ColumnSpec, NodeTable
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.types import ImageStateSummary, NodeInfo, PodInfo
from kopfsched.plugins.helper import signers

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
DEFAULT_IMAGE_TAG = "latest"

IMAGE_SET_HASH = ColumnSpec("ImageLocality/imageSetHash", lambda n: hash(frozenset(n.image_states)), np.int64,
                            node_static=True)
"""Changes when a node's set of image names changes (which only a change of its Node object does)."""

IMAGE_COUNT = ColumnSpec("ImageLocality/imageCount", lambda n: len(n.image_states), np.int64, node_static=True)
"""How many images a node holds (node-static, as IMAGE_SET_HASH)."""


@functools.lru_cache(maxsize=4096)
def normalized_image_name(name: str) -> str:
    """Add the default tag when the last path segment has none (digests are left alone)."""
    if name.rfind(":") <= name.rfind("/"):
        return f"{name}:{DEFAULT_IMAGE_TAG}"
    return name


def pod_images(spec: Mapping[str, Any]) -> list[str]:
    """The pod's image references, one per init container, container and image volume."""
    images = [c.get("image") or "" for c in spec.get("initContainers") or ()]
    images += [c.get("image") or "" for c in spec.get("containers") or ()]
    images += [(v.get("image") or {}).get("reference") or "" for v in spec.get("volumes") or () if v.get("image")]
    return images


def scaled_image_score(state: ImageStateSummary, total_num_nodes: int) -> int:
    spread = state.num_nodes / total_num_nodes
    return int(float(state.size) * spread)


def calculate_priority(sum_scores: int, num_images: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_images
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality:
    name = "ImageLocality"

    def __init__(self, args: Any, handle: Handle) -> None:
        self.handle = handle
        self._presence = _PresenceMasks()
        self._imageless: tuple[NodeTable, int, bool] | None = None
        """(table, node_version, whether no node of the table holds an image then)."""

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        """The containers' images (upstream leaves image volumes out of the signature)."""
        spec = pod.spec
        names = {normalized_image_name(c.get("image") or "") for field in ("containers", "initContainers")
                 for c in spec.get(field) or ()}
        return [(signers.IMAGE_NAMES, sorted(names))]

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        images = pod_images(pod.spec)
        total = len(self.handle.snapshot.node_infos())
        image_states = node.image_states
        total_score = 0
        for image in images:
            summary = image_states.get(normalized_image_name(image))
            if summary is not None:
                total_score += scaled_image_score(summary, total)
        return calculate_priority(total_score, len(images))

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        if self._holds_no_images(table):  # every sum is 0, so is every score (a cluster reporting no images)
            return np.zeros(len(rows), dtype=np.int64)
        images = pod_images(pod.spec)
        rows = np.asarray(rows)
        sums = np.zeros(len(rows), dtype=np.int64)
        total = len(self.handle.snapshot.node_infos())
        for image in images:
            name = normalized_image_name(image)
            present, holder = self._presence.lookup(table, name)
            if holder < 0:
                continue  # On no node at all: the usual case.
            mask = present[rows]
            if np.count_nonzero(mask):  # mask.any(), without its Python wrapper
                sums[mask] += scaled_image_score(table.nodes[holder].image_states[name], total)
        if not np.count_nonzero(sums):
            return sums
        max_threshold = MAX_CONTAINER_THRESHOLD * len(images)
        clamped = np.where(sums < MIN_THRESHOLD, MIN_THRESHOLD, np.minimum(sums, max_threshold))
        return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)

    def _holds_no_images(self, table: NodeTable) -> bool:
        """No node of the table holds an image (known per table and node_version: images
        change with Node objects alone)."""
        known = self._imageless
        if known is not None and known[0] is table and known[1] == table.node_version:
            return known[2]
        imageless = not np.count_nonzero(table.column(IMAGE_COUNT))
        self._imageless = (table, table.node_version, imageless)
        return imageless


class _PresenceMasks:
    """Image name -> (mask over all table rows of the nodes holding it, one such row or -1),
    kept while no node's image set changes: checked against the image-set hashes when the
    table's node_version says some Node object may have changed. Bounded: the oldest names
    are dropped first."""

    MAX_NAMES = 512

    def __init__(self) -> None:
        self._masks: dict[str, list] = {}
        """name -> [table, node_version, image-set hashes, mask, holder]."""

    def lookup(self, table: NodeTable, name: str) -> tuple[np.ndarray, int]:
        cached = self._masks.get(name)
        if cached is not None and cached[0] is table:
            if cached[1] == table.node_version:
                return cached[3], cached[4]
            # One table keeps its length; count_nonzero (C) of the differences is np.array_equal
            # for the price of one comparison.
            hashes = table.column(IMAGE_SET_HASH)
            if not np.count_nonzero(cached[2] != hashes):
                cached[1] = table.node_version
                return cached[3], cached[4]
        hashes = table.column(IMAGE_SET_HASH)
        present = np.fromiter((name in n.image_states for n in table.nodes), dtype=bool, count=len(table))
        holders = np.flatnonzero(present)
        holder = int(holders[0]) if len(holders) else -1
        self._masks.pop(name, None)
        if len(self._masks) >= self.MAX_NAMES:
            del self._masks[next(iter(self._masks))]
        self._masks[name] = [table, table.node_version, hashes.copy(), present, holder]
        return present, holder


PLUGIN = PluginFactory(name=ImageLocality.name, factory=ImageLocality)
