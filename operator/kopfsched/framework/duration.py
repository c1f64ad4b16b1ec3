"""Go duration strings ("15s", "1m30s", "500ms"), as metav1.Duration fields are written."""

from __future__ import annotations

import re
from typing import Any

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float | None:
    """A Go duration string ("15s", "1m30s", "500ms") in seconds, or None if it is not one."""
    if not isinstance(value, str) or not value:
        return None
    sign = -1.0 if value.startswith("-") else 1.0
    text = value[1:] if value[0] in "+-" else value
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total if pos == len(text) and pos > 0 else None
