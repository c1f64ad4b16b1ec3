"""Reading the objects of input files: the generic half of every offline input (simulate,
validate, `--profile`, `--config`, and the subcommands that read snapshots).

A file is a YAML stream (multi-document; `kind: List` and `<Kind>List` unpacked) or JSON.
Nothing here raises on bad input: each problem becomes one line (`wording.problem_line`),
and what can still be read is read. JSON goes through orjson; YAML through the fast engine
(`fast_yaml`) when it reads exactly as the libyaml one (`libyaml`) would, else through that.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kopfsched.documents import fast_yaml, libyaml
from kopfsched.documents.paths import STDIN, STDIN_NAME, expand, read
from kopfsched.documents.progress import Progress
from kopfsched.documents.wording import describe_type

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency; json is the fallback
    orjson = None  # type: ignore[assignment]
import json

_LEADING_SPACE = re.compile(rb"\s*")


@dataclass(frozen=True, slots=True)
class Document:
    """One object of the input and where it was found."""

    obj: Any
    source: str
    """The file, or `<stdin>`."""
    where: str
    """`file: document N` (`... item M` inside a List): the prefix of every problem line."""


def read_documents(paths: Iterable[str], problems: list[str], *,
                   progress: Progress | None = None) -> Iterator[Document]:
    """Every object of `paths` (files, directories, `-`) in order; problems appended as lines.

    Null documents (an empty `---` section) are skipped; an input without any object is a problem,
    as is a document that is not an object."""
    files = 0
    for path in expand(paths, problems):
        files += 1
        data = read(path, problems)
        if data is None:
            continue
        source = STDIN_NAME if path == STDIN else path
        found, before = 0, len(problems)
        for document in _parse(data, source, problems, progress):
            found += 1
            if progress is not None:
                progress.objects += 1
            yield document
        if found == 0 and len(problems) == before:
            problems.append(f"{source}: no objects (the input is empty)")
    if progress is not None:
        progress.done(files)



def _parse(data: bytes, source: str, problems: list[str], progress: Progress | None) -> Iterator[Document]:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    space = _LEADING_SPACE.match(data)
    start = space.end() if space else 0
    head = data[start:start + 1]
    if head in (b"{", b"[") or source.endswith(".json"):
        parsed = _json(data)
        if not isinstance(parsed, Exception):
            yield from _unpack(parsed, source, 1, problems)
            return
        if source.endswith(".json"):
            problems.append(f"{source}: invalid JSON: {parsed}")
            return
        # Not JSON: a YAML flow mapping such as `{kind: Pod, ...}` starts the same way.
    yield from _yaml_documents(data, source, problems, progress)


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data) if orjson is not None else json.loads(data)
    except (ValueError, RecursionError) as exc:
        return _json_error(data, exc)


def _json_error(data: bytes, exc: Exception) -> Exception:
    # orjson and json both raise JSONDecodeError-like errors with a position.
    pos = getattr(exc, "pos", None)
    msg = getattr(exc, "msg", None) or str(exc)
    if isinstance(pos, int):
        line = data.count(b"\n", 0, pos) + 1
        column = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
        return ValueError(f"line {line}, column {column}: {msg}")
    return ValueError(" ".join(str(msg).split()))


def _unpack(doc: Any, source: str, index: int, problems: list[str]) -> Iterator[Document]:
    """A document, or the items of a List (`kind: List`, or `PodList` and the like from the
    API, whose items may omit their kind)."""
    where = f"{source}: document {index}"
    if doc is None:
        return
    if not isinstance(doc, dict):
        problems.append(f"{where}: must be an object, got {describe_type(doc)}")
        return
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
        items = doc["items"]
        if items is None:
            return
        if not isinstance(items, list):
            problems.append(f"{where}: {kind}: items: must be an array, got {describe_type(items)}")
            return
        item_kind = kind[:-4] or None
        for i, item in enumerate(items, 1):
            item_where = f"{where} item {i}"
            if not isinstance(item, dict):
                problems.append(f"{item_where}: must be an object, got {describe_type(item)}")
                continue
            if item_kind and "kind" not in item:
                item["kind"] = item_kind
            yield Document(item, source, item_where)
        return
    yield Document(doc, source, where)




def _yaml_documents(data: bytes, source: str, problems: list[str],
                    progress: Progress | None) -> Iterator[Document]:
    on_read = (lambda pos: progress.reading(source, pos, len(data))) if progress else None
    for index, doc, problem in yaml_items(data, on_read):
        if problem is not None:
            problems.append(f"{source}: document {index}: {problem}")
        else:
            yield from _unpack(doc, source, index, problems)


def yaml_items(data: bytes, on_read: Callable[[int], None] | None) -> Iterator[libyaml.YamlItem]:
    """The documents of a YAML stream; a syntax error ends it (nothing after it can be trusted)."""
    fast = not libyaml.too_deep_for_c(data)
    if fast and fast_yaml.available():
        items = fast_yaml.read(data.decode("utf-8"), on_read, libyaml.values)
        if items is not None:
            yield from items
            return
    yield from libyaml.items(data, on_read, fast)
