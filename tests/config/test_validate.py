"""`validate_files`: one line per problem, `<file>: document N: <Kind>/<name>: <field path>: <message>`."""

from __future__ import annotations

import textwrap

import pytest

from kopfsched.config import validate_files
from tests.config.fakes import fake_registry

GOOD = """\
apiVersion: kopfsched.dev/v1alpha1
kind: SchedulerProfile
metadata: {name: good}
"""


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_valid_files_give_no_lines(tmp_path):
    assert validate_files([write(tmp_path, "a.yaml", GOOD)], fake_registry()) == []


def test_problems_name_file_kind_object_and_path(tmp_path):
    path = write(tmp_path, "a.yaml", """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: ignored}
        ---
        apiVersion: kopfsched.dev/v1alpha1
        kind: SchedulerProfile
        metadata: {name: bad}
        spec:
          percentageOfNodesToScore: 120
          plugins:
            score:
              enabled: [{name: Foo}]
        ---
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        parallelism: 0
        """)
    assert validate_files([path], fake_registry()) == [
        f"{path}: document 2: SchedulerProfile/bad: spec.percentageOfNodesToScore: must be at most 100, "
        "got 120",
        f'{path}: document 2: SchedulerProfile/bad: spec.plugins.score.enabled[0].name: '
        'unknown plugin "Foo": neither built in nor installed',
        f"{path}: document 3: KubeSchedulerConfiguration: parallelism: should be an integer value greater than zero, "
        "got 0",
    ]


def test_kind_list_is_unpacked(tmp_path):
    path = write(tmp_path, "list.yaml", """\
        apiVersion: v1
        kind: List
        items:
          - apiVersion: kopfsched.dev/v1alpha1
            kind: SchedulerProfile
            metadata: {name: x}
            spec: {podInitialBackoffSeconds: 0}
        """)
    assert validate_files([path], fake_registry()) == [
        f"{path}: document 1 item 1: SchedulerProfile/x: spec.podInitialBackoffSeconds: must be at least 1, got 0"]


def test_profiles_are_checked_together_across_files(tmp_path):
    first = write(tmp_path, "a.yaml", GOOD)
    second = write(tmp_path, "b.yaml", """\
        apiVersion: kopfsched.dev/v1alpha1
        kind: SchedulerProfile
        metadata: {name: other}
        spec: {schedulerName: good}
        """)
    assert validate_files([first, second], fake_registry()) == [
        f'{second}: document 1: SchedulerProfile/other: spec.schedulerName: scheduler name "good" is also used by'
        f" SchedulerProfile/good ({first}: document 1)"]


def test_syntax_errors_and_unreadable_files_are_one_line_each(tmp_path):
    broken = write(tmp_path, "broken.yaml", "kind: SchedulerProfile\nspec: [unclosed\n")
    missing = str(tmp_path / "missing.yaml")
    lines = validate_files([broken, missing], fake_registry())
    assert lines == [
        f"{broken}: document 1: line 3, column 1: invalid YAML: did not find expected ',' or ']'",
        f"{missing}: cannot read: No such file or directory",
    ]


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("", "{path}: no objects (the input is empty)", id="empty"),
    pytest.param("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
                 "{path}: no SchedulerProfile or KubeSchedulerConfiguration in it", id="no-profiles"),
])
def test_a_file_without_profiles_is_not_valid(tmp_path, text, expected):
    """`validate` once said "1 file(s) valid" for these."""
    path = write(tmp_path, "a.yaml", text)
    assert validate_files([path], fake_registry()) == [expected.format(path=path)]
