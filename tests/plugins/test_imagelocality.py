import numpy as np
import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.types import ImageStateSummary, NodeInfo, PodInfo
from kopfsched.plugins.imagelocality import PLUGIN, ImageLocality, normalized_image_name
from kopfsched.testing import make_handle
from tests.builders import make_node, make_pod

MB = 1024 * 1024


def with_image_states(*nodes: dict) -> list[NodeInfo]:
    """NodeInfos whose image_states are filled as the cache does: every name of every
    node.status.images entry, sharing one summary (size, num_nodes) per name."""
    infos = [NodeInfo(n) for n in nodes]
    summaries: dict[str, ImageStateSummary] = {}
    for info in infos:
        for image in (info.node or {}).get("status", {}).get("images") or ():
            for name in image["names"]:
                summary = summaries.setdefault(name, ImageStateSummary(size=image["sizeBytes"], num_nodes=0))
                if name not in info.image_states:
                    summary.num_nodes += 1
                info.image_states[name] = summary
    return infos


def node_40_300_2000(name: str = "node1") -> dict:
    return make_node(name, images=[(["gcr.io/40:latest", "gcr.io/40:v1"], 40 * MB),
                                   (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
                                   (["gcr.io/2000:latest"], 2000 * MB)])


def node_250_10(name: str = "node2") -> dict:
    return make_node(name, images=[(["gcr.io/250:latest"], 250 * MB),
                                   (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)])


def node_2000(name: str = "node3") -> dict:
    return make_node(name, images=[(["gcr.io/2000:latest"], 2000 * MB)])


def scores(pod: dict, nodes: list[NodeInfo]) -> list[int]:
    plugin, state, info = ImageLocality(None, make_handle(nodes)), CycleState(), PodInfo(pod)
    per_node = [plugin.score(state, info, n) for n in nodes]
    batch = plugin.score_nodes(state, info, make_handle(nodes).snapshot.table, np.arange(len(nodes)))
    assert batch.tolist() == per_node
    return per_node


def with_init_container(pod: dict, image: str) -> dict:
    pod["spec"]["initContainers"] = [{"name": "init", "image": image}]
    return pod


def with_image_volume(pod: dict, reference: str) -> dict:
    pod["spec"]["volumes"] = [{"name": "data", "image": {"reference": reference}}, {"name": "tmp", "emptyDir": {}}]
    return pod


# Two nodes: each image is on one of them, so its spread is 1/2.
# node1, pod [40, 250]:  40/2 = 20 MB < 23 MB                       -> 0
# node2, pod [40, 250]:  250/2 = 125 MB -> 100 * (125 - 23) / (2000 - 23) = 5
# node1, pod [40, 300]:  (40 + 300) / 2 = 170 MB -> 100 * 147 / 1977 = 7
# node1, pod [2000, 10]: 2000/2 = 1000 MB -> 100 * 977 / 1977 = 49; node2: 10/2 = 5 MB -> 0
@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(images=["gcr.io/40", "gcr.io/250"]), [0, 5], id="prefer-larger-image"),
        pytest.param(make_pod(images=["gcr.io/40", "gcr.io/300"]), [7, 0], id="sum-of-images"),
        pytest.param(make_pod(images=["gcr.io/2000", "gcr.io/10"]), [49, 0], id="large-and-tiny"),
        pytest.param(make_pod(images=["gcr.io/40:v1", "gcr.io/300:v1"]), [7, 0], id="explicit-tags"),
        pytest.param(make_pod(images=["gcr.io/40:v2", "gcr.io/300:v2"]), [0, 0], id="other-tags-absent"),
        pytest.param(with_init_container(make_pod(images=["gcr.io/40"]), "gcr.io/300"), [7, 0],
                     id="init-containers-count"),
        pytest.param(with_image_volume(make_pod(images=["gcr.io/40"]), "gcr.io/300"), [7, 0],
                     id="image-volumes-count"),
        pytest.param(make_pod(images=["busybox", "nginx"]), [0, 0], id="absent-everywhere"),
    ],
)
def test_score_two_nodes(pod: dict, expected: list[int]) -> None:
    assert scores(pod, with_image_states(node_40_300_2000(), node_250_10())) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        # 2000 MB on 2 of 3 nodes: 2000 * 2/3 = 1333 MB, over the 1000 MB limit of one image -> 100.
        pytest.param(make_pod(images=["gcr.io/2000"]), [100, 0, 100], id="capped-at-max-threshold"),
        # With two images the limit is 2000 MB: 100 * (1333.3 - 23) / 1977 = 66.
        pytest.param(make_pod(images=["gcr.io/2000", "gcr.io/none"]), [66, 0, 66], id="limit-scales-with-images"),
    ],
)
def test_score_spread(pod: dict, expected: list[int]) -> None:
    assert scores(pod, with_image_states(node_40_300_2000(), node_250_10(), node_2000())) == expected


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        pytest.param("nginx", "nginx:latest", id="bare"),
        pytest.param("nginx:1.25", "nginx:1.25", id="tagged"),
        pytest.param("gcr.io/foo", "gcr.io/foo:latest", id="registry"),
        pytest.param("registry:5000/foo", "registry:5000/foo:latest", id="registry-port-no-tag"),
        pytest.param("registry:5000/foo:v1", "registry:5000/foo:v1", id="registry-port-tag"),
        pytest.param("foo@sha256:abcd", "foo@sha256:abcd", id="digest"),
    ],
)
def test_normalized_image_name(name: str, normalized: str) -> None:
    assert normalized_image_name(name) == normalized


def test_score_nodes_on_a_subset_of_rows() -> None:
    nodes = with_image_states(node_40_300_2000("a"), node_250_10("b"), node_2000("c"), make_node("d"))
    plugin, state = ImageLocality(None, make_handle(nodes)), CycleState()
    pod = PodInfo(make_pod(images=["gcr.io/2000", "gcr.io/250"]))
    rows = np.array([3, 2, 1])
    expected = [plugin.score(state, pod, nodes[r]) for r in rows]
    assert plugin.score_nodes(state, pod, make_handle(nodes).snapshot.table, rows).tolist() == expected
    # d: nothing. c: 2000 MB on 2 of 4 nodes = 1000 MB -> 100 * 977 / 1977 = 49.
    # b: 250 MB on 1 of 4 nodes = 62.5 MB -> 100 * 39.5 / 1977 = 1.
    assert expected == [0, 49, 1]


def test_factory() -> None:
    assert PLUGIN.name == "ImageLocality"
    assert PLUGIN.args_type is None


def test_score_nodes_follows_image_changes() -> None:
    nodes = with_image_states(node_40_300_2000("a"), node_250_10("b"))
    handle = make_handle(nodes)
    plugin, state = ImageLocality(None, handle), CycleState()
    pod = PodInfo(make_pod(images=["gcr.io/300", "gcr.io/777"]))
    rows = np.arange(2)
    # a: 300 MB on 1 of 2 nodes = 150 MB -> 100 * 127 / 1977 = 6.
    assert plugin.score_nodes(state, pod, handle.snapshot.table, rows).tolist() == [6, 0]
    # Node b pulls both images, as the cache would record it: new dict, shared summaries updated.
    summary_300 = nodes[0].image_states["gcr.io/300:latest"]
    summary_300.num_nodes = 2
    summary_777 = ImageStateSummary(size=900 * MB, num_nodes=1)
    nodes[1].image_states = {**nodes[1].image_states, "gcr.io/300:latest": summary_300,
                             "gcr.io/777:latest": summary_777}
    handle.snapshot.table.refresh([1])
    expected = [plugin.score(state, pod, n) for n in nodes]
    assert plugin.score_nodes(state, pod, handle.snapshot.table, rows).tolist() == expected
    # a: 300 MB on 2 of 2 nodes -> 100 * (300 - 23) / 1977 = 14. b: 300 + 900/2 = 750 MB -> 100 * 727 / 1977 = 36.
    assert expected == [14, 36]


def test_score_nodes_of_nodes_without_images_follows_them_gaining_and_losing_images() -> None:
    """The no-image answer is kept per table and Node refresh: after random image changes the
    batch Score is still the per-node one (zeros while no node holds an image)."""
    import random

    rng = random.Random(7)
    names = ["gcr.io/a:latest", "gcr.io/b:latest", "gcr.io/c:v1"]
    for _ in range(20):
        nodes = with_image_states(*(make_node(f"n{i}") for i in range(6)))
        handle = make_handle(nodes)
        table = handle.snapshot.table
        plugin, state = ImageLocality(None, handle), CycleState()
        summaries = {name: ImageStateSummary(size=rng.choice([10, 300, 900]) * MB, num_nodes=0) for name in names}
        for _ in range(12):
            pod = PodInfo(make_pod(images=rng.sample(["gcr.io/a", "gcr.io/b", "gcr.io/c:v1", "gcr.io/d"], 2)))
            rows = np.array(rng.sample(range(6), rng.randint(1, 6)))
            expected = [plugin.score(state, pod, nodes[r]) for r in rows]
            assert plugin.score_nodes(state, pod, table, rows).tolist() == expected
            if not any(n.image_states for n in nodes):
                assert expected == [0] * len(rows)
            row = rng.randrange(6)  # that node's images change, as the cache records it
            held = rng.sample(names, rng.randint(0, 2)) if rng.random() < 0.5 else []
            for name in nodes[row].image_states:
                summaries[name].num_nodes -= 1
            for name in held:
                summaries[name].num_nodes += 1
            nodes[row].image_states = {name: summaries[name] for name in held}
            table.refresh([row])
