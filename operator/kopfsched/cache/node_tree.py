"""Node order for filtering: zones interleaved round-robin, as upstream's nodeTree.

Spreading consecutive nodes across zones means that when only a percentage of nodes is
examined, the sample still covers every zone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


def _first(labels: Mapping[str, str], keys: tuple[str, ...]) -> str:
    for key in keys:
        if key in labels:
            return labels[key]
    return ""


def zone_key(node: Mapping[str, Any]) -> str:
    labels = (node.get("metadata") or {}).get("labels") or {}
    region, zone = _first(labels, REGION_LABELS), _first(labels, ZONE_LABELS)
    return f"{region}:\x00:{zone}" if region or zone else ""


class NodeTree:
    def __init__(self) -> None:
        self._zones: dict[str, list[str]] = {}
        self._zone_of: dict[str, str] = {}

    def add(self, node: Mapping[str, Any]) -> bool:
        """Add the node, or move it to its new zone; False when nothing changed."""
        name = node["metadata"]["name"]
        zone = zone_key(node)
        if self._zone_of.get(name) == zone:
            return False
        self.remove(name)
        self._zones.setdefault(zone, []).append(name)
        self._zone_of[name] = zone
        return True

    def remove(self, name: str) -> None:
        zone = self._zone_of.pop(name, None)
        if zone is None:
            return
        names = self._zones[zone]
        names.remove(name)
        if not names:
            del self._zones[zone]

    def __len__(self) -> int:
        return len(self._zone_of)

    def list(self) -> list[str]:
        """All node names, taking one from each zone in turn."""
        zones = list(self._zones.values())
        out: list[str] = []
        for i in range(max((len(z) for z in zones), default=0)):
            out.extend(z[i] for z in zones if i < len(z))
        return out
