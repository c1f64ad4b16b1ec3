"""Builders for DRA objects (resource.k8s.io/v1), named after upstream's test helpers."""

from __future__ import annotations

from typing import Any

DRIVER_A = "driver-a"
DRIVER_B = "driver-b"
CLASS_A = "class-a"
CLASS_B = "class-b"


def device_class(name: str, driver: str | None = None, *, selectors: list[str] = (), config: list[dict] = ()) -> dict:
    exprs = ([f'device.driver == "{driver}"'] if driver else []) + list(selectors)
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
    if config:
        spec["config"] = list(config)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def device(name: str, *, capacity: dict[str, str] | None = None, attributes: dict[str, Any] | None = None,
           **extra: Any) -> dict:
    raw: dict[str, Any] = {"name": name}
    if attributes:
        raw["attributes"] = {k: _attribute(v) for k, v in attributes.items()}
    if capacity:
        raw["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    raw.update(extra)
    return raw


def _attribute(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def resource_slice(name: str, pool: str, driver: str, *devices: dict, node: str | None = None,
                   node_selector: dict | None = None, all_nodes: bool = False, generation: int = 1,
                   count: int = 1) -> dict:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": generation,
                                                       "resourceSliceCount": count},
                            "devices": list(devices)}
    if node:
        spec["nodeName"] = node
    elif node_selector is not None:
        spec["nodeSelector"] = node_selector
    elif all_nodes:
        spec["allNodes"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def label_selector(key: str, value: str) -> dict:
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}


def local_selector(node: str) -> dict:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def request(name: str, device_class_name: str = CLASS_A, count: int = 1, *selectors: str, mode: str = "ExactCount",
            admin: bool | None = None, tolerations: list[dict] = ()) -> dict:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if admin is not None:
        exactly["adminAccess"] = admin
    if tolerations:
        exactly["tolerations"] = list(tolerations)
    return {"name": name, "exactly": exactly}


def sub_request(name: str, device_class_name: str, count: int = 1, *selectors: str, mode: str = "ExactCount",
                tolerations: list[dict] = ()) -> dict:
    sub: dict[str, Any] = {"name": name, "deviceClassName": device_class_name, "allocationMode": mode}
    if mode == "ExactCount":
        sub["count"] = count
    if selectors:
        sub["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if tolerations:
        sub["tolerations"] = list(tolerations)
    return sub


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict:
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def toleration(key: str = "", operator: str = "", value: str = "", effect: str = "") -> dict:
    return {k: v for k, v in (("key", key), ("operator", operator), ("value", value), ("effect", effect)) if v}


def taint_rule(name: str, rule_taint: dict, *, driver: str | None = None, pool: str | None = None,
               dev: str | None = None, selector: bool = True) -> dict:
    """A DeviceTaintRule (resource.k8s.io/v1); `selector=False` leaves out deviceSelector."""
    spec: dict[str, Any] = {"taint": rule_taint}
    if selector:
        spec["deviceSelector"] = {k: v for k, v in (("driver", driver), ("pool", pool), ("device", dev))
                                  if v is not None}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": spec}


def first_available(name: str, *subs: dict) -> dict:
    return {"name": name, "firstAvailable": list(subs)}


def claim(name: str, *requests: dict, constraints: list[dict] = (), namespace: str | None = None,
          config: list[dict] = (), allocation: dict | None = None, reserved_for: list[dict] | None = None,
          owner_uid: str | None = None, **meta: Any) -> dict:
    metadata: dict[str, Any] = {"name": name, "uid": f"uid-{name}", **meta}
    if namespace is not None:
        metadata["namespace"] = namespace
    if owner_uid is not None:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid,
                                        "controller": True}]
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    if config:
        devices["config"] = list(config)
    obj: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": metadata,
                           "spec": {"devices": devices}}
    status: dict[str, Any] = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved_for is not None:
        status["reservedFor"] = reserved_for
    if status:
        obj["status"] = status
    return obj


def result(req: str, driver: str, pool: str, dev: str, admin: bool = False, tolerations: list[dict] = ()) -> dict:
    out: dict[str, Any] = {"request": req, "driver": driver, "pool": pool, "device": dev}
    if admin:
        out["adminAccess"] = True
    if tolerations:
        out["tolerations"] = list(tolerations)
    return out


def allocation(node_selector: dict | None, *results: dict) -> dict:
    out: dict[str, Any] = {"devices": {"results": list(results)}}
    if node_selector is not None:
        out["nodeSelector"] = node_selector
    return out
