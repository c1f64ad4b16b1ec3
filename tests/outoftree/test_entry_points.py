"""Out-of-tree plugins through the `kopfsched.plugins` entry-point group: lazy loading, the
two accepted forms, and one clear line for every way an installed plugin can be wrong."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint

import pytest
import yaml

from kopfsched import cli
from kopfsched.framework import PluginLoadError, Registry
from kopfsched.plugins import entry_points
from kopfsched.plugins.entry_points import ENTRY_POINT_GROUP, add_installed_plugins, as_factory
from kopfsched.plugins.registry import full_registry, in_tree_registry

SAMPLES = "tests.outoftree.sample_plugins"


def ep(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def registry_with(*installed: EntryPoint) -> Registry:
    registry = in_tree_registry()
    add_installed_plugins(registry, installed=installed)
    return registry


def test_class_form_uses_the_class_as_factory_and_its_nested_args():
    factory = registry_with(ep("Good", f"{SAMPLES}:Good")).get("Good")
    assert factory.plugin_type.__name__ == "Good"
    assert factory.decode_args({"label": "ssd"}).label == "ssd"
    assert factory.new(factory.decode_args(None), None).label == "good"


def test_factory_form_is_used_as_is():
    factory = registry_with(ep("GoodFactory", f"{SAMPLES}:GOOD_FACTORY")).get("GoodFactory")
    from tests.outoftree.sample_plugins import GOOD_FACTORY
    assert factory is GOOD_FACTORY


def test_entry_points_are_imported_only_when_looked_up(monkeypatch):
    monkeypatch.delitem(sys.modules, SAMPLES, raising=False)
    registry = registry_with(ep("Good", f"{SAMPLES}:Good"))
    assert "Good" in registry
    assert SAMPLES not in sys.modules
    registry.get("Good")
    assert SAMPLES in sys.modules


@pytest.mark.parametrize(("value", "name", "message"), [
    pytest.param("tests.outoftree.sample_broken:Plugin", "Broken",
                 'plugin "Broken" (tests.outoftree.sample_broken:Plugin) cannot be loaded: '
                 "ImportError: No module named 'somedependency'", id="import-fails"),
    pytest.param(f"{SAMPLES}:Missing", "Missing",
                 f'plugin "Missing" ({SAMPLES}:Missing) cannot be loaded: '
                 f"AttributeError: module '{SAMPLES}' has no attribute 'Missing'", id="attribute-missing"),
    pytest.param(f"{SAMPLES}:NOT_A_PLUGIN", "NotAPlugin",
                 'plugin "NotAPlugin": the entry point loads a int, not a PluginFactory or a plugin class with a name',
                 id="not-a-plugin"),
    pytest.param(f"{SAMPLES}:Nameless", "Nameless",
                 'plugin "Nameless": the entry point loads the class Nameless without a name, '
                 "not a PluginFactory or a plugin class with a name", id="class-without-name"),
    pytest.param(f"{SAMPLES}:Good", "Better",
                 'plugin "Better": the entry point loads a plugin named "Good"; the names must match',
                 id="name-mismatch"),
    pytest.param(f"{SAMPLES}:NoPoints", "NoPoints", 'plugin "NoPoints": NoPoints implements no extension point',
                 id="no-extension-point"),
    pytest.param(f"{SAMPLES}:BadArgs", "BadArgs", 'plugin "BadArgs": its Args class has no from_dict classmethod',
                 id="args-without-from-dict"),
])
def test_a_broken_entry_point_raises_one_line_on_every_lookup(value, name, message):
    registry = registry_with(ep(name, value))
    for _ in range(2):  # it stays broken, never turns into "unknown"
        with pytest.raises(PluginLoadError) as error:
            registry.get(name)
        assert str(error.value) == message
    assert name in registry


def test_a_plugin_installed_twice_is_a_problem_and_unusable():
    registry = registry_with(ep("Good", f"{SAMPLES}:Good"), ep("Good", "other_package:Good"))
    message = (f'plugin "Good" is installed by more than one package ({SAMPLES}:Good; other_package:Good); '
               "uninstall all but one")
    assert registry.problems == [message]
    with pytest.raises(PluginLoadError, match="installed by more than one package"):
        registry.get("Good")


def test_the_same_entry_point_seen_twice_is_not_a_duplicate():
    registry = registry_with(ep("Good", f"{SAMPLES}:Good"), ep("Good", f"{SAMPLES}:Good"))
    assert registry.problems == []
    assert registry.get("Good").name == "Good"


def test_a_built_in_name_wins_and_the_installed_plugin_is_reported():
    registry = registry_with(ep("NodeName", f"{SAMPLES}:Good"))
    assert registry.problems == [
        f'installed plugin "NodeName" ({SAMPLES}:Good) is ignored: a built-in plugin has that name']
    assert registry.get("NodeName").plugin_type.__module__ == "kopfsched.plugins.nodename"


def test_as_factory_accepts_a_plugin_class():
    from tests.outoftree.sample_plugins import Good
    assert as_factory("Good", Good).args_type is Good.Args


# Through `kopfsched validate` ------------------------------------------------------------------


def _profile(tmp_path, *plugins: str, config: list | None = None):
    spec = {"plugins": {"filter": {"enabled": [{"name": p} for p in plugins]}}}
    if config:
        spec["pluginConfig"] = config
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile",
                                    "metadata": {"name": "custom"}, "spec": spec}))
    return str(path)


@pytest.fixture
def installed(monkeypatch):
    """Make `full_registry()` see these entry points beside the really installed ones."""
    found: list[EntryPoint] = []
    real = entry_points.installed_entry_points
    monkeypatch.setattr(entry_points, "installed_entry_points", lambda: [*real(), *found])
    return found


def test_validate_accepts_an_installed_plugin_with_valid_args(installed, tmp_path, capsys):
    installed.append(ep("Good", f"{SAMPLES}:Good"))
    path = _profile(tmp_path, "Good", config=[{"name": "Good", "args": {"label": "ssd"}}])
    assert cli.main(["validate", path]) == cli.EXIT_OK
    assert capsys.readouterr().err == ""


def test_validate_reports_bad_args_of_an_installed_plugin(installed, tmp_path, capsys):
    installed.append(ep("Good", f"{SAMPLES}:Good"))
    path = _profile(tmp_path, "Good", config=[{"name": "Good", "args": {"label": 3}}])
    assert cli.main(["validate", path]) == cli.EXIT_INVALID
    assert capsys.readouterr().err == f"{path}: document 1: SchedulerProfile/custom: " \
                                      "spec.pluginConfig[0].args.label: " \
                                      "must be a string, got 3\n"


def test_validate_rejects_a_plugin_that_is_not_installed(installed, tmp_path, capsys):
    path = _profile(tmp_path, "NodeLabelPreference")
    assert cli.main(["validate", path]) == cli.EXIT_INVALID
    assert capsys.readouterr().err == (f"{path}: document 1: SchedulerProfile/custom: "
                                       "spec.plugins.filter.enabled[0].name: "
                                       'unknown plugin "NodeLabelPreference": neither built in nor installed\n')


def test_validate_reports_a_broken_installed_plugin_in_one_line(installed, tmp_path, capsys):
    installed.append(ep("Broken", "tests.outoftree.sample_broken:Plugin"))
    path = _profile(tmp_path, "Broken", config=[{"name": "Broken"}])
    assert cli.main(["validate", path]) == cli.EXIT_INVALID
    message = ('plugin "Broken" (tests.outoftree.sample_broken:Plugin) cannot be loaded: '
               "ImportError: No module named 'somedependency'")
    assert capsys.readouterr().err.splitlines() == [
        f"{path}: document 1: SchedulerProfile/custom: spec.plugins.filter.enabled[0].name: {message}",
        f"{path}: document 1: SchedulerProfile/custom: spec.pluginConfig[0].name: {message}",
    ]


def test_validate_warns_about_a_shadowed_plugin_without_failing(installed, tmp_path, capsys):
    installed.append(ep("NodeName", f"{SAMPLES}:Good"))
    path = _profile(tmp_path, "NodeName")
    assert cli.main(["validate", path]) == cli.EXIT_OK
    assert capsys.readouterr().err == (f'warning: installed plugin "NodeName" ({SAMPLES}:Good) is ignored: '
                                       "a built-in plugin has that name\n")


@pytest.mark.parametrize(("name", "problem"), [
    ("tests.outoftree.sample_sentinel", 'unknown plugin "tests.outoftree.sample_sentinel": neither built in nor '
                                        "installed"),
    ("tests.outoftree.sample_sentinel:Plugin", "invalid plugin name 'tests.outoftree.sample_sentinel:Plugin': "
                                               "letters, digits and -_./ only"),
], ids=["dotted", "entry-point-syntax"])
def test_a_module_path_in_a_profile_is_never_imported(installed, tmp_path, capsys, monkeypatch, name, problem):
    sentinel = "tests.outoftree.sample_sentinel"
    monkeypatch.delitem(sys.modules, sentinel, raising=False)
    path = _profile(tmp_path, name, config=[{"name": name}])
    assert cli.main(["validate", path]) == cli.EXIT_INVALID
    assert problem in capsys.readouterr().err
    assert sentinel not in sys.modules


def test_full_registry_holds_every_built_in_plugin():
    assert set(in_tree_registry().names()) <= set(full_registry().names())
