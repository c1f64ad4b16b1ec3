"""One RFC 3339 writer (framework.types.rfc3339) for every timestamp the scheduler writes:
profile status, /debug/pending, conditions, preemption's DisruptionTarget, snapshot headers.
metav1.Time truncates to whole seconds; parse_time reads it back."""

from __future__ import annotations

import pytest

from kopfsched.framework.types import parse_time, rfc3339


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0, "1970-01-01T00:00:00Z"),
    (1767225599.999, "2025-12-31T23:59:59Z"),  # truncated, never rounded up into the next second
    (1767225600.0, "2026-01-01T00:00:00Z"),
])
def test_rfc3339_truncates_to_whole_seconds_and_reads_back(seconds, text):
    assert rfc3339(seconds) == text
    assert parse_time(text) == float(int(seconds))


def test_rfc3339_formats_as_strftime_whatever_it_formatted_before():
    """rfc3339 keeps the last whole second's text: every answer is still strftime's of gmtime's."""
    import random
    import time

    rng = random.Random(7)
    for _ in range(2000):
        seconds = rng.choice([rng.uniform(-1e6, 2e9), float(rng.randint(-5, 5)), rng.randint(0, 3) + 0.999999,
                              -rng.random()])
        assert rfc3339(seconds) == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds)), seconds


def test_rfc3339_without_seconds_is_now(monkeypatch):
    # A fixed clock: gmtime() without an argument reads C's time(), rfc3339 time.time(), two
    # clocks that may disagree at a second's boundary.
    import kopfsched.framework.types as types

    monkeypatch.setattr(types.time, "time", lambda: 1767225600.75)
    assert rfc3339() == "2026-01-01T00:00:00Z"
    monkeypatch.setattr(types.time, "time", lambda: 1767225601.0)
    assert rfc3339() == "2026-01-01T00:00:01Z"
