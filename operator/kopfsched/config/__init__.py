"""Configuration: SchedulerProfile / KubeSchedulerConfiguration parsing, upstream's
defaults and merge rules, and validation that reports every problem with its field path.

Imports only the framework (and the registry it is handed) and kopfsched.documents to read
files; never kopf or the API client.
"""

from kopfsched.config.defaults import (
    UPSTREAM_DEFAULT_PLUGINS,
    UPSTREAM_DEFAULTS_NOT_IMPLEMENTED,
    default_profile,
)
from kopfsched.config.field_checks import check_profiles_consistent
from kopfsched.config.parse import (
    parse_kube_scheduler_configuration,
    parse_profile_spec,
    parse_scheduler_profile,
)
from kopfsched.config.types import LeaderElectionConfig, PluginRef, Problem, ProfileConfig, SchedulerConfig
from kopfsched.config.validate_files import validate_files

__all__ = [
    "UPSTREAM_DEFAULTS_NOT_IMPLEMENTED",
    "UPSTREAM_DEFAULT_PLUGINS",
    "LeaderElectionConfig",
    "PluginRef",
    "Problem",
    "ProfileConfig",
    "SchedulerConfig",
    "check_profiles_consistent",
    "default_profile",
    "parse_kube_scheduler_configuration",
    "parse_profile_spec",
    "parse_scheduler_profile",
    "validate_files",
]
