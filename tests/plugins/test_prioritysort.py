import pytest

from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.prioritysort import PLUGIN, PrioritySort
from tests.builders import make_pod


def queued(priority: int | None, timestamp: float) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo(make_pod(priority=priority)), timestamp=timestamp)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param(queued(100, 2.0), queued(10, 1.0), True, id="higher-priority-first"),
        pytest.param(queued(10, 1.0), queued(100, 2.0), False, id="lower-priority-later"),
        pytest.param(queued(10, 1.0), queued(10, 2.0), True, id="equal-priority-earlier-first"),
        pytest.param(queued(10, 2.0), queued(10, 1.0), False, id="equal-priority-later-second"),
        pytest.param(queued(10, 1.0), queued(10, 1.0), False, id="identical-not-less"),
        pytest.param(queued(None, 1.0), queued(-1, 2.0), True, id="missing-priority-is-zero"),
    ],
)
def test_less(a: QueuedPodInfo, b: QueuedPodInfo, expected: bool) -> None:
    assert PrioritySort(None, None).less(a, b) is expected


def test_factory() -> None:
    assert PLUGIN.name == "PrioritySort"
    assert PLUGIN.args_type is None
    assert PLUGIN.new(None, None).name == "PrioritySort"
