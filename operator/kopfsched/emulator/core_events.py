"""events.k8s.io/v1 Events seen through core/v1, as one store serves both API versions.

kube-apiserver keeps one Event object and converts it per version; kubectl describe and
`kubectl get events` read core/v1, while schedulers write events.k8s.io/v1. The emulator
mirrors each events.k8s.io/v1 Event into the core/v1 store, converted as the API's
conversion functions do (regarding → involvedObject, note → message, ...).
"""
from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def to_core(event: Obj) -> Obj:
    """The core/v1 view of an events.k8s.io/v1 Event."""
    core: Obj = {
        'apiVersion': 'v1', 'kind': 'Event', 'metadata': dict(event['metadata']),
        'involvedObject': dict(event.get('regarding') or {}),
        'reason': event.get('reason', ''), 'message': event.get('note', ''), 'type': event.get('type', ''),
        'action': event.get('action', ''), 'eventTime': event.get('eventTime'),
        'reportingComponent': event.get('reportingController', ''),
        'reportingInstance': event.get('reportingInstance', ''),
        'source': dict(event.get('deprecatedSource') or {}),
        'firstTimestamp': event.get('deprecatedFirstTimestamp'),
        'lastTimestamp': event.get('deprecatedLastTimestamp'),
        'count': event.get('deprecatedCount') or 0,
    }
    if event.get('related'):
        core['related'] = dict(event['related'])
    if event.get('series'):
        core['series'] = dict(event['series'])
    if not core['source'] and event.get('reportingController'):
        core['source'] = {'component': event['reportingController']}
    return core
