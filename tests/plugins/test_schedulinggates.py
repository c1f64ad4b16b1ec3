import pytest

from kopfsched.framework.events import ActionType, EventResource, QueueingHint
from kopfsched.framework.status import Code
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.schedulinggates import PLUGIN, SchedulingGates
from tests.builders import make_pod


@pytest.mark.parametrize(
    ("gates", "reason"),
    [
        pytest.param(None, None, id="no-gates"),
        pytest.param([], None, id="empty-gates"),
        pytest.param(["foo"], "waiting for scheduling gates: [foo]", id="one-gate"),
        pytest.param(["foo", "bar"], "waiting for scheduling gates: [foo bar]", id="two-gates-in-order"),
    ],
)
def test_pre_enqueue(gates: list[str] | None, reason: str | None) -> None:
    pod = make_pod(scheduling_gates=gates)
    if gates == []:
        pod["spec"]["schedulingGates"] = []
    status = SchedulingGates(None, None).pre_enqueue(PodInfo(pod))
    if reason is None:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (reason,)


def test_events_to_register() -> None:
    (registration,) = SchedulingGates(None, None).events_to_register()
    assert registration.event.resource is EventResource.POD
    assert registration.event.action == ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
    assert registration.hint is not None
    assert registration.hint(make_pod(), make_pod(), make_pod()) is QueueingHint.QUEUE


def test_factory() -> None:
    assert PLUGIN.name == "SchedulingGates"
    assert PLUGIN.args_type is None
