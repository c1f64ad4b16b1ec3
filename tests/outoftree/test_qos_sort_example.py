"""The example out-of-tree package, installed and enabled by name through a profile: the
whole authoring story, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kopfsched import cli
from kopfsched.plugins.registry import full_registry
from tests.outoftree.example import EXAMPLE

pytestmark = pytest.mark.timeout(600)  # pip in subprocesses of its own, each bounded at 300 s

SNAPSHOT = str(EXAMPLE / "examples" / "snapshot.yaml")
PROFILE = str(EXAMPLE / "examples" / "profile.yaml")


def test_the_package_registers_its_plugins_through_entry_points(qos_sort_package):
    registry = full_registry()
    assert registry.problems == []
    for name in ("QoSSort", "QOSSort"):
        factory = registry.get(name)
        assert factory.plugin_type.__module__ == "kopfsched_qos_sort.plugin"
        assert factory.plugin_type.name == name


def test_pip_installs_the_package_from_its_pyproject(qos_sort_package):
    """Never skipped: pip builds it offline with this environment's setuptools."""
    import importlib.metadata

    assert qos_sort_package in ("pip", "environment")
    distribution = importlib.metadata.distribution("kopfsched-qos-sort")
    assert {e.name for e in distribution.entry_points if e.group == "kopfsched.plugins"} == {"QoSSort", "QOSSort"}


def test_validate_accepts_a_profile_enabling_it(qos_sort_package, capsys):
    assert cli.main(["validate", PROFILE]) == cli.EXIT_OK
    assert capsys.readouterr().err == ""


def simulate_json(capsys, *args: str) -> dict:
    assert cli.main(["simulate", SNAPSHOT, *args, "-o", "json"]) == cli.EXIT_OK
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("args", "first", "second"), [
    # The single slot goes to whoever is tried first, so the order decides the outcome.
    pytest.param(("--profile", PROFILE), "guaranteed", "best-effort", id="QoSSort-guaranteed-first"),
    pytest.param((), "best-effort", "guaranteed", id="PrioritySort-older-first"),
])
def test_simulate_orders_equal_priority_pods_by_qos(qos_sort_package, capsys, args, first, second):
    report = simulate_json(capsys, *args)
    assert [(p["name"], p["result"], p["node"]) for p in report["pods"]] == [
        (first, "Scheduled", "node-1"), (second, "Unschedulable", None)]


def test_the_package_own_tests_pass(qos_sort_package):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
