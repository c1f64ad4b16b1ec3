"""The runtime's PostFilter run, awaited (extender profiles) or not: the same outcome."""

from __future__ import annotations

import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.interface import NodeToStatus, PostFilterResult
from kopfsched.framework.runtime import Framework
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo
from kopfsched.testing import make_handle, make_pod

NOMINATED = PostFilterResult(nominated_node_name="n1")


class Answers:
    """A PostFilter plugin answering as told, or raising."""

    def __init__(self, name: str, answer: tuple | Exception) -> None:
        self.name = name
        self.answer = answer
        self.calls = 0

    def post_filter(self, state, pod, statuses):
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class AwaitedAnswers(Answers):
    async def post_filter_async(self, state, pod, statuses):
        return self.post_filter(state, pod, statuses)


CASES = {
    "a rejection goes on, a success stops": (
        [(None, Status.unschedulable("no")), (NOMINATED, None), (None, None)],
        (NOMINATED, None, None, ""), [1, 1, 0]),
    "an error stops, with no result": (
        [(NOMINATED, Status.unschedulable("no")), (None, Status.as_error("boom")), (None, None)],
        (None, Code.ERROR, "B", "boom"), [1, 1, 0]),
    "an exception is an error of that plugin": (
        [(None, Status.unschedulable("no")), ValueError("bad"), (NOMINATED, None)],
        (None, Code.ERROR, "B", "bad"), [1, 1, 0]),
    "an unresolvable rejection stops": (
        [(None, Status.unschedulable("first")), (NOMINATED, Status.unresolvable("second")), (None, None)],
        (NOMINATED, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "B", "second"), [1, 1, 0]),
    "every plugin rejecting: their reasons, the first rejector, the last result": (
        [(None, Status.unschedulable("first")), (NOMINATED, Status.unschedulable("second")),
         (None, Status.unschedulable("third"))],
        (NOMINATED, Code.UNSCHEDULABLE, "A", "first, second, third"), [1, 1, 1]),
}


def outcome(result: tuple[PostFilterResult | None, Status | None]) -> tuple:
    answer, status = result
    if status is None:
        return answer, None, None, ""
    return answer, status.code, status.plugin, status.message


@pytest.mark.parametrize("awaited", [False, True], ids=["called", "awaited"])
@pytest.mark.parametrize("answers, expected, calls", CASES.values(), ids=CASES.keys())
async def test_post_filter_plugins_in_turn(answers, expected, calls, awaited):
    kind = AwaitedAnswers if awaited else Answers
    plugins = [kind(name, answer) for name, answer in zip("ABC", answers, strict=False)]
    fwk = Framework(profile_name="p", plugins={"postFilter": [(p, 1) for p in plugins]}, handle=make_handle())
    args = (CycleState(), PodInfo(make_pod("p")), NodeToStatus({}))
    result = await fwk.run_post_filter_plugins_async(*args) if awaited else fwk.run_post_filter_plugins(*args)
    assert outcome(result) == expected
    assert [p.calls for p in plugins] == calls
