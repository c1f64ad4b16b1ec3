"""StatusWriter on SchedulerProfiles: the effective scheduler name is written into
`status.schedulerName` (the CRD's `Scheduler` printer column reads it there, so a profile that
leaves spec.schedulerName out still shows the name pods must use), and the written status
matches the CRD's status schema."""
from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import jsonschema
import pytest
import yaml

from kopfsched.kube.profile_manager import ProfileManager
from kopfsched.kube.status_writer import StatusWriter
from kopfsched.plugins.registry import in_tree_registry
from kopfsched.scheduler.stats import SchedulingStats
from tests.builders import make_node
from tests.crd_schema import crd_json_schema
from tests.harness import Harness

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD = yaml.safe_load((ROOT / 'crds' / 'schedulerprofile.yaml').read_text())


class FakeClient:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def patch_profile_status(self, *, name: str, status: dict[str, Any]) -> None:
        self.patches.append((name, status))


class NoPodGroups:
    async def write(self) -> int:
        return 0


def profile_cr(name: str, spec: dict[str, Any], *, generation: int = 1, created: str = '2026-01-01T00:00:00Z'):
    return {'apiVersion': 'kopfsched.dev/v1alpha1', 'kind': 'SchedulerProfile',
            'metadata': {'name': name, 'generation': generation, 'creationTimestamp': created}, 'spec': spec}


def writer_for(*crs: dict[str, Any]) -> tuple[StatusWriter, FakeClient]:
    registry = in_tree_registry()
    harness = Harness([make_node('node-0')], registry=registry, profiles=[])
    manager = ProfileManager(scheduler=harness.scheduler, registry=registry, stats=SchedulingStats())
    for cr in crs:
        manager.upsert(cr)
    client = FakeClient()
    writer = StatusWriter(client=client, profiles=manager, pod_groups=NoPodGroups(),  # type: ignore[arg-type]
                          interval=5.0, profiles_changed=asyncio.Event())
    return writer, client


@pytest.mark.parametrize(('spec', 'expected'), [
    pytest.param({}, 'packer', id='defaulted-to-metadata-name'),
    pytest.param({'schedulerName': 'bin-packing'}, 'bin-packing', id='given'),
    pytest.param({'schedulerName': 'claimed', 'plugins': {'score': {'enabled': [{'name': 'NoSuchPlugin'}]}}},
                 'claimed', id='invalid-spec-names-what-it-claims'),
    pytest.param({'schedulerName': 5}, 'packer', id='invalid-name-falls-back-to-metadata-name'),
])
async def test_the_effective_scheduler_name_is_written(spec: dict[str, Any], expected: str) -> None:
    writer, client = writer_for(profile_cr('packer', spec))
    await writer.write_profiles()
    [(name, status)] = client.patches
    assert (name, status['schedulerName']) == ('packer', expected)


async def test_a_conflicting_profile_shows_the_name_it_claims(caplog: pytest.LogCaptureFixture) -> None:
    writer, client = writer_for(profile_cr('first', {'schedulerName': 'shared'}),
                                profile_cr('second', {'schedulerName': 'shared'}, created='2026-01-02T00:00:00Z'))
    await writer.write_profiles()
    written = dict(client.patches)
    assert {name: (s['schedulerName'], s['conditions'][0]['reason']) for name, s in written.items()} == {
        'first': ('shared', 'Serving'), 'second': ('shared', 'Conflict')}
    # Said once in the log too, where a refused profile is looked for first.
    assert [r.getMessage() for r in caplog.records if r.levelname == 'WARNING'] == [
        'SchedulerProfile second is not served: spec.schedulerName: scheduler name "shared" is also used by '
        'SchedulerProfile/first']


async def test_the_status_written_is_valid_under_the_crd_schema() -> None:
    writer, client = writer_for(profile_cr('packer', {}))
    await writer.write_profiles()
    [(_, status)] = client.patches
    validator = jsonschema.Draft7Validator(crd_json_schema(CRD), format_checker=jsonschema.FormatChecker())
    obj = {**profile_cr('packer', {}), 'status': status}
    assert [error.message for error in validator.iter_errors(obj)] == []
    status_schema = CRD['spec']['versions'][0]['schema']['openAPIV3Schema']['properties']['status']['properties']
    assert set(status) <= set(status_schema), 'every field written is in the CRD (the API server would prune it)'


async def test_the_name_is_not_written_again_when_nothing_changed() -> None:
    writer, client = writer_for(profile_cr('packer', {}))
    await writer.write_profiles()
    await writer.write_profiles()
    assert len(client.patches) == 1
