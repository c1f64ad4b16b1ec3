"""kopf in a thread of its own.

kopf cancels every task created after it started when it exits, and installs its own
signal handlers in the main thread; a binding cancelled half-way would leave an assumed
pod behind. So kopf runs in a thread with its own event loop (what kopf's docs recommend
for embedding), and its on.event handlers only forward raw events to the scheduler's loop
(the main thread's). The scheduler's tasks are never kopf's to cancel.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import kopf

from kopfsched.kube.handlers import operator_settings
from kopfsched.kube.watches import WatchHealth

logger = logging.getLogger(__name__)


class KopfThread:
    """kopf.operator in a thread with its own event loop, stopped through a threading.Event."""

    def __init__(self, registry: kopf.OperatorRegistry, *, watch_health: WatchHealth | None = None) -> None:
        self.registry = registry
        self.watch_health = watch_health
        """Where kopf's watches report their failures; with it, they back off instead of stopping kopf."""
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="kopf", daemon=True)

    def start(self) -> None:
        # kopf logs every on.event call at INFO: per pod event, that is noise and CPU.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _main(self) -> None:
        try:
            asyncio.run(kopf.operator(registry=self.registry, settings=operator_settings(self.watch_health),
                                      clusterwide=True, standalone=True, stop_flag=self.stop_flag))
        except BaseException as exc:
            self.error = exc
            logger.exception("kopf stopped with an error")

    async def stop(self, timeout: float = 15.0) -> None:
        self.stop_flag.set()
        if self.started:
            await asyncio.to_thread(self._thread.join, timeout)


__all__ = ["KopfThread"]
