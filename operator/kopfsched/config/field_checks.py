"""Field checks of a KubeSchedulerConfiguration's top level, semantic checks shared by the
parsers, and the checks that span several profiles.

A profile's structure is not checked here: that is the CRD's schema (config/schema.py). The
top level of a KubeSchedulerConfiguration (parallelism, leaderElection, clientConnection...)
has no schema of ours, so its type checks stay here.

Checks record `Problem`s and never raise: a configuration is judged whole, so the user
sees every problem at once, each with its field path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from kopfsched.config.schema import type_name
from kopfsched.config.types import Problem, ProfileConfig

T = TypeVar("T")


def join(path: str, child: str) -> str:
    """`join("spec", "plugins")` → "spec.plugins"; `join("", "profiles")` → "profiles"."""
    return f"{path}.{child}" if path else child


def expect_mapping(value: Any, path: str, problems: list[Problem]) -> Mapping[str, Any] | None:
    """The value if it is an object (None counts as absent); otherwise a problem and None."""
    if value is None or isinstance(value, Mapping):
        return value
    problems.append(Problem(path, f"must be an object, got {type_name(value)}"))
    return None


def expect_list(value: Any, path: str, problems: list[Problem]) -> list[Any]:
    """The value if it is a list ([] when absent); otherwise a problem and []."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    problems.append(Problem(path, f"must be an array, got {type_name(value)}"))
    return []


def check_known_fields(raw: Mapping[str, Any], known: Sequence[str], path: str, problems: list[Problem]) -> None:
    """Upstream decodes configuration strictly: an unknown field is an error (often a typo)."""
    for key in raw:
        if key not in known:
            problems.append(Problem(join(path, str(key)), "unknown field"))


_KINDS = {int: "an integer", str: "a string", bool: "a boolean"}


def optional(raw: Mapping[str, Any], key: str, path: str, problems: list[Problem], kind: type[T]) -> T | None:
    """A field of `kind` (int, str or bool; a boolean is not an integer), None when absent or
    of another type (then with a problem)."""
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    problems.append(Problem(join(path, key), f"must be {_KINDS[kind]}, got {type_name(value)}"))
    return None


def check_percentage(value: int | None, path: str, problems: list[Problem]) -> None:
    if value is not None and not 0 <= value <= 100:
        problems.append(Problem(path, f"not in valid range [0-100], got {value}"))


def check_backoff(initial: int | None, maximum: int | None, path: str, problems: list[Problem]) -> None:
    """podInitialBackoffSeconds > 0 and podMaxBackoffSeconds >= it (upstream's rule), with
    the defaults 1 and 10 for what is absent."""
    effective_initial = 1 if initial is None else initial
    if initial is not None and initial <= 0:
        problems.append(Problem(join(path, "podInitialBackoffSeconds"), f"must be greater than 0, got {initial}"))
    if maximum is not None and maximum < effective_initial:
        problems.append(Problem(join(path, "podMaxBackoffSeconds"),
                                f"must be greater than or equal to podInitialBackoffSeconds ({effective_initial}),"
                                f" got {maximum}"))
    elif maximum is None and effective_initial > 10:
        problems.append(Problem(join(path, "podMaxBackoffSeconds"),
                                f"must be greater than or equal to podInitialBackoffSeconds ({effective_initial}),"
                                " got the default 10"))


# Profiles across objects -------------------------------------------------------------

SCHEDULER_PROFILE_SOURCE = "SchedulerProfile/{name}"
KSC_PROFILE_SOURCE = "KubeSchedulerConfiguration profiles[{index}]"
_KSC_SOURCE = re.compile(r"^KubeSchedulerConfiguration profiles\[(\d+)\]$")


def profile_field_path(source: str, child: str) -> str:
    """The path of a profile field inside the object the profile came from."""
    match = _KSC_SOURCE.match(source)
    return f"profiles[{match.group(1)}].{child}" if match else f"spec.{child}"


def profile_conflicts(profiles: Sequence[ProfileConfig],
                      locations: Sequence[str] | None = None) -> list[tuple[int, Problem]]:
    """(index of the offending profile, problem) for every duplicate scheduler name and every
    profile whose queueSort plugin or its args differ from the first profile's.

    `locations` (one per profile, e.g. `a.yaml: document 2`) names where the other
    profile of a conflict was found, so a message names both files."""
    found: list[tuple[int, Problem]] = []
    by_name: dict[str, int] = {}

    def named(index: int) -> str:
        where = locations[index] if locations is not None else ""
        return f"{profiles[index].source} ({where})" if where else profiles[index].source

    for index, profile in enumerate(profiles):
        first = by_name.setdefault(profile.scheduler_name, index)
        if first != index:
            found.append((index, Problem(
                profile_field_path(profile.source, "schedulerName"),
                f'scheduler name "{profile.scheduler_name}" is also used by {named(first)}', profile.source)))
        if not profiles or index == 0:
            continue
        canon = profiles[0]
        mine, theirs = profile.enabled("queueSort"), canon.enabled("queueSort")
        if mine != theirs:
            found.append((index, Problem(
                profile_field_path(profile.source, "plugins.queueSort"),
                f"queueSort must be the same for all profiles: {_names(mine)} here, {_names(theirs)} in {named(0)}",
                profile.source)))
        elif any(profile.plugin_args.get(name) != canon.plugin_args.get(name) for name in mine):
            found.append((index, Problem(
                profile_field_path(profile.source, "pluginConfig"),
                f"queueSort must be the same for all profiles: args of {_names(mine)} differ from {named(0)}",
                profile.source)))
    return found


def check_profiles_consistent(profiles: Sequence[ProfileConfig]) -> list[Problem]:
    """Problems that only a set of profiles served together can have: two profiles with one
    scheduler name, or profiles that disagree on queueSort (there is one queue)."""
    return [problem for _, problem in profile_conflicts(profiles)]


def _names(names: list[str]) -> str:
    return ", ".join(f'"{name}"' for name in names) if names else "none"
