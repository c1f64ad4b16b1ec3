"""Activity (throughput and latency per 10 s) and the dashboard's view of the cache and queue."""

from __future__ import annotations

from kopfsched.cache import Cache
from kopfsched.framework.types import PodInfo
from kopfsched.scheduler import view
from kopfsched.scheduler.activity import Activity
from kopfsched.scheduler.observer import Attempt
from tests.builders import make_node, make_pod
from tests.harness import Harness


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def attempt(name: str, result: str, seconds: float, node: str = "") -> Attempt:
    return Attempt(pod=PodInfo(make_pod(name, uid=name)), profile="p", result=result, seconds=seconds, node=node)


def test_attempts_per_bucket_with_quantiles_and_the_latest_bindings():
    clock = Clock(1000.0)
    activity = Activity(clock=clock, window_buckets=3)
    for i, seconds in enumerate((0.0015, 0.003, 0.003, 0.1)):
        activity.attempted(attempt(f"a{i}", "scheduled", seconds, node="n1"))
    activity.attempted(attempt("u", "unschedulable", 0.0005))
    clock.now = 1021.0
    activity.attempted(attempt("e", "error", 0.02))
    data = activity.to_json()
    assert [(b["start"], b["scheduled"], b["unschedulable"], b["error"], b["p50Ms"], b["p99Ms"])
            for b in data["series"]] == [
        (1000, 4, 1, 0, 4.0, 128.0),  # 5 attempts: <=1, <=2, <=4, <=4, <=128 ms
        (1010, 0, 0, 0, None, None),
        (1020, 0, 0, 1, 32.0, 32.0),
    ]
    assert [b["pod"] for b in data["bindings"]] == ["default/a3", "default/a2", "default/a1", "default/a0"]
    clock.now = 1100.0  # the window moved on: the old buckets are gone
    assert all(b["scheduled"] == b["error"] == 0 for b in activity.to_json()["series"])


def zone(name: str) -> dict[str, str]:
    return {"topology.kubernetes.io/zone": name}


def cache_with_nodes() -> Cache:
    cache = Cache()
    cache.add_node(make_node("a1", cpu="4", memory="8Gi", labels=zone("a")))
    cache.add_node(make_node("a2", cpu="4", memory="8Gi", labels=zone("a")))
    cache.add_node(make_node("b1", cpu="2", memory="4Gi", labels=zone("b")))
    cache.add_node(make_node("x", cpu="1", memory="1Gi"))
    cache.add_pod(make_pod("p1", uid="p1", node_name="a1", requests={"cpu": "3", "memory": "1Gi"}))
    cache.add_pod(make_pod("p2", uid="p2", node_name="b1", requests={"cpu": "500m", "memory": "3Gi"}))
    return cache


async def test_node_utilization_per_node_grouped_by_zone():
    data = await view.node_utilization(cache_with_nodes())
    assert (data["nodes"], data["aggregated"], data["busiest"]) == (4, False, [])
    assert [(z["zone"], z["nodes"], z["cpu"], z["pods"][0]) for z in data["zones"]] == [
        ("(no zone)", 1, [0, 1000], 0), ("a", 2, [3000, 8000], 1), ("b", 1, [500, 2000], 1)]
    a = data["zones"][1]
    assert [(r["name"], r["cpu"], r["memory"][0]) for r in a["rows"]] == [
        ("a1", [3000, 4000], 2**30), ("a2", [0, 4000], 0)]
    assert a["cpuHistogram"] == [1, 0, 0, 0, 0, 0, 0, 1, 0, 0]


async def test_node_utilization_aggregates_beyond_the_row_limit():
    data = await view.node_utilization(cache_with_nodes(), rows_limit=3)
    assert data["aggregated"] is True
    assert all("rows" not in z for z in data["zones"])
    # Busiest by the larger of CPU and memory use: b1 (75% memory), a1 (75% CPU); ties by name.
    assert [n["name"] for n in data["busiest"]] == ["a1", "b1", "a2", "x"]


async def test_queue_depths_per_scheduler_name_and_the_pending_document():
    h = Harness([make_node("small", cpu="1")])
    h.add_pods(make_pod("big", requests={"cpu": "2"}), make_pod("gated", scheduling_gates=["wait"]))
    await h.settle()
    depths = await view.queue_depths(h.scheduler)
    assert depths["*"] == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 1}
    assert depths["default-scheduler"] == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 1}
    body = await view.pending_body(h.scheduler.pending)
    assert body.startswith(b'{"pods":[{"namespace":"default","name":"big",')
    summary = view.pending_summary(h.scheduler.pending)
    assert (summary["total"], [p["name"] for p in summary["pods"]]) == (1, ["big"])
    assert view.pending_pod(h.scheduler.pending, "default", "big")["filter"]["small"]["reasons"] == [
        "Insufficient cpu"]
    assert view.pending_pod(h.scheduler.pending, "default", "gated") is None  # never attempted


async def test_the_dashboards_pending_list_has_gated_pods_with_the_api_servers_condition():
    h = Harness([make_node("small", cpu="1")])
    h.add_pods(make_pod("big", requests={"cpu": "2"}), make_pod("gated", scheduling_gates=["example.com/quota"]))
    await h.settle()
    summary = view.pending_summary(h.scheduler.pending, gated=h.scheduler.queue.gated_pods())
    assert summary["total"] == 2
    [big, gated] = summary["pods"]
    assert big["name"] == "big"
    assert (gated["name"], gated["result"], gated["message"], gated["gates"], gated["attempts"]) == (
        "gated", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates", ["example.com/quota"], 0)
    overview = await view.overview(h.scheduler, Activity(), h.scheduler.cache)
    assert [p["name"] for p in overview["pending"]["pods"]] == ["big", "gated"]


async def test_node_rows_name_their_taints_and_extended_resources():
    cache = Cache()
    cache.add_node(make_node("gpu", extended={"nvidia.com/gpu": "8"},
                             taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                                     {"key": "spot", "effect": "PreferNoSchedule"}]))
    cache.add_node(make_node("plain"))
    cache.add_pod(make_pod("trainer", uid="trainer", node_name="gpu", requests={"nvidia.com/gpu": "2"}))
    rows = {r["name"]: r for z in (await view.node_utilization(cache))["zones"] for r in z["rows"]}
    assert rows["gpu"]["taints"] == ["dedicated=gpu:NoSchedule", "spot:PreferNoSchedule"]
    assert rows["plain"]["taints"] == []
    assert (rows["gpu"]["extended"], rows["plain"]["extended"]) == ({"nvidia.com/gpu": [2, 8]}, {})
