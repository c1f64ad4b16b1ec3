"""The upstream oracle, built once per session; without Go the differential tests skip
(one line), except under CI=true, where they must run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.differential.oracle import Oracle, build_oracle_or_skip


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    process = Oracle(build_oracle_or_skip())
    yield process
    process.close()
