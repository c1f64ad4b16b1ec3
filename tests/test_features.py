"""features.UPSTREAM is kube-scheduler v1.37.2's gate list, read from the pinned release's own
source (the tests/kubeenv module's k8s.io/kubernetes); the flag's answers for each kind of gate."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kopfsched import features

KUBEENV = Path(__file__).resolve().parent / "kubeenv"
SWITCH = ("DRADeviceTaintRules, DRADeviceTaints, NominatedNodeNameForExpectation, OpportunisticBatching, "
          "SchedulerPopFromBackoffQ, StorageCapacityScoring, VolumeLimitScaling")


def _module_dir(module: str) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not on PATH: the pinned release's source cannot be located")
    out = subprocess.run([go, "mod", "download", "-json", module], cwd=KUBEENV, capture_output=True, text=True,
                         check=True, timeout=600).stdout
    return Path(json.loads(out)["Dir"])


def _specs_at(source: str, release: tuple[int, int]) -> dict[str, features.Gate]:
    """The last VersionedSpec at or before `release` of every gate in kube_features.go."""
    table = {}
    for block in re.finditer(r"^\t(\w+): \{\n((?:\t\t(?:\{Version|//).*\n)+)\t\},", source, re.M):
        current = None
        for version, default, stage, locked in re.findall(
                r'Version: version.MustParse\("([\d.]+)"\), Default: (\w+), PreRelease: featuregate.(\w+)'
                r"(, LockToDefault: true)?", block.group(2)):
            if tuple(map(int, version.split("."))) <= release:
                current = features.Gate(stage, default == "true", bool(locked))
        if current is not None:
            table[block.group(1)] = current
    return table


def test_the_gate_table_is_the_pinned_releases() -> None:
    root = _module_dir("k8s.io/kubernetes")
    assert f"{root.name}" == f"kubernetes@{features.RELEASE}"
    specs = _specs_at((root / "pkg/features/kube_features.go").read_text(), (1, 37))
    consulted = set()
    for path in (root / "pkg/scheduler").rglob("*.go"):
        if not path.name.endswith("_test.go"):
            consulted.update(re.findall(r"\bfeatures\.([A-Z]\w+)\b", path.read_text()))
    consulted &= set(specs)  # features.Name and other non-gate identifiers drop out
    assert set(features.UPSTREAM) == consulted
    assert {name: specs[name] for name in consulted} == dict(features.UPSTREAM)


@pytest.mark.parametrize(("text", "message"), [
    ("Nope=true", "unrecognized feature gate 'Nope' (kube-scheduler v1.37.2 has no such gate; kopfsched can "
                  f"switch: {SWITCH})"),
    ("NodeDeclaredFeatures=false", "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true"),
    ("SchedulerAsyncPreemption=false", "feature gate SchedulerAsyncPreemption cannot be switched in kopfsched: it "
                                       "stays on, as its default (see docs/feature-gates.md; kopfsched can switch: "
                                       f"{SWITCH})"),
    ("GenericWorkload=true", "feature gate GenericWorkload cannot be switched in kopfsched: it stays off, as its "
                             f"default (see docs/feature-gates.md; kopfsched can switch: {SWITCH})"),
], ids=["unknown", "locked", "beta-on-not-switchable", "beta-off-not-switchable"])
def test_gates_kopfsched_cannot_switch_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        features.parse(text)
    assert str(raised.value) == message


def test_any_gate_may_be_set_to_its_default() -> None:
    gates = features.parse("NodeDeclaredFeatures=true,GenericWorkload=false,OpportunisticBatching=true,"
                           "SchedulerPopFromBackoffQ=false")
    assert gates.enabled(features.NODE_DECLARED_FEATURES)
    assert not gates.enabled("GenericWorkload")
    assert not gates.enabled(features.POP_FROM_BACKOFF_Q)
    assert repr(gates) == "FeatureGates({'SchedulerPopFromBackoffQ': False})"


def test_device_taints_switch_off_only_together_with_the_rules_as_upstreams_dependency() -> None:
    with pytest.raises(ValueError) as raised:
        features.parse("DRADeviceTaints=false")
    assert str(raised.value) == ("DRADeviceTaintRules is enabled, but depends on features that are disabled: "
                                 "[DRADeviceTaints]")
    both = features.parse("DRADeviceTaints=false,DRADeviceTaintRules=false")
    assert not both.enabled(features.DRA_DEVICE_TAINTS) and not both.enabled(features.DRA_DEVICE_TAINT_RULES)
    rules_off = features.parse("DRADeviceTaintRules=false")
    assert rules_off.enabled(features.DRA_DEVICE_TAINTS) and not rules_off.enabled(features.DRA_DEVICE_TAINT_RULES)


def test_gate_dependencies_are_the_pinned_releases() -> None:
    root = _module_dir("k8s.io/kubernetes")
    source = (root / "pkg/features/kube_features.go").read_text()
    for name, needs in features.DEPENDENCIES.items():
        [listed] = re.findall(rf"^\t{name}: \{{([^}}\n]*)\}}", source, re.M)
        assert tuple(re.findall(r"\w+", listed)) == needs, name
    for name in features.SWITCHABLE:  # every gate that needs a switchable one is known to
        for other in re.findall(rf"^\t(\w+): \{{[^}}\n]*\b{name}\b[^}}\n]*\}}", source, re.M):
            assert name in features.DEPENDENCIES.get(other, ()), (other, name)


def test_every_switchable_gate_is_an_upstream_gate_that_is_not_locked() -> None:
    assert all(name in features.UPSTREAM and not features.UPSTREAM[name].locked for name in features.SWITCHABLE)


def test_the_docs_table_names_every_gate_with_its_stage_and_default() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "feature-gates.md").read_text()
    stages = {"Alpha": "\u03b1", "Beta": "\u03b2", "GA": "GA"}
    for name, gate in features.UPSTREAM.items():
        row = next((line for line in text.splitlines() if line.startswith("|") and re.search(rf"\b{name}\b", line)),
                   None)
        assert row is not None, f"{name} is not in docs/feature-gates.md"
        cell = row.split("|")[2].strip()
        expected = f"{stages[gate.stage]}, {'on' if gate.default else 'off'}" + (", locked" if gate.locked else "")
        assert cell == expected, name
    for name in features.SWITCHABLE:
        assert re.search(rf"\| {name} \|[^|]*\| implemented, \*switchable\*", text), name
