"""CEL device selectors (DeviceClasses and claims) and HTTP extenders' answers, fuzzed: a
selector that does not compile or fails on a device is a CELError; any JSON an extender answers
is a result or an ExtenderError."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from kopfsched.config.types import ExtenderConfig
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.dynamicresources.cel import CELError, compile_expression, device_variable
from kopfsched.scheduler.extender import ExtenderError, HTTPExtender, Victims
from tests.builders import make_node, make_pod, node_info
from tests.fuzz.strategies import json_values

ATOMS = st.sampled_from([
    "device", "device.driver", 'device.attributes["gpu.example.com"].model',
    "device.capacity['gpu.example.com'].memory",
    'quantity("40Gi")', 'semver("1.2.3")', '"a"', "1", "1.5", "true", "null", "[1, 2]", "{'a': 1}", "size(device)",
    '"x".lowerAscii()', 'quantity("1").isGreaterThan(quantity("2"))', 'semver("1.0.0").major()', "device.nope",
    'quantity("bad")', 'semver("x")', "1 / 0", "9223372036854775807 + 1",
])
OPERATORS = st.sampled_from([" == ", " != ", " && ", " || ", " < ", " >= ", " + ", " in ", ".", "(", ")", "[", "]",
                             " ? ", " : ", "!", "-"])


def expressions() -> st.SearchStrategy[str]:
    return st.one_of(st.text(max_size=40), st.lists(st.one_of(ATOMS, OPERATORS), min_size=1, max_size=8).map("".join))


DEVICE = {"attributes": {"model": {"string": "a100"}, "gpu.example.com/version": {"version": "1.2.3"},
                         "count": {"int": 4}, "ok": {"bool": True}},
          "capacity": {"memory": {"value": "40Gi"}}}


@given(expressions(), st.dictionaries(st.sampled_from(["attributes", "capacity"]),
                                      st.dictionaries(st.text(max_size=8), json_values(4), max_size=3), max_size=2))
@example('device.attributes["gpu.example.com"].model == "a100"', DEVICE)
@example("[" * 10000, DEVICE)
@example("1" + " + 1" * 5000 + " == 2", DEVICE)
def test_cel_selectors(source, raw_device):
    try:
        expression = compile_expression(source)
    except CELError:
        return
    try:
        device = device_variable("gpu.example.com", raw_device)
    except (CELError, ValueError):
        return  # the device's own quantities are checked where the slice is read
    with contextlib.suppress(CELError):
        expression.matches(device)


NODES = [node_info(make_node("n1")), node_info(make_node("n2"))]
POD = PodInfo(make_pod("p"))


class Scripted(HTTPExtender):
    """An extender whose `_send` answers `answer` (the transport is tested in tests/extender)."""

    def __init__(self, answer: Any, *, node_cache_capable: bool) -> None:
        super().__init__(ExtenderConfig(url_prefix="http://x", filter_verb="f", prioritize_verb="p", bind_verb="b",
                                        preempt_verb="e", weight=1, node_cache_capable=node_cache_capable))
        self.answer = answer

    async def _send(self, verb: str, args: Any) -> Any:
        return self.answer


def answers() -> st.SearchStrategy[Any]:
    names = st.sampled_from(["n1", "n2", "n3", ""])
    return st.one_of(json_values(20), st.fixed_dictionaries({}, optional={
        "NodeNames": st.one_of(st.lists(names, max_size=3), json_values(3)),
        "Nodes": st.one_of(st.fixed_dictionaries({"Items": st.lists(st.one_of(
            st.fixed_dictionaries({"metadata": st.fixed_dictionaries({"name": names})}), json_values(3)),
            max_size=3)}), json_values(3)),
        "FailedNodes": json_values(3), "Error": json_values(2),
        "NodeNameToMetaVictims": st.one_of(st.dictionaries(names, st.fixed_dictionaries({}, optional={
            "Pods": st.one_of(st.lists(st.fixed_dictionaries({"UID": json_values(2)}), max_size=2), json_values(2)),
            "NumPDBViolations": json_values(2)}), max_size=2), json_values(3))}),
        st.lists(st.fixed_dictionaries({}, optional={"Host": json_values(2), "Score": json_values(2)}), max_size=3))


@given(answers(), st.booleans())
def test_extender_answers(answer, node_cache_capable):
    extender = Scripted(answer, node_cache_capable=node_cache_capable)

    async def every_verb() -> None:
        for call in (lambda: extender.filter(POD, NODES), lambda: extender.prioritize(POD, NODES),
                     lambda: extender.bind(POD, "n1"),
                     lambda: extender.process_preemption(POD, {"n1": Victims([])}, {"n1": NODES[0]})):
            with contextlib.suppress(ExtenderError):
                await call()

    asyncio.run(every_verb())
