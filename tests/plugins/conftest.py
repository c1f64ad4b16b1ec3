"""Fixtures of the plugin tests. The fakes themselves are kopfsched.testing's (the ones plugin
authors use): a snapshot over a fixed node list, object lister, recording client, Handle."""

from __future__ import annotations

import pytest

from kopfsched.framework.handle import Handle
from kopfsched.testing import make_handle


@pytest.fixture
def fake_handle() -> Handle:
    return make_handle()
