"""Every code block of docs/writing-plugins.md runs here, so the guide cannot rot.

Python blocks are files: a block whose first line is `# <name>.py` starts one, later blocks
without such a line continue it. The plugin module is imported and the guide's own test
file is run with pytest; YAML profiles are checked with the guide's plugin registered; the
TOML entry point must load the plugin; `kopfsched` console commands must succeed.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tomllib

import pytest
import yaml

from kopfsched import cli
from kopfsched.config.parse import parse_scheduler_profile
from kopfsched.framework import Registry
from kopfsched.plugins.entry_points import ENTRY_POINT_GROUP, as_factory
from kopfsched.plugins.registry import full_registry

GUIDE = pathlib.Path(__file__).parents[2] / "docs" / "writing-plugins.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(GUIDE.read_text()) if lang == language]


def python_files() -> dict[str, str]:
    files: dict[str, str] = {}
    current = None
    for body in blocks("python"):
        first = body.splitlines()[0]
        if re.fullmatch(r"# [\w/]+\.py", first):
            current = first[2:]
            files[current] = ""
        assert current is not None, "the guide's first Python block must name its file"
        files[current] += body + "\n"
    return files


@pytest.fixture(scope="module")
def guide_dir(tmp_path_factory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("guide")
    for name, text in python_files().items():
        (directory / name).write_text(text)
    return directory


@pytest.fixture(scope="module")
def guide_module(guide_dir):
    sys.path.insert(0, str(guide_dir))
    try:
        yield importlib.import_module("node_label_preference")
    finally:
        sys.path.remove(str(guide_dir))
        sys.modules.pop("node_label_preference", None)


def test_the_guide_has_the_files_it_promises():
    assert sorted(python_files()) == ["node_label_preference.py", "test_node_label_preference.py"]


def test_the_guide_tests_pass(guide_dir):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(guide_dir), *(p for p in sys.path if p)])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(guide_dir), "test_node_label_preference.py"],
                          cwd=guide_dir, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b11 passed\b", done.stdout), done.stdout


def test_the_custom_column_reads_one_number_per_node(guide_module):
    from kopfsched.framework import NodeTable
    from kopfsched.testing import make_pod, node_info
    from tests.builders import make_node
    table = NodeTable([node_info(make_node("a", pods=3), make_pod("p")), node_info(make_node("b", pods=5))])
    assert table.column(guide_module.FREE_PODS).tolist() == [2, 5]


def test_the_guide_profiles_are_valid(guide_module):
    registry = full_registry().merged(Registry({"NodeLabelPreference": guide_module.PLUGIN}))
    profiles = [yaml.safe_load(body) for body in blocks("yaml")]
    assert profiles
    for profile in profiles:
        config, problems = parse_scheduler_profile(profile, registry)
        assert problems == []
        assert config.plugin_args["NodeLabelPreference"].preferredValues == ("gold", "silver")


def test_the_guide_entry_point_loads_the_plugin(guide_module):
    (toml,) = blocks("toml")
    declared = tomllib.loads(toml)["project"]["entry-points"][ENTRY_POINT_GROUP]
    for name, value in declared.items():
        module, attr = value.split(":")
        assert module == guide_module.__name__
        assert as_factory(name, getattr(guide_module, attr)) is guide_module.PLUGIN


def test_the_guide_commands_succeed(qos_sort_package, capsys):
    commands = [line[2:] for body in blocks("console") for line in body.splitlines() if line.startswith("$ ")]
    assert commands
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "kopfsched"
        assert cli.main(argv[1:]) == cli.EXIT_OK, capsys.readouterr().err
