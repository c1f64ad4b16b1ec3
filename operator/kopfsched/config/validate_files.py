"""`kopfsched validate FILE...`: check SchedulerProfiles and KubeSchedulerConfigurations
offline, one line per problem, so a CI job can gate profile changes before they reach a
cluster. Other kinds in the files are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from kopfsched.config.field_checks import profile_conflicts
from kopfsched.config.parse import (
    KSC_KIND,
    SCHEDULER_PROFILE_KIND,
    parse_kube_scheduler_configuration,
    parse_scheduler_profile,
)
from kopfsched.config.types import ProfileConfig
from kopfsched.framework.registry import Registry


@dataclass(frozen=True, slots=True)
class _Served:
    """A valid profile and where it was found, for problems across files."""

    file: str
    label: str
    profile: ProfileConfig


def validate_files(paths: list[str], registry: Registry) -> list[str]:
    """Every problem in `paths` as `<file>: <Kind>/<name>: <field path>: <message>`.

    Also checks the valid profiles of all files together, as the operator would serve
    them: one scheduler name per profile, one queueSort for all. Empty when all is well."""
    lines: list[str] = []
    served: list[_Served] = []
    for path in paths:
        for document in _documents(path, lines):
            kind = document.get("kind")
            if kind == SCHEDULER_PROFILE_KIND:
                label = f"{kind}/{_name(document)}"
                profile, problems = parse_scheduler_profile(document, registry)
                lines.extend(f"{path}: {label}: {problem}" for problem in problems)
                if profile is not None:
                    served.append(_Served(path, label, profile))
            elif kind == KSC_KIND:
                name = _name(document)
                label = f"{kind}/{name}" if name != "<unnamed>" else kind
                config, problems = parse_kube_scheduler_configuration(document, registry)
                lines.extend(f"{path}: {label}: {problem}" for problem in problems)
                if config is not None:
                    served.extend(_Served(path, label, profile) for profile in config.profiles)
    for index, problem in profile_conflicts([item.profile for item in served]):
        item = served[index]
        lines.append(f"{item.file}: {item.label}: {problem}")
    return lines


def _documents(path: str, lines: list[str]) -> Iterator[Mapping[str, Any]]:
    """The objects in a YAML file (multi-document, `kind: List` unpacked); unreadable files
    and syntax errors become one line each."""
    try:
        with open(path, encoding="utf-8") as stream:
            documents = list(yaml.safe_load_all(stream))
    except OSError as error:
        lines.append(f"{path}: cannot read: {error.strerror or error}")
        return
    except UnicodeDecodeError as error:
        lines.append(f"{path}: cannot read: not UTF-8 text ({error.reason})")
        return
    except yaml.YAMLError as error:
        lines.append(f"{path}: YAML syntax error: {_one_line(error)}")
        return
    for document in documents:
        if not isinstance(document, Mapping):
            continue
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            yield from (item for item in document["items"] if isinstance(item, Mapping))
        else:
            yield document


def _name(document: Mapping[str, Any]) -> str:
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) and name else "<unnamed>"


def _one_line(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    if mark is not None and problem:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return " ".join(str(error).split())

