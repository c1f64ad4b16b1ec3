"""ClusterFeed: a DELETED of an earlier incarnation must not delete the object known now; an
object whose handler failed is not known, and is retried."""
from __future__ import annotations

import logging
from typing import Any

import pytest

from kopfsched.kube.feed import NODE, ClusterFeed
from tests.builders import make_node
from tests.fakes import RecordingHandlers


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


class FlakyHandlers:
    """Node handlers that fail for the nodes named in `broken` (a bug of ours, say)."""

    def __init__(self, *broken: str) -> None:
        self.broken = set(broken)
        self.seen: list[tuple[str, str, str | None]] = []

    def _call(self, what: str, node: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        name = node['metadata']['name']
        self.seen.append((what, name, old['metadata']['resourceVersion'] if old else None))
        if name in self.broken:
            raise RuntimeError(f'cannot {what} {name}')

    def on_node_upsert(self, node: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        self._call('upsert', node, old)

    def on_node_delete(self, node: dict[str, Any]) -> None:
        self._call('delete', node)


def _named_node(name: str, rv: int) -> dict[str, Any]:
    node = make_node(name)
    node['metadata']['resourceVersion'] = str(rv)
    return node


def test_an_object_whose_handler_failed_is_not_known_and_is_retried_by_the_next_event(
        caplog: pytest.LogCaptureFixture) -> None:
    handlers = FlakyHandlers('bad')
    feed = ClusterFeed(handlers)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger='kopfsched.kube.feed'):
        feed.upsert(NODE, _named_node('bad', 1))
        feed.upsert(NODE, _named_node('bad', 2))
        feed.upsert(NODE, _named_node('good', 1))
    assert [n['metadata']['name'] for n in feed.known(NODE)] == ['good']
    assert feed.failing() == [(NODE, 'bad')]
    reported = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in reported] == ['failed to handle Node bad; retrying on its next event or relist']
    handlers.broken.clear()
    feed.upsert(NODE, _named_node('bad', 3))  # the retry: still a first sight for the handlers (no old)
    assert handlers.seen[-1] == ('upsert', 'bad', None)
    assert sorted(n['metadata']['name'] for n in feed.known(NODE)) == ['bad', 'good']
    assert feed.failing() == []


def test_a_failed_update_is_retried_by_the_relist_with_the_last_good_version_as_old() -> None:
    handlers = FlakyHandlers()
    feed = ClusterFeed(handlers)  # type: ignore[arg-type]
    feed.upsert(NODE, _named_node('n', 1))
    handlers.broken.add('n')
    feed.upsert(NODE, _named_node('n', 2))
    assert feed.known(NODE)[0]['metadata']['resourceVersion'] == '1'
    handlers.broken.clear()
    token = feed.begin_listing()
    assert feed.reconcile(NODE, [_named_node('n', 2)], token=token) == 0
    assert handlers.seen[-1] == ('upsert', 'n', '1')
    assert feed.known(NODE)[0]['metadata']['resourceVersion'] == '2'


def test_a_failed_deletion_stays_known_and_the_next_relist_deletes_it_again() -> None:
    handlers = FlakyHandlers()
    feed = ClusterFeed(handlers)  # type: ignore[arg-type]
    feed.upsert(NODE, _named_node('n', 1))
    handlers.broken.add('n')
    feed.delete(NODE, _named_node('n', 2))
    assert [n['metadata']['name'] for n in feed.known(NODE)] == ['n']
    handlers.broken.clear()
    token = feed.begin_listing()
    assert feed.reconcile(NODE, [], token=token) == 1
    assert feed.known(NODE) == [] and feed.failing() == []
    assert [what for what, _, _ in handlers.seen] == ['upsert', 'delete', 'delete']
