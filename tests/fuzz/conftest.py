"""Hypothesis settings of the fuzz tests: a bounded run in the suite (`ci`), longer runs by
`python -m tests.fuzz.run --minutes N` (profile `long`, KOPFSCHED_FUZZ_EXAMPLES examples per
parser). Every example must finish within the deadline: a parser that takes unbounded time on
a small input fails here, as does one that raises anything but its documented error."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=75, deadline=10_000, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=int(os.environ.get("KOPFSCHED_FUZZ_EXAMPLES", "20000")),
                          deadline=10_000, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("KOPFSCHED_FUZZ_PROFILE", "ci"))
