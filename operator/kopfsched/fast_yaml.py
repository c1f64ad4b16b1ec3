"""A fast path for reading large YAML inputs, with the same result as libyaml's.

libyaml's parser (PyYAML's C extension) still makes a Python node object per value and our
converter walks them: most of the time a large export takes. `yaml_rs` (a Rust YAML
parser) builds the objects directly, several times faster (docs/performance.md), but reads YAML 1.2
where PyYAML and Kubernetes' own decoder read YAML 1.1: `yes`, `on`, `010`, `1_000`, `1:30`,
`0b1` and `1e3` differ. So the fast path is taken only when it gives exactly what the
libyaml path gives, and `read` returns None (the caller takes the libyaml path) otherwise:

- the input uses nothing outside plain block/flow mappings, sequences and scalars: no tag,
  anchor, alias, merge key, complex key, directive or document end marker, and no character
  YAML 1.1 refuses or reads as a line break;
- every plain scalar that either reading could take for something other than a string (a
  superset found by one regular expression over the input's distinct lines) reads the same
  in both, checked by reading them all once more through the libyaml path;
- yaml_rs parses every document without an error (errors are reported by the libyaml path,
  with its messages).

Documents are split at `---` lines (a document marker wherever it stands, even inside a
block scalar; `split_documents`) and parsed one by one, so each result is one document and
progress can be reported between them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

try:
    import yaml_rs
except ImportError:  # pragma: no cover - a declared dependency; the libyaml path is the fallback
    yaml_rs = None  # type: ignore[assignment]

FastItems = list[tuple[int, Any, None]]

_DOC_START = re.compile(r"^---(?=[ \t\r\n]|$)", re.M)
_UNSUPPORTED = re.compile(
    r"(?:^|[\s\[{,])(?:[!&*?%@`]|<<)"  # a tag, anchor, alias, explicit key, directive, merge key
    r"|^\.\.\.(?:\s|$)"  # a document end marker
    r"|\r(?!\n|\Z)"  # a line break of old Macs
    r"|[\]}][ \t]*:(?:\s|$)"  # a collection as a key
    r"|[^\x09\x0A\x0D\x20-\x7E\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]|[\u2028\u2029\uFEFF]",
    re.M,
)
"""What the fast path does not take on (over-estimated: `a * b` in a plain scalar counts too)."""
_CANDIDATE = re.compile(
    r"(?:^[ \t]*(?:[-?][ \t]+)*|:[ \t]+|[\[{,][ \t]*)"  # where a plain scalar can start
    r"([-+.0-9~=<yYnNoOtTfF][^\n#]*?)"  # a first character of every non-string reading
    r"[ \t]*(?=\r?$|#|:[ \t]|:\r?$|[,\]}])",  # where it ends
    re.M,
)
_CONTENT_LINE = re.compile(r"^[ \t]*[^ \t\r\n#]", re.M)


def available() -> bool:
    return yaml_rs is not None


def read(text: str, on_read: Callable[[int], None] | None,
         libyaml_values: Callable[[list[str]], list[Any] | None]) -> FastItems | None:
    """Every document of `text` as (index from 1, object, None), or None when the fast path
    cannot promise libyaml's result. `libyaml_values` reads plain scalars through the libyaml
    path: a block sequence of them, its items (None when it fails)."""
    if yaml_rs is None:
        return None
    # Both patterns look within one line, so the distinct lines are enough to search (a
    # cluster export repeats most of its lines).
    lines = "\n".join(set(text.split("\n")))
    if _UNSUPPORTED.search(lines) or not _same_scalars(lines, libyaml_values):
        return None
    items: FastItems = []
    index, pos = 0, 0
    last_wins = yaml_rs.DuplicateKeyPolicy.LastWins  # PyYAML's reading of a repeated key
    for number, part in enumerate(split_documents(text)):
        pos += len(part) + 3
        if number == 0 and not _CONTENT_LINE.search(part):
            continue  # comments or nothing before the first `---`: no document
        index += 1
        try:
            doc = yaml_rs.loads(part, parse_datetime=False, duplicate_key_policy=last_wins)
        except Exception:  # any failure: the libyaml path reads it and says what is wrong
            return None
        items.append((index, doc, None))
        if on_read is not None and index % 256 == 0:
            on_read(min(pos, len(text)))
    return items


def split_documents(text: str) -> list[str]:
    """`_DOC_START.split(text)`, with str.split: the regular expression took a tenth of a
    large input's reading. A part keeps the line break before the marker that ends it."""
    pieces = text.split("\n---")
    current = pieces[0]
    parts: list[str] = []
    if current.startswith("---") and (len(current) == 3 or current[3] in " \t\r\n"):
        parts.append("")
        current = current[3:]
    for piece in pieces[1:]:
        if not piece or piece[0] in " \t\r\n":
            parts.append(current + "\n")
            current = piece
        else:  # `----`, `---x`: not a marker
            current += "\n---" + piece
    parts.append(current)
    return parts


def _same_scalars(lines: str, libyaml_values: Callable[[list[str]], list[Any] | None]) -> bool:
    candidates = sorted(set(_CANDIDATE.findall(lines)))
    if not candidates:
        return True
    expected = libyaml_values(candidates)
    try:
        got = yaml_rs.loads("".join(f"- {c}\n" for c in candidates), parse_datetime=False)
    except Exception:  # any failure: the libyaml path decides
        return False
    return expected is not None and isinstance(got, list) and _identical(expected, got)


def _identical(left: Iterable[Any], right: Iterable[Any]) -> bool:
    left, right = list(left), list(right)
    return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return _identical(a.items(), b.items())
    if isinstance(a, list | tuple):
        return _identical(a, b)
    return bool(a == b)
