"""HTTPExtender on its own: which pods interest it, and the preempt verb's JSON."""

from __future__ import annotations

import pytest

from kopfsched.config.types import ExtenderConfig, ExtenderManagedResource
from kopfsched.framework.types import PodInfo
from kopfsched.scheduler.extender import ExtenderError, HTTPExtender, Victims
from tests.builders import make_node, make_pod, node_info

from .conftest import FakeExtender

FOO = (ExtenderManagedResource("example.com/foo"),)


@pytest.mark.parametrize("managed, pod, interested", [
    pytest.param((), make_pod("p"), True, id="no-managed-resources-means-all"),
    pytest.param(FOO, make_pod("p", requests={"cpu": "1"}), False, id="other-resources"),
    pytest.param(FOO, make_pod("p", requests={"example.com/foo": "1"}), True, id="request"),
    pytest.param(FOO, make_pod("p", init_requests=[{"example.com/foo": "1"}]), True, id="init-container"),
])
def test_is_interested(managed, pod, interested):
    extender = HTTPExtender(ExtenderConfig(url_prefix="http://x", managed_resources=managed))
    assert extender.is_interested(PodInfo(pod)) is interested


@pytest.mark.parametrize("cache_capable", [pytest.param(False, id="victims"), pytest.param(True, id="meta-victims")])
async def test_preempt_sends_victims_and_reads_back_meta_victims(extender: FakeExtender, cache_capable):
    victim = make_pod("v", node_name="n1", uid="uid-v")
    node = node_info(make_node("n1"), victim)
    extender.on("preempt", lambda body: {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uid-v"}],
                                                                          "NumPDBViolations": 1}}})
    http = HTTPExtender(ExtenderConfig(url_prefix=extender.url, preempt_verb="preempt",
                                       node_cache_capable=cache_capable))
    try:
        result = await http.process_preemption(PodInfo(make_pod("p")), {"n1": Victims([PodInfo(victim)])},
                                               {"n1": node})
    finally:
        await http.close()
    [body] = extender.bodies("preempt")
    if cache_capable:
        assert (body["NodeNameToVictims"], body["NodeNameToMetaVictims"]) == (
            None, {"n1": {"Pods": [{"UID": "uid-v"}], "NumPDBViolations": 0}})
    else:
        assert body["NodeNameToMetaVictims"] is None
        assert body["NodeNameToVictims"]["n1"]["Pods"][0]["metadata"]["uid"] == "uid-v"
    assert [(v.uid, result["n1"].num_pdb_violations) for v in result["n1"].pods] == [("uid-v", 1)]


async def test_preempt_rejects_victims_not_on_the_node(extender: FakeExtender):
    extender.on("preempt", lambda body: {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "ghost"}]}}})
    http = HTTPExtender(ExtenderConfig(url_prefix=extender.url, preempt_verb="preempt"))
    try:
        with pytest.raises(ExtenderError, match=r"claims to preempt pod \(UID: ghost\) on node: n1"):
            await http.process_preemption(PodInfo(make_pod("p")), {}, {"n1": node_info(make_node("n1"))})
    finally:
        await http.close()

