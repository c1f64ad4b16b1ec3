"""The upstream oracle, built once per session; without Go the differential tests skip
(one line), except under CI=true, where they must run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.differential.oracle import Oracle, OracleUnavailable, build_oracle


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    try:
        binary = build_oracle()
    except OracleUnavailable as err:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(err))
    process = Oracle(binary)
    yield process
    process.close()
