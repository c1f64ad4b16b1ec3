"""Client-side rate limiting (client-go's token bucket: QPS with a burst)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping

from kopfsched.config.types import DEFAULT_BURST, DEFAULT_QPS


class TokenBucket:
    """`qps` tokens per second, at most `burst` saved up; `acquire` waits for one.

    Waiters are served in arrival order: each reserves the next token's time slot, so a
    burst of callers spreads out evenly instead of waking up together."""

    def __init__(self, *, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def reserve(self) -> float:
        """Take a token now: the seconds to wait until it is due (0.0: at once)."""
        self._refill()
        self._tokens -= 1.0  # may go negative: a reservation of a future token
        return -self._tokens / self.qps if self._tokens < 0 else 0.0

    async def wait(self, delay: float) -> None:
        """Sleep `delay` seconds (what `reserve` answered), with the bucket's sleep."""
        await self._sleep(delay)

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay:
            await self._sleep(delay)


def retry_after_seconds(status: int | None, headers: Mapping[str, str] | None) -> float | None:
    """The wait a server asked for, as client-go's checkWait reads it: only on a 429 or a 5xx
    answer, from a Retry-After header of whole seconds (negative or not a number: none). Every
    request path of the kube layer (ours, and kopf's through `reachability`) reads it here."""
    if status is None or not (status == 429 or status >= 500):
        return None
    value = (headers or {}).get("Retry-After")
    try:
        seconds = int(value) if value is not None else None
    except ValueError:
        return None
    return None if seconds is None or seconds < 0 else float(seconds)
