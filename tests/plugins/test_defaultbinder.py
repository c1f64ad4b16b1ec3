import pytest

from kopfsched.framework.client import ConflictError
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.status import Code
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.defaultbinder import PLUGIN, DefaultBinder
from kopfsched.testing import RecordingClient, make_handle
from tests.builders import make_pod


async def test_bind_posts_binding() -> None:
    client = RecordingClient()
    binder = DefaultBinder(None, make_handle(client=client))
    status = await binder.bind(CycleState(), PodInfo(make_pod("web", "prod")), "node-1")
    assert status is None
    assert client.bindings == [("prod/web", "node-1")]


@pytest.mark.parametrize(
    "error",
    [pytest.param(ConflictError("pod already bound"), id="conflict"), pytest.param(RuntimeError("boom"), id="other")],
)
async def test_bind_failure_is_an_error_status_with_the_cause(error: Exception) -> None:
    binder = DefaultBinder(None, make_handle(client=RecordingClient(fail_with=error)))
    status = await binder.bind(CycleState(), PodInfo(make_pod()), "node-1")
    assert status is not None
    assert status.code is Code.ERROR
    assert status.error is error
    assert status.reasons == (str(error),)


def test_factory() -> None:
    assert PLUGIN.name == "DefaultBinder"
    assert PLUGIN.args_type is None
