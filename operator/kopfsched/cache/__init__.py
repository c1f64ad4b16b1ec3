"""The scheduler's cache of the cluster (nodes, bound and assumed pods, other objects) and
the per-cycle snapshot plugins read."""

from kopfsched.cache.cache import Cache
from kopfsched.cache.snapshot import Snapshot

__all__ = ["Cache", "Snapshot"]
