"""The profile set and hot reload: what survives a reload, and what it does to queued pods."""

from __future__ import annotations

from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.registry import PluginFactory, Registry
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.registry import in_tree_registry
from tests.builders import make_node, make_pod
from tests.harness import Harness, profile_from_spec

EXTENDER = {"urlPrefix": "http://127.0.0.1:1/ext", "filterVerb": "filter"}
OTHER_EXTENDER = {"urlPrefix": "http://127.0.0.1:1/other", "filterVerb": "filter"}


def profiles(h: Harness, **specs: dict) -> list:
    return [profile_from_spec({"schedulerName": name, **spec}, h.registry, name=name) for name, spec in specs.items()]


def where(h: Harness, name: str) -> str | None:
    return h.scheduler.queue.where(PodInfo(h.client.pods[f"default/{name}"]).uid)


async def test_unchanged_profile_keeps_its_framework_and_a_changed_one_is_rebuilt():
    h = Harness([make_node("n1")], profiles=[])
    h.scheduler.set_profiles(profiles(h, a={}, b={}))
    a, b = h.scheduler.profiles["a"], h.scheduler.profiles["b"]

    changed = h.scheduler.profiles.replace(profiles(h, a={}, b={"percentageOfNodesToScore": 50}, c={}))

    assert changed == {"b"}  # c is new, not changed
    assert h.scheduler.profiles["a"] is a
    assert h.scheduler.profiles["b"] is not b
    assert h.scheduler.profiles["b"].framework.percentage_of_nodes_to_score == 50
    assert list(h.scheduler.profiles) == ["a", "b", "c"]


async def test_pods_of_a_removed_name_leave_the_queue_and_come_back_with_it():
    h = Harness([make_node("n1", cpu="1")], profiles=[])
    h.scheduler.set_profiles(profiles(h, a={}, b={}))
    h.add_pods(make_pod("pa", scheduler_name="a", requests={"cpu": "2"}),
               make_pod("pb", scheduler_name="b", requests={"cpu": "2"}))

    h.scheduler.set_profiles(profiles(h, a={}))

    assert (where(h, "pa"), where(h, "pb")) == ("active", None)
    assert [p.name for p in h.scheduler.unmanaged] == ["pb"]
    assert not h.scheduler.profiles.responsible_for(PodInfo(h.client.pods["default/pb"]))
    assert h.scheduler.profiles.framework_for(PodInfo(h.client.pods["default/pb"])) is None

    h.scheduler.set_profiles(profiles(h, a={}, b={}))

    assert where(h, "pb") == "active"
    assert len(h.scheduler.unmanaged) == 0


async def test_pods_of_a_changed_profile_are_retried_at_once_others_wait():
    h = Harness([make_node("n1", cpu="1")], profiles=[])
    h.scheduler.set_profiles(profiles(h, a={}, b={}))
    h.add_pods(make_pod("pa", scheduler_name="a", requests={"cpu": "2"}),
               make_pod("pb", scheduler_name="b", requests={"cpu": "2"}))
    await h.settle(advance=False)
    assert (where(h, "pa"), where(h, "pb")) == ("unschedulable", "unschedulable")

    h.scheduler.set_profiles(profiles(h, a={}, b={"percentageOfNodesToScore": 50}))

    assert (where(h, "pa"), where(h, "pb")) == ("unschedulable", "active")


async def test_extender_clients_are_shared_kept_across_reloads_and_released_when_unused():
    h = Harness([make_node("n1")], profiles=[])
    h.scheduler.set_profiles(profiles(h, a={"extenders": [EXTENDER]}, b={"extenders": [EXTENDER]}))
    [client] = h.scheduler.profiles["a"].extenders
    assert h.scheduler.profiles["b"].extenders == (client,)
    assert h.scheduler.profiles["a"].framework.handle.extenders == (client,)

    h.scheduler.set_profiles(profiles(h, a={"extenders": [EXTENDER]}, b={"extenders": [EXTENDER, OTHER_EXTENDER]}))
    assert h.scheduler.profiles["b"].extenders[0] is client  # b rebuilt, its first extender's client kept

    h.scheduler.set_profiles(profiles(h, c={}))
    h.scheduler.set_profiles(profiles(h, a={"extenders": [EXTENDER]}))
    assert h.scheduler.profiles["a"].extenders[0] is not client  # released meanwhile: a new client
    await h.scheduler.shutdown()


class FIFO:
    """A QueueSort by queue time alone."""
    name = "FIFO"

    def __init__(self, args: object = None, handle: object = None) -> None:
        pass

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


async def test_queue_sort_is_the_profiles_queue_sort_plugin():
    h = Harness([make_node("n1")], profiles=[],
                registry=in_tree_registry().merged(Registry({"FIFO": PluginFactory(name="FIFO", factory=FIFO)})))
    low = QueuedPodInfo(PodInfo(make_pod("low", priority=1)), timestamp=1.0)
    high = QueuedPodInfo(PodInfo(make_pod("high", priority=5)), timestamp=2.0)
    assert h.scheduler.profiles.less(high, low)  # the default profile: PrioritySort

    fifo = {"queueSort": {"disabled": [{"name": "*"}], "enabled": [{"name": "FIFO"}]}}
    h.scheduler.set_profiles(profiles(h, a={"plugins": fifo}))
    assert h.scheduler.profiles.less(low, high)

    h.scheduler.set_profiles(profiles(h, a={}))
    assert h.scheduler.profiles.less(high, low)
