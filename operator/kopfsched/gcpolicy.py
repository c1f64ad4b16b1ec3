"""Garbage-collector policy: the one place that pauses, freezes and thaws Python's cyclic GC.

The scheduler builds large heaps that live as long as the process (the cache of every node
and pod; a snapshot read offline), and the cyclic collector's passes over them were a large
share of the CPU: on 150 000 pods a tenth of the load while reading, and each full collection
traversed the whole cache again. Two tools answer it, used only through this module:

- `paused()`: no collection while a burst of objects that mostly live on is made (an input
  read, a LIST page decoded on kopf's thread). Pauses nest and may overlap across threads:
  collection resumes when the last one ends, if it was on before the first.
- freezing (`gc.freeze`): what such a burst left is moved out of the collector's
  generations, so no full collection traverses it again. Frozen objects are still freed by
  reference counting; only cycles among them stay uncollected until a thaw. So a process
  freezes only when it owns its heap: the operator after its initial listing (thawed when it
  stops), `kopfsched bench` around a measurement, and an offline input read by the
  `kopfsched` command itself (`owning_the_process`). A library user, e.g. a plugin author's
  pytest through `kopfsched.testing`, gets the pauses but never a frozen heap.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

FREEZE_ABOVE = 200_000
"""Objects a `long_lived` block must leave behind for them to be frozen (a few thousand pods)."""

_lock = threading.Lock()
_pauses = 0
_resume = False
_own_process = False


def _pause() -> None:
    global _pauses, _resume
    with _lock:
        if not _pauses:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1


def _unpause() -> None:
    global _pauses
    with _lock:
        _pauses -= 1
        if not _pauses and _resume:
            gc.enable()


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside the block (nested and cross-thread pauses count)."""
    _pause()
    try:
        yield
    finally:
        _unpause()


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """A large input read or built into a cluster: paused inside; when the block left more than
    `FREEZE_ABOVE` new objects behind and the process is ours (`owning_the_process`), they are
    frozen, as the operator does after its initial listing. Otherwise the first collections
    after the block traverse them all again (three passes over the 5 million objects of
    150 000 pods: a sixth of the whole run)."""
    _pause()
    try:
        yield
    finally:
        if _own_process and gc.get_count()[0] > FREEZE_ABOVE:
            gc.freeze()
        _unpause()


@contextlib.contextmanager
def owning_the_process() -> Iterator[None]:
    """The `kopfsched` command's run: `long_lived` blocks may freeze what they leave."""
    global _own_process
    before, _own_process = _own_process, True
    try:
        yield
    finally:
        _own_process = before


def freeze_heap() -> int:
    """Young garbage collected, then every object alive moved out of the collector's
    generations (the operator after its initial listing); the number frozen."""
    gc.collect(1)
    gc.freeze()
    return gc.get_freeze_count()


def thaw() -> None:
    """Frozen objects back in the collector's care (a stopped operator: a process that runs
    operators one after another, the tests, keeps no garbage)."""
    gc.unfreeze()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """`freeze_heap` for the block, thawed after (a bench measurement over a loaded cluster)."""
    freeze_heap()
    try:
        yield
    finally:
        thaw()
