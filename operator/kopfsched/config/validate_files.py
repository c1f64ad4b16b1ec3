"""`kopfsched validate FILE...`: check SchedulerProfiles and KubeSchedulerConfigurations
offline, one line per problem, so a CI job can gate profile changes before they reach a
cluster. Other kinds in the files are ignored, but a file without any profile is a problem
(it was probably not the file meant). Files are read by kopfsched.documents, as simulate's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kopfsched.config.field_checks import profile_conflicts
from kopfsched.config.parse import (
    KSC_KIND,
    SCHEDULER_PROFILE_KIND,
    parse_kube_scheduler_configuration,
    parse_scheduler_profile,
)
from kopfsched.config.types import ProfileConfig
from kopfsched.documents import read_documents
from kopfsched.framework.registry import Registry


@dataclass(frozen=True, slots=True)
class _Served:
    """A valid profile and where it was found, for problems across files."""

    where: str
    label: str
    profile: ProfileConfig


def validate_files(paths: Iterable[str], registry: Registry, *, read: list[str] | None = None) -> list[str]:
    """Every problem in the files (directories, `-` for stdin), reading problems first.
    `read`, when given, receives the name of every file that held documents (a directory's
    files one by one), for the `N file(s) valid` count."""
    lines: list[str] = []
    documents = [(d.source, d.where, d.obj) for d in read_documents(paths, lines)]
    if read is not None:
        read.extend(dict.fromkeys(source for source, _, _ in documents))
    return lines + validate_documents(documents, registry)


def validate_documents(documents: Iterable[tuple[str, str, Mapping[str, Any]]], registry: Registry) -> list[str]:
    """Every problem in the documents, each given as (file, where, object) with `where` the
    `file: document N` prefix, as `<where>: <Kind>/<name>: <field path>: <message>`.

    Also checks the valid profiles of all files together, as the operator would serve
    them: one scheduler name per profile, one queueSort for all. Empty when all is well."""
    lines: list[str] = []
    served: list[_Served] = []
    files: dict[str, bool] = {}
    for source, where, document in documents:
        kind = document.get("kind")
        files.setdefault(source, False)
        if not isinstance(kind, str) or not kind:
            files[source] = True  # reported; "no profile in it" would only repeat it
            lines.append(f"{where}: ?/{_name(document).replace('<unnamed>', '?')}: kind: required")
            continue
        if kind not in (SCHEDULER_PROFILE_KIND, KSC_KIND):
            continue
        files[source] = True
        name = _name(document)
        label = f"{kind}/{name}" if kind == SCHEDULER_PROFILE_KIND or name != "<unnamed>" else kind
        if kind == SCHEDULER_PROFILE_KIND:
            profile, problems = parse_scheduler_profile(document, registry)
            found = [profile] if profile is not None else []
        else:
            config, problems = parse_kube_scheduler_configuration(document, registry)
            found = list(config.profiles) if config is not None else []
        lines.extend(f"{where}: {label}: {problem}" for problem in problems)
        served.extend(_Served(where, label, profile) for profile in found)
    for index, problem in profile_conflicts([item.profile for item in served], [item.where for item in served]):
        item = served[index]
        lines.append(f"{item.where}: {item.label}: {problem}")
    lines.extend(f"{source}: no SchedulerProfile or KubeSchedulerConfiguration in it"
                 for source, has_profiles in files.items() if not has_profiles)
    return lines


def _name(document: Mapping[str, Any]) -> str:
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) and name else "<unnamed>"
