"""Waiting on asyncio events with a deadline: the operator's loops sleep through these so a
stop flag ends them at once instead of after their interval."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any


async def wait_any(*events: asyncio.Event) -> None:
    """Until one of the events is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep up to `seconds`; True when `stop` was set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    return stop.is_set()


async def sleep_or(stop: asyncio.Event, seconds: float, wake: asyncio.Event) -> None:
    """Sleep up to `seconds`, less when `stop` or `wake` is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wait_any(stop, wake), timeout=seconds)


async def first(acquire: Coroutine[Any, Any, bool], stop: asyncio.Event, lost: asyncio.Event) -> bool:
    """Run `acquire` until it returns, or until `lost` is set: then set `stop` (which
    `acquire` must honour), wait for it and return False."""
    task = asyncio.ensure_future(acquire)
    waiter = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if not task.done():
        stop.set()
        await task
        return False
    return task.result()


__all__ = ["first", "sleep_or", "stopped_within", "wait_any"]
