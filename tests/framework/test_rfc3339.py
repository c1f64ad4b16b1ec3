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
