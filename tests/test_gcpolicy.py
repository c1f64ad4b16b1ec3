"""The garbage-collector policy (kopfsched.gcpolicy): pauses nest and overlap across threads,
and only a process that is ours freezes what a large input left, so a plugin author's pytest
running `kopfsched.testing.schedule` never ends with a frozen heap."""

from __future__ import annotations

import gc
import threading

import pytest

from kopfsched import gcpolicy
from kopfsched.testing import make_node, make_pod, schedule


@pytest.fixture(autouse=True)
def _nothing_frozen():
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    gc.enable()


def test_pauses_nest_and_the_last_one_resumes_collection():
    with gcpolicy.paused():
        with gcpolicy.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_pause_that_began_with_collection_off_leaves_it_off():
    gc.disable()
    with gcpolicy.paused():
        pass
    assert not gc.isenabled()


def test_a_pause_on_another_thread_keeps_collection_off_until_both_end():
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with gcpolicy.paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with gcpolicy.paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread's pause still holds
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_long_lived_freezes_only_in_a_process_of_ours(monkeypatch):
    monkeypatch.setattr(gcpolicy, "FREEZE_ABOVE", 1000)
    with gcpolicy.long_lived():
        kept = [{"n": i} for i in range(5000)]
    assert gc.get_freeze_count() == 0
    with gcpolicy.owning_the_process(), gcpolicy.long_lived():
        kept += [{"n": i} for i in range(5000)]
    assert gc.get_freeze_count() >= 5000
    assert len(kept) == 10_000


def test_the_testing_helpers_never_freeze_a_plugin_authors_heap(monkeypatch):
    monkeypatch.setattr(gcpolicy, "FREEZE_ABOVE", 0)  # any load at all would be frozen in a process of ours
    result = schedule(nodes=[make_node("n1", cpu="1")],
                      pods=[make_pod("a", requests={"cpu": "1"}), make_pod("b", requests={"cpu": "1"})])
    assert result.placements == {"a": "n1", "b": None}
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
