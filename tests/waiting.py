"""Waiting without hanging: every loop a test spins on has a deadline, so a bug that never
satisfies it fails the test with what it waited for, instead of hanging the suite."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar('T')


async def until(condition: Callable[[], object], *, what: str, timeout: float = 10.0, interval: float = 0.0) -> None:
    """Yield to the loop (sleeping `interval`) until `condition()` is true; fail after `timeout`
    seconds of real time. With interval 0 a fake-clock test runs at full speed."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out after {timeout}s waiting for {what}')
        await asyncio.sleep(interval)


def drain(pop: Callable[[], T | None], *, limit: int = 10_000) -> Iterator[T]:
    """What `pop()` gives until it gives None; fails when it gives more than `limit`."""
    for _ in range(limit):
        item = pop()
        if item is None:
            return
        yield item
    raise AssertionError(f'{pop} still gave items after {limit}')
