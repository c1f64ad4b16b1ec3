"""Shared fakes for plugin tests, from kopfsched.testing (the helpers plugin authors use
too): a snapshot over a fixed node list, a recording client, and a Handle built from them."""

from __future__ import annotations

import pytest

from kopfsched.framework.handle import Handle
from kopfsched.testing import FakeSnapshot, RecordingClient, make_handle

__all__ = ["FakeSnapshot", "RecordingClient", "make_handle"]


@pytest.fixture
def fake_handle() -> Handle:
    return make_handle()
