"""events.k8s.io/v1 Event validation, as the API server's ValidateEventCreate/Update does it.

What a client of Events gets wrong in practice: an eventTime without microseconds does not
even decode (a MicroTime is RFC 3339 with exactly six fractional digits: 400 BadRequest);
reportingController must be a qualified name (an optional DNS-subdomain prefix and a name
of at most 63 characters); reportingInstance, action and reason are required and at most 128
characters; the note at most 1024; a series counts at least 2 and has a lastObservedTime.
"""
from __future__ import annotations

import re
from typing import Any

Obj = dict[str, Any]

MICRO_TIME = re.compile(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$')
_NAME = re.compile(r'^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')
_DNS_SUBDOMAIN = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
LIMITS = {'reportingInstance': 128, 'action': 128, 'reason': 128, 'note': 1024}
NAME_MESSAGE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
                "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def decode_error(obj: Obj) -> str | None:
    """The 400 message when a MicroTime does not parse, else None."""
    for field, value in (('eventTime', obj.get('eventTime')),
                         ('series.lastObservedTime', (obj.get('series') or {}).get('lastObservedTime'))):
        if value is not None and (not isinstance(value, str) or not MICRO_TIME.match(value)):
            return (f'Event in version "v1" cannot be handled as a Event: parsing time {value!r} as '
                    f'"2006-01-02T15:04:05.000000Z07:00": cannot parse {field}')
    return None


def qualified_name_problems(value: str) -> list[str]:
    prefix, _, name = value.rpartition('/')
    problems = []
    if '/' in value and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        problems.append('prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
                        "characters, '-' or '.', and must start and end with an alphanumeric character")
    if not name:
        problems.append('name part must be non-empty')
    elif len(name) > 63:
        problems.append('name part must be no more than 63 bytes')
    elif not _NAME.match(name):
        problems.append(NAME_MESSAGE)
    return problems


def invalid_fields(obj: Obj) -> list[str]:
    """`field: ...` problems (422), empty when valid."""
    problems: list[str] = []
    if not obj.get('eventTime'):
        problems.append('eventTime: Required value')
    controller = obj.get('reportingController') or ''
    if not controller:
        problems.append('reportingController: Required value')
    else:
        problems += [f'reportingController: Invalid value: "{controller}": {problem}'
                     for problem in qualified_name_problems(controller)]
    for field, limit in LIMITS.items():
        value = obj.get(field) or ''
        if not value and field != 'note':
            problems.append(f'{field}: Required value')
        elif len(value) > limit:
            problems.append(f'{field}: Invalid value: "": can have at most {limit} characters')
    if obj.get('type') not in ('Normal', 'Warning'):
        problems.append(f'type: Unsupported value: "{obj.get("type") or ""}": supported values: "Normal", "Warning"')
    series = obj.get('series')
    if series is not None:
        count = series.get('count') or 0
        if count < 2:
            problems.append(f'series.count: Invalid value: {count}: should be at least 2')
        if not series.get('lastObservedTime'):
            problems.append('series.lastObservedTime: Required value')
    return problems
