"""Supervised asyncio tasks: each one's failure is logged, never lost, and the set can be
awaited (bindings finishing on shutdown) or cancelled (the operator's loops)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from types import CoroutineType
from typing import Any


class TaskSet:
    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # no loop running: ensure_future finds one, as it always did
            loop = None
        if loop is not None and (type(coro) is CoroutineType or asyncio.iscoroutine(coro)):
            # Every binding and report: named at creation.
            task = loop.create_task(coro, name=name)
        else:
            task = asyncio.ensure_future(coro)
            task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._logger.error("%s failed", task.get_name(), exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    def pending(self) -> int:
        """Tasks not finished yet (a finished task leaves the set on its next loop iteration)."""
        return sum(1 for task in self._tasks if not task.done())

    async def wait(self) -> None:
        """Until every task, including those spawned meanwhile, has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        """Cancel every task and wait until they are gone."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
