"""ClusterFeed: a DELETED of an earlier incarnation must not delete the object known now."""
from __future__ import annotations

from typing import Any

from kopfsched.kube.feed import NODE, ClusterFeed
from tests.builders import make_node
from tests.kube.test_kube_units import RecordingHandlers


def _node(rv: int) -> dict[str, Any]:
    node = make_node('n1')
    node['metadata']['resourceVersion'] = str(rv)
    return node


def test_a_stale_deleted_of_a_node_recreated_under_the_same_name_is_ignored() -> None:
    """Our LIST saw the new node (rv 14) before kopf's stream delivered the old one's DELETED (rv 12)."""
    handlers = RecordingHandlers()
    feed = ClusterFeed(handlers)  # type: ignore[arg-type]
    feed.upsert(NODE, _node(14))
    feed.delete(NODE, _node(12))
    feed.upsert(NODE, _node(14))  # kopf's ADDED of the new node: already known
    assert handlers.calls == [('node', 'n1')]
    assert feed.count(NODE) == 1
