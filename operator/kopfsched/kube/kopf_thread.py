"""kopf in a thread of its own.

kopf cancels every task created after it started when it exits, and installs its own
signal handlers in the main thread; a binding cancelled half-way would leave an assumed
pod behind. So kopf runs in a thread with its own event loop (what kopf's docs recommend
for embedding), and its watch streams only relay listings and raw events to the scheduler's
loop (the main thread's) through an `Inbox`. The scheduler's tasks are never kopf's to cancel.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
from collections.abc import Callable, Collection
from typing import Any, Generic, TypeVar

import kopf

from kopfsched.kube import kopf_internals
from kopfsched.kube.reachability import describe
from kopfsched.kube.watches import WatchSink

logger = logging.getLogger(__name__)

T = TypeVar("T")

INBOX_BATCH = 500
"""Most items delivered in one go before the loop runs its other work."""


class Inbox(Generic[T]):
    """Items put from any thread, delivered in order in `loop` by `deliver`.

    The loop is woken (call_soon_threadsafe: a write to its self-pipe) at most once per
    iteration of the putting thread's own loop, and only when no wake-up is pending, not per
    item: per watch event, that wake-up cost kopf's thread more than kopf's own processing of
    the event (while listing 50 000 pods, the consumer is idle and each item found it so).

    While items keep coming, the loop does not wait to be woken either: a drain that delivered
    something looks again at the loop's next iteration (a callback, no system call), and only a
    look that finds nothing lets the next item wake the loop. While pods are bound, the
    scheduling loop iterates more often than watch events arrive, so most events are picked up
    by such a look: no self-pipe write in kopf's thread, no read and no wake-up of the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[T], None], *,
                 batch: int = INBOX_BATCH) -> None:
        self._loop = loop
        self._deliver = deliver
        self._batch = batch
        self._items: collections.deque[T] = collections.deque()
        self._wake_pending = False
        """A drain is scheduled (woken, or looking again): a put needs no wake-up."""
        self._flush_pending = False
        self.wakeups = 0
        """Times the loop was woken from another thread (for tests and curiosity)."""

    def put(self, item: T) -> None:
        """From any thread; from a thread running an event loop, the wake-up waits until the
        callbacks that loop has ready have run (they may put more)."""
        self._items.append(item)
        if self._flush_pending or self._wake_pending:
            return  # (a drain that stops looking checks for items after clearing _wake_pending)
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is None or here is self._loop:
            self._wake()
        else:
            self._flush_pending = True
            here.call_soon(self._flush)

    def _flush(self) -> None:
        # In the putting thread: everything put so far is in the deque.
        self._flush_pending = False
        self._wake()

    def _wake(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            self.wakeups += 1
            self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        items, deliver = self._items, self._deliver
        delivered = 0
        while delivered < self._batch:
            try:
                item = items.popleft()
            except IndexError:
                break
            delivered += 1
            try:
                deliver(item)
            except Exception:  # one bad item must not drop the ones behind it
                logger.exception("delivering an item from another thread failed")
        if delivered:  # more left, or more may come: look again after the loop's other ready callbacks
            self._loop.call_soon(self._drain)
            return
        self._wake_pending = False  # nothing came: the next put wakes the loop
        if items:  # put after the look above, while _wake_pending still told it not to wake us
            self._wake_pending = True
            self._loop.call_soon(self._drain)


class Relay:
    """kube.watches' sink in kopf's thread: each call is handed, in order, to the same method of
    `target` (the informer) in the scheduler's loop, through `inbox`; `kind_of` (a lookup in a
    constant table) is answered at once."""

    def __init__(self, inbox: Inbox[tuple[Callable[..., None], tuple[Any, ...]]], target: WatchSink) -> None:
        self._put = inbox.put
        self._target = target
        self.kind_of = target.kind_of

    def served(self, kinds: Collection[str]) -> None:
        self._put((self._target.served, (tuple(kinds),)))

    def listing(self, kind: str) -> None:
        self._put((self._target.listing, (kind,)))

    def event(self, kind: str, type: str | None, obj: dict[str, Any]) -> None:
        self._put((self._target.event, (kind, type, obj)))

    def listed(self, kind: str) -> None:
        self._put((self._target.listed, (kind,)))

    def stopped(self, kind: str) -> None:
        self._put((self._target.stopped, (kind,)))


def call(item: tuple[Callable[..., None], tuple[Any, ...]]) -> None:
    """An Inbox's `deliver` for (function, arguments) items."""
    function, args = item
    function(*args)


STRAGGLER_GRACE = 0.1
"""Seconds kopf's own shutdown gets before the tasks it left behind are cancelled."""
STRAGGLER_REPEAT = 0.5
"""Seconds between further cancellations while kopf has not stopped: a task may swallow one
(asyncio.timeout turns a cancellation that meets its own expiry into TimeoutError, on which
kopf's watch reconnects), and a task kopf starts meanwhile has not seen any."""
STRAGGLERS_CANCELLED = "kopfsched: kopf is stopping"
"""The cancel message of those tasks (what a test can tell them by)."""


GUARDED_TASKS = frozenset({"resource observer", "namespace observer", "multidimensional multitasker",
                           "credentials retriever"})
"""kopf's tasks (kopf._core.reactor.running) whose failure leaves kopf running but watching nothing
more: kopf logs it ("Resource observer has failed") and goes on, deaf."""
GUARD_INTERVAL = 0.5


def _not_the_signal_warning(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("OS signals are ignored")


class KopfThread:
    """kopf.operator in a thread with its own event loop, stopped through a threading.Event.

    Stopping does not wait for kopf's 5-second grace for sub-tasks still running once its
    root tasks ended (kopf's run_tasks): its API discovery runs requests in tasks of
    asyncio.as_completed, which outlive a cancelled observer and then wait for credentials
    the stopped login task never gives; a stop during start-up waited those 5 s. Our
    watch relay only forwards events and keeps nothing in flight, so once kopf had a short grace
    to stop its own way, every task left in its loop is cancelled."""

    def __init__(self, registry: kopf.OperatorRegistry, *, settings: kopf.OperatorSettings) -> None:
        self.registry = registry
        self.settings = settings
        """kopf's settings (kube.handlers.operator_settings: where the watches report and relay)."""
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None
        self.crashed: str | None = None
        """Which of kopf's GUARDED_TASKS failed, and why (one line); kopf itself goes on."""
        self._thread = threading.Thread(target=self._main, name="kopf", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._operator: asyncio.Task[None] | None = None
        self._own: set[asyncio.Task[None] | None] = set()
        self._loop_ready = threading.Event()

    def start(self) -> None:
        # kopf logs every on.event call at INFO: per pod event, that is noise and CPU.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
        # kopf warns that it ignores OS signals when not in the main thread: by design here
        # (the main thread handles SIGTERM/SIGINT and stops kopf), so not worth a warning.
        logging.getLogger(kopf_internals.REACTOR_LOGGER).addFilter(_not_the_signal_warning)
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _main(self) -> None:
        try:
            asyncio.run(self._operate())
        except BaseException as exc:
            self.error = exc
            logger.exception("kopf stopped with an error")
        finally:
            self._loop_ready.set()  # a stop() waiting for the loop must not wait for nothing

    async def _operate(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._operator = asyncio.ensure_future(kopf.operator(
            registry=self.registry, settings=self.settings, clusterwide=True,
            standalone=True, stop_flag=self.stop_flag))
        guard = asyncio.ensure_future(self._guard(self._operator))
        self._own = {asyncio.current_task(), self._operator, guard}
        self._loop_ready.set()
        try:
            await self._operator
        finally:
            guard.cancel()

    async def _guard(self, operator: asyncio.Task[None]) -> None:
        """Notice when one of kopf's GUARDED_TASKS fails (kopf only logs it)."""
        seen: dict[str, asyncio.Task[Any]] = {}
        while not operator.done():
            for task in asyncio.all_tasks():
                name = task.get_name()
                if name in GUARDED_TASKS and name not in seen:
                    seen[name] = task
            for name, task in seen.items():
                if task.done() and not task.cancelled() and (exc := task.exception()) is not None \
                        and not self.stop_flag.is_set():
                    self.crashed = f"kopf's {name} has failed: {describe(exc)}"
                    return
            await asyncio.sleep(GUARD_INTERVAL)

    def _cancel_stragglers(self) -> None:
        """In kopf's loop: cancel every task but kopf.operator's and the one awaiting it, and
        again every STRAGGLER_REPEAT seconds until kopf.operator is done."""
        if self._operator is None or self._operator.done():
            return  # kopf stopped; what runs now is asyncio.run's own shutdown
        for task in asyncio.all_tasks():
            if task not in self._own and not task.done():
                task.cancel(STRAGGLERS_CANCELLED)
        asyncio.get_running_loop().call_later(STRAGGLER_REPEAT, self._cancel_stragglers)

    async def stop(self, timeout: float = 15.0) -> None:
        self.stop_flag.set()
        if not self.started:
            return
        await asyncio.to_thread(self._loop_ready.wait, timeout)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing left to cancel
                loop.call_soon_threadsafe(loop.call_later, STRAGGLER_GRACE, self._cancel_stragglers)
        await asyncio.to_thread(self._thread.join, timeout)


__all__ = ["INBOX_BATCH", "Inbox", "KopfThread", "Relay", "call"]
