"""Signature fragments shared by the default plugins (upstream's kube-scheduler/framework
signers.go): what each plugin reads of a pod, in a form two pods share exactly when the
plugin treats them alike. The values only need to compare equal when upstream's do; they
are JSON-dumped by Framework.sign_pod."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kopfsched.framework.interface import SignFragment
from kopfsched.framework.types import PodInfo

HOST_PORTS = "v1.Pod.Spec.HostPorts()"
IMAGE_NAMES = "v1.Pod.Spec.CanonicalImageNames()"
LABELS = "v1.Pod.Labels"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_SELECTOR = "v1.Pod.Spec.Affinity.NodeSelector"
REQUIRED_FEATURES = "v1.Pod.Spec.RequiredFeatures()"
RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"

_RESOURCE_FIELDS = ("cpu", "memory", "ephemeral-storage", "pods")
"""Requests upstream keeps as fields of its Resource: a 0 there is no request at all."""


def host_ports(pod: PodInfo) -> SignFragment:
    """Every container's and init container's host ports, as a sorted set."""
    spec = pod.spec
    ports = {port["hostPort"] for field in ("containers", "initContainers") for container in spec.get(field) or ()
             for port in container.get("ports") or () if port.get("hostPort")}
    return HOST_PORTS, sorted(ports)


def tolerations(pod: PodInfo) -> SignFragment:
    """The tolerations sorted by key, then value (upstream's sort is not stable beyond that)."""
    return TOLERATIONS, sorted(pod.spec.get("tolerations") or (),
                               key=lambda t: (t.get("key") or "", t.get("value") or ""))


def volumes(pod: PodInfo) -> SignFragment:
    """Each volume's source but the ConfigMaps' and Secrets' (they never matter to scheduling
    and would tell every pod apart), without the volume's name, in order."""
    sources = []
    for volume in pod.spec.get("volumes") or ():
        if "configMap" in volume or "secret" in volume:
            continue
        sources.append(json.dumps({k: v for k, v in volume.items() if k != "name"}, sort_keys=True))
    return VOLUMES, sources


def resources(requests: dict[str, int], backed: Callable[[str], Any] | None = None) -> list[SignFragment] | None:
    """The pod's requests (upstream's computePodResourceRequest); None when a DeviceClass
    backs one of its extended resources (`backed(name)` not None: DRAExtendedResource), as
    NodeResourcesFit's and BalancedAllocation's SignPod refuse such pods."""
    if backed is not None and any(value and name not in _RESOURCE_FIELDS and backed(name) is not None
                                  for name, value in requests.items()):
        return None
    return [(RESOURCES, sorted((name, value) for name, value in requests.items()
                               if value or name not in _RESOURCE_FIELDS))]


def _requirements(requirements: Any) -> list[str]:
    return sorted(json.dumps({**r, "values": sorted(r.get("values") or ())}, sort_keys=True)
                  for r in requirements or ())


def _term(term: Any) -> dict[str, list[str]]:
    return {"matchExpressions": _requirements((term or {}).get("matchExpressions")),
            "matchFields": _requirements((term or {}).get("matchFields"))}


def node_affinity(pod: PodInfo) -> list[SignFragment]:
    """The node affinity, each term's requirements and values sorted, and the nodeSelector."""
    affinity = (pod.affinity or {}).get("nodeAffinity")
    signed: Any = None
    if affinity is not None:
        required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
        preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
        signed = {
            "required": sorted(json.dumps(_term(t), sort_keys=True) for t in required or ()),
            "preferred": sorted(json.dumps({"weight": t.get("weight"), "preference": _term(t.get("preference"))},
                                           sort_keys=True) for t in preferred or ()),
        }
    return [(NODE_AFFINITY, signed), (NODE_SELECTOR, pod.spec.get("nodeSelector") or None)]
