"""Every code block of docs/writing-plugins.md runs here, so the guide cannot rot.

Blocks are files: a Python, TOML or YAML block whose first line is `# <path>` starts one,
later Python blocks without such a line continue it. The test does what a reader does:
writes the files as the guide shows them, runs the guide's tests and ruff on them, then
builds and pip-installs the project into a fresh virtualenv and runs the guide's `shell`
commands there (`kopfsched validate`, `kopfsched simulate` with the plugin enabled). The
`console` commands (run from a kopfsched checkout) must succeed too.
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib

import pytest
import yaml

from kopfsched import cli
from kopfsched.config.parse import parse_scheduler_profile
from kopfsched.framework import Registry
from kopfsched.plugins.entry_points import ENTRY_POINT_GROUP, as_factory
from kopfsched.plugins.registry import full_registry

pytestmark = pytest.mark.timeout(600)  # pip in subprocesses of its own, each bounded at 300 s

GUIDE = pathlib.Path(__file__).parents[2] / "docs" / "writing-plugins.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(GUIDE.read_text()) if lang == language]


ROOT = GUIDE.parents[1]
HEADER = re.compile(r"# ([\w./-]+\.(?:py|toml|yaml))")


def guide_files() -> dict[str, str]:
    """The files the guide shows, by path, in the order it shows them."""
    files: dict[str, str] = {}
    current = None
    for lang, body in FENCE.findall(GUIDE.read_text()):
        if lang not in ("python", "toml", "yaml"):
            continue
        header = HEADER.fullmatch(body.splitlines()[0])
        if header:
            current = header.group(1)
            files[current] = ""
        elif lang != "python":
            continue  # a YAML or TOML fragment that is not a file of the project
        assert current is not None, "the guide's first Python block must name its file"
        files[current] += body + ("\n" if lang == "python" else "")
    return files


def kopfsched_env() -> dict[str, str]:
    """This checkout's kopfsched first on the path, as an installed kopfsched would be."""
    return {**os.environ, "PYTHONPATH": str(ROOT / "operator")}


@pytest.fixture(scope="module")
def guide_dir(tmp_path_factory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("guide") / "node-label-preference"
    for name, text in guide_files().items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return directory


@pytest.fixture(scope="module")
def guide_module(guide_dir):
    sys.path.insert(0, str(guide_dir / "src"))
    try:
        yield importlib.import_module("node_label_preference")
    finally:
        sys.path.remove(str(guide_dir / "src"))
        sys.modules.pop("node_label_preference", None)


def test_the_guide_has_the_files_it_promises():
    files = sorted(guide_files())
    assert files == ["pyproject.toml", "snapshot.yaml", "src/node_label_preference.py",
                     "tests/test_node_label_preference.py", "tiered.yaml"]
    [layout] = [body for body in blocks("text") if body.startswith("node-label-preference/")]
    for path in files:
        assert pathlib.PurePath(path).name in layout, path


def test_the_guide_tests_pass(guide_dir):
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=guide_dir, env=kopfsched_env(), capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b11 passed\b", done.stdout), done.stdout


def test_the_guide_code_passes_ruff_as_written(guide_dir):
    """Optional blocks included: the module as a reader pastes it is lint-clean."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--target-version", "py311",
                           "--line-length", "120", "--select", "E,F,W,I,B,UP,SIM", "src", "tests"],
                          cwd=guide_dir, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def nested_venv(venv: pathlib.Path) -> pathlib.Path:
    """A fresh virtualenv that sees the packages of the environment this suite runs in.

    `venv --system-site-packages` would see the base interpreter's packages, not those of the
    virtualenv the suite may run in (where `pip install -e '.[test]'` put kopfsched's
    dependencies, setuptools and wheel). So the new one gets no system site-packages and a
    .pth file adding this environment's site directories after its own (addsitedir, so the
    .pth files there, editable installs among them, are read too)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    inner = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    outer = list(dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib")))
    (pathlib.Path(inner) / "_outer_environment.pth").write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in outer))
    return python


def test_a_reader_installs_the_plugin_and_uses_it(guide_dir, tmp_path):
    """`pip install .` into a fresh virtualenv, then the guide's commands, then the guide's
    tests again with the plugin installed, and once more after uninstalling it (the egg-info
    the build leaves in src/ must not make the tests' own registration clash). The virtualenv
    sees the packages of the environment the suite runs in (kopfsched's dependencies and
    setuptools), and pip is kept off the network (--no-index, --no-build-isolation) so nothing
    but this project is built."""
    # A copy: building writes an egg-info into src/, which would register the plugin for the
    # other tests that put src/ on sys.path.
    project = shutil.copytree(guide_dir, tmp_path / "node-label-preference")
    python = nested_venv(tmp_path / "venv")
    venv = tmp_path / "venv"
    commands = [line[2:] for body in blocks("shell") for line in body.splitlines() if line.startswith("$ ")]
    assert commands[0] == "pip install ."
    outputs = []
    for command in commands:
        argv = shlex.split(command)
        if argv[:2] == ["pip", "install"]:
            argv = [str(venv / "bin" / "pip"), "install", "--no-index", "--no-build-isolation", *argv[2:]]
        else:
            assert argv[0] == "kopfsched"
            argv = [str(venv / "bin" / "python"), "-m", "kopfsched", *argv[1:], *(["-o", "json"]
                                                                              if argv[1] == "simulate" else [])]
        done = subprocess.run(argv, cwd=project, env=kopfsched_env(), capture_output=True, text=True,
                              timeout=600, check=False)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    installed = subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import importlib.metadata as m, node_label_preference as n; "
                                "print(n.__file__); print([e.value for e in m.entry_points(group='kopfsched.plugins')"
                                " if e.name == 'NodeLabelPreference'])"],
                               cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60)
    module_file, entry_point = installed.stdout.splitlines()
    assert str(venv) in module_file, "imported from the virtualenv, not from the project directory"
    assert entry_point == "['node_label_preference:PLUGIN']"
    assert outputs[1] == "1 file(s) valid\n"
    [web] = json.loads(outputs[2])["pods"]
    assert (web["name"], web["result"], web["node"]) == ("web-1", "Scheduled", "gold-1")
    assert web["filter"] == {"plain-1": {"plugin": "NodeLabelPreference", "code": "UnschedulableAndUnresolvable",
                                         "reasons": ["node(s) didn't have label example.com/tier"]}}
    assert sorted(web["scores"]) == ["bronze-1", "gold-1"]
    assert web["scores"]["gold-1"]["NodeLabelPreference"] == 100
    for step in ("installed", "uninstalled"):
        done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=project,
                              env=kopfsched_env(), capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, f"the guide's tests, plugin {step}:\n{done.stdout}{done.stderr}"
        assert re.search(r"\b11 passed\b", done.stdout), done.stdout
        subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "kopfsched-node-label-preference"],
                       check=True, capture_output=True, timeout=120)


def test_the_custom_column_reads_one_number_per_node(guide_module):
    from kopfsched.framework import NodeTable
    from kopfsched.testing import make_pod, node_info
    from tests.builders import make_node
    table = NodeTable([node_info(make_node("a", pods=3), make_pod("p")), node_info(make_node("b", pods=5))])
    assert table.column(guide_module.FREE_PODS).tolist() == [2, 5]


def test_the_guide_profiles_are_valid(guide_module):
    registry = full_registry().merged(Registry({"NodeLabelPreference": guide_module.PLUGIN}))
    profiles = [doc for body in blocks("yaml") for doc in yaml.safe_load_all(body)
                if doc.get("kind") == "SchedulerProfile"]
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
    """The qos_sort_package fixture does what the block's first line (pip install) does."""
    commands = [line[2:] for body in blocks("console") for line in body.splitlines() if line.startswith("$ ")]
    assert commands[0] == "pip install ./examples/qos-sort-plugin", "the guide must say to install the example"
    for command in commands[1:]:
        argv = shlex.split(command)
        assert argv[0] == "kopfsched"
        assert cli.main(argv[1:]) == cli.EXIT_OK, capsys.readouterr().err
