"""The runtime's PreBindPreFlight and PreBind runs (v1.37.2's RunPreBindPreFlights and
RunPreBindPlugins with getPreBindPluginGroups): what the preflight answers, which plugins
PreBind then leaves out, and in which groups it runs the others."""

from __future__ import annotations

import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.interface import ALLOW_PARALLEL
from kopfsched.framework.runtime import Framework, _pre_bind_groups
from kopfsched.framework.status import SKIP, Code, Status
from kopfsched.framework.types import PodInfo
from kopfsched.testing import make_handle, make_pod


class PreBind:
    """A PreBind plugin whose PreBindPreFlight answers as told (None: it has none)."""

    def __init__(self, name: str, pre_flight: tuple | Exception | None = None) -> None:
        self.name = name
        self.calls = 0
        if pre_flight is not None:
            self.pre_bind_pre_flight = lambda state, pod, node: self._answer(pre_flight)

    @staticmethod
    def _answer(answer):
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def pre_bind(self, state, pod, node_name):
        self.calls += 1
        return None


def framework(*plugins: PreBind) -> Framework:
    return Framework(profile_name="p", plugins={"preBind": [(p, 1) for p in plugins]}, handle=make_handle())


CASES = {
    # (no group to form when nothing runs: the parallel ones are not recorded)
    "every plugin skips": ([(ALLOW_PARALLEL, SKIP), (None, SKIP)], (Code.SKIP, ""), {"A", "B"}, set()),
    "a Skip of its own is a skip too": ([(None, Status(Code.SKIP, ("later",))), (None, None)], None, {"A"}, set()),
    "one with work is enough": ([(ALLOW_PARALLEL, SKIP), (None, None)], None, {"A"}, {"A"}),
    "a plugin without PreBindPreFlight has work": ([(None, SKIP), None], None, {"A"}, set()),
    "an error stops at once": ([(None, Status.as_error("boom")), (None, None)],
                               (Code.ERROR, 'running PreBindPreFlight "A": boom'), set(), set()),
    "an exception is an error": ([ValueError("bad"), (None, None)],
                                 (Code.ERROR, 'running PreBindPreFlight "A": bad'), set(), set()),
    "any other code is unsupported": ([(None, Status.unschedulable("no"))], (
        Code.ERROR, 'PreBindPreFlight A returned "Unschedulable", which is unsupported. It is supposed to return '
                    "Success, Skip, or Error status"), set(), set()),
}


@pytest.mark.parametrize("answers, expected, skipped, parallel", CASES.values(), ids=CASES.keys())
def test_pre_bind_pre_flights(answers, expected, skipped, parallel):
    fwk = framework(*(PreBind(name, answer) for name, answer in zip("AB", answers, strict=False)))
    state = CycleState()
    status = fwk.run_pre_bind_pre_flights(state, PodInfo(make_pod("p")), "n1")
    assert (None if status is None else (status.code, status.message)) == expected
    assert (set(state.skip_pre_bind_plugins), set(state.parallel_pre_bind_plugins)) == (skipped, parallel)


async def test_pre_bind_leaves_out_the_plugins_whose_preflight_skipped():
    plugins = [PreBind("A", (None, SKIP)), PreBind("B", (None, None)), PreBind("C")]
    fwk = framework(*plugins)
    state = CycleState()
    pod = PodInfo(make_pod("p"))
    assert fwk.run_pre_bind_pre_flights(state, pod, "n1") is None
    assert await fwk.run_pre_bind_plugins(state, pod, "n1") is None
    assert [p.calls for p in plugins] == [0, 1, 1]
    # Without PreBindPreFlight (the gate off) every plugin runs.
    assert await fwk.run_pre_bind_plugins(CycleState(), pod, "n1") is None
    assert [p.calls for p in plugins] == [1, 2, 2]


@pytest.mark.parametrize(("parallel", "skipped", "groups"), [
    pytest.param("", "", ["A", "B", "C", "D"], id="none-parallel"),
    pytest.param("BC", "", ["A", "BC", "D"], id="a-run-of-neighbours"),
    pytest.param("ABD", "", ["AB", "C", "D"], id="broken-by-a-plugin-that-does-not-allow-it"),
    pytest.param("ABC", "B", ["AC", "D"], id="a-skipped-plugin-does-not-break-the-run"),
    pytest.param("BC", "BC", ["A", "D"], id="a-skipped-run-leaves-no-group"),
    pytest.param("", "AD", ["B", "C"], id="skipped-alone"),
])
def test_pre_bind_groups(parallel: str, skipped: str, groups: list[str]):
    plugins = [PreBind(name) for name in "ABCD"]
    got = _pre_bind_groups(plugins, frozenset(skipped), frozenset(parallel))  # type: ignore[arg-type]
    assert ["".join(p.name for p in group) for group in got] == groups
