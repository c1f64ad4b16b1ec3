"""Reading the objects of input files, as `kubectl apply -f` takes them: the generic half of
every offline input (simulate, validate, `--profile`, `--config`, and the subcommands that
read snapshots).

    FILE      a YAML stream (multi-document; `kind: List` and `<Kind>List` unpacked) or JSON
    DIR       every .yaml, .yml and .json file directly in it, in name order (as kubectl -f DIR)
    -         standard input (once)

Nothing here raises on bad input: each problem becomes one line that names the file, the
document (1-based; `item N` for a List's items) and, when there is one, the object, as
`problem_line` formats it, and what can still be read is read.

Speed: JSON goes through orjson when it is installed; YAML through libyaml's parser
(`yaml.CParser`, PyYAML's C extension) with our own resolver and constructor, faster than
`yaml.CSafeLoader` on a cluster export (most of CSafeLoader's time is its generic Python
constructor; docs/performance.md has the figures). Safety: a document whose aliases expand to more than
`MAX_ALIAS_VALUES` values is refused (a "billion laughs" bomb), input nested deeper than
libyaml's C stack survives goes to the pure-Python parser (which stops cleanly), inputs
over `MAX_INPUT_BYTES` are refused, and binary data is recognised before it is parsed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import stat as statmode
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import numpy
import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from kopfsched import fast_yaml

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency; json is the fallback
    orjson = None  # type: ignore[assignment]
import json

STDIN = "-"
STDIN_NAME = "<stdin>"
SUFFIXES = (".yaml", ".yml", ".json")
MAX_INPUT_BYTES = 1 << 30
"""1 GiB: ten times a 5000-node, 50 000-pod snapshot; a larger input is refused, not swapped."""
MAX_ALIAS_VALUES = 100_000
"""Values one document may produce through aliases; hand-written anchors use a few dozen."""
MAX_NESTING = 500
"""Kubernetes objects nest a few dozen levels; libyaml's C parser recurses per level."""

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_NON_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_LEADING_SPACE = re.compile(rb"\s*")
_DEEP_BLOCK = re.compile(rb"\n[ \t?:-]{%d}" % MAX_NESTING)
# JSON Schema's type names, as the profile checks (config/schema.py) and the API server say them.
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "integer", float: "number",
               bool: "boolean", type(None): "null"}


@dataclass(frozen=True, slots=True)
class Document:
    """One object of the input and where it was found."""

    obj: Any
    source: str
    """The file, or `<stdin>`."""
    where: str
    """`file: document N` (`... item M` inside a List): the prefix of every problem line."""


FREEZE_ABOVE = 200_000
"""Objects a `long_lived` block must leave behind for them to be frozen (a few thousand pods)."""


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """No cyclic garbage collection while a large input is read or built into a cluster: every
    object made then lives on, so the collector's passes over them are work for nothing.
    Collection resumes (if it was on) afterwards.

    When the block left more than `FREEZE_ABOVE` new objects behind, they are moved out of
    the collector's generations (gc.freeze), as the operator does after its initial listing:
    otherwise the first collections after the block traverse them all again (three passes
    over every object of the input). They
    are still freed by reference counting; only cycles among them stay uncollected."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] > FREEZE_ABOVE:
            gc.freeze()
        if enabled:
            gc.enable()


def problem_line(where: str, label: str | None, message: str) -> str:
    """The one line every input problem is reported as: `file: document N: Kind/ns/name: message`."""
    return f"{where}: {label}: {message}" if label else f"{where}: {message}"


UNNAMED_KINDS = frozenset({"KubeSchedulerConfiguration"})
"""Kinds whose objects have no metadata.name."""


def object_label(obj: Any) -> str | None:
    """`Kind/namespace/name`, `Kind/name`, or what is known of it; None for a non-object."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("kind")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    kind_text = kind if isinstance(kind, str) and kind else "?"
    if kind in UNNAMED_KINDS and not name:
        return kind_text  # a configuration file has no metadata: `KubeSchedulerConfiguration`, not `.../?`
    name_text = name if isinstance(name, str) and name else "?"
    return f"{kind_text}/{ns}/{name_text}" if isinstance(ns, str) and ns else f"{kind_text}/{name_text}"


def describe_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


class Progress:
    """Progress lines on stderr while a long load runs: silent for the first `after`
    seconds (small inputs print nothing), then a line at most every `every` seconds."""

    def __init__(self, *, stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic,
                 after: float = 2.0, every: float = 2.0) -> None:
        self.stream = stream
        self.clock = clock
        self.after, self.every = after, every
        self.started = clock()
        self.next_line = self.started + after
        self.printed = False
        self.objects = 0

    def _print(self, line: str) -> None:
        print(f"kopfsched: {line}", file=self.stream or sys.stderr, flush=True)
        self.printed = True

    def reading(self, source: str, done: int, total: int) -> None:
        now = self.clock()
        if now < self.next_line:
            return
        self.next_line = now + self.every
        percent = f"{100 * done // total}% of " if total else ""
        # The fast YAML path hands its objects over at the end: no count before then.
        objects = f"{self.objects} objects so far " if self.objects else ""
        self._print(f"reading {source}: {percent}{_megabytes(total or done)}, {objects}({now - self.started:.0f}s)")

    def done(self, files: int) -> None:
        if self.printed:
            self._print(f"read {self.objects} objects from {files} file(s) in {self.clock() - self.started:.1f}s")


def _size(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} bytes"


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.0f} MB" if size >= 1e6 else f"{size} bytes"


def read_documents(paths: Iterable[str], problems: list[str], *,
                   progress: Progress | None = None) -> Iterator[Document]:
    """Every object of `paths` (files, directories, `-`) in order; problems appended as lines.

    Null documents (an empty `---` section) are skipped; an input without any object is a problem,
    as is a document that is not an object."""
    files = 0
    for path in _expand(paths, problems):
        files += 1
        data = _read(path, problems)
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


def _expand(paths: Iterable[str], problems: list[str]) -> Iterator[str]:
    stdin_used = False
    for path in paths:
        if path == STDIN:
            if stdin_used:
                problems.append(f"{STDIN_NAME}: standard input can be read only once")
                continue
            stdin_used = True
            yield path
        elif os.path.isdir(path):
            try:
                names = sorted(name for name in os.listdir(path) if name.endswith(SUFFIXES))
            except OSError as exc:
                problems.append(f"{path}: cannot read: {exc.strerror or exc}")
                continue
            files = [os.path.join(path, name) for name in names if os.path.isfile(os.path.join(path, name))]
            if not files:
                problems.append(f"{path}: no .yaml, .yml or .json files in the directory")
            yield from files
        else:
            yield path


def _read(path: str, problems: list[str]) -> bytes | None:
    """The input's bytes, or None with a problem: unreadable, too large, binary."""
    name = STDIN_NAME if path == STDIN else path
    too_large = f"{name}: larger than {_size(MAX_INPUT_BYTES)}, the input limit"
    binary = f"{name}: binary data, not YAML or JSON"
    try:
        if path == STDIN:
            data = _head_then_rest(sys.stdin.buffer)
        else:
            with open(path, "rb") as stream:
                if not _size_ok(stream):
                    problems.append(too_large)
                    return None
                data = _head_then_rest(stream)
    except OSError as exc:
        problems.append(f"{name}: cannot read: {exc.strerror or exc}")
        return None
    if data is None:  # recognised in the first 8 KiB: /dev/zero is not read up to the limit
        problems.append(binary)
        return None
    if len(data) > MAX_INPUT_BYTES:  # stdin, a pipe or a device: read up to the limit
        problems.append(too_large)
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        problems.append(f"{name}: line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})")
        return None
    return data


def _head_then_rest(stream: IO[bytes]) -> bytes | None:
    """Up to MAX_INPUT_BYTES + 1 bytes, or None when the first 8 KiB hold a NUL (binary)."""
    head = stream.read(8192)
    if b"\0" in head:
        return None
    return head + stream.read(MAX_INPUT_BYTES + 1 - len(head))


def _size_ok(stream: IO[bytes]) -> bool:
    """False for a regular file over the limit (refused without reading it)."""
    try:
        info = os.fstat(stream.fileno())
    except OSError:
        return True
    return not (statmode.S_ISREG(info.st_mode) and info.st_size > MAX_INPUT_BYTES)


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


# -- YAML ---------------------------------------------------------------------------------------


class _FastResolver(Resolver):
    """Resolver.resolve without path resolvers (PyYAML's safe loaders have none), with
    each plain scalar's implicit tag cached: a cluster export repeats the same few
    thousand keys and values over and over."""

    _cache: dict[str, str] = {}

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass

    def ascend_resolver(self) -> None:
        pass

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            if implicit[0]:
                tag = self._cache.get(value)
                if tag is None:
                    tag = Resolver.resolve(self, kind, value, implicit)
                    if len(self._cache) < 100_000:
                        self._cache[value] = tag
                return tag
            return _STR
        return _SEQ if kind is SequenceNode else _MAP


_CParser = getattr(yaml, "CParser", None) or getattr(getattr(yaml, "cyaml", None), "CParser", None)


class _FlowDepthScanner(yaml.scanner.Scanner):
    """PyYAML's scanner, refusing flow collections nested MAX_NESTING deep: its bookkeeping of
    possible simple keys costs each token time in the flow depth, so `[` x 3000 took 6 s of
    scanning before the composer gave up (found by tests/fuzz)."""

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        if self.flow_level >= MAX_NESTING:
            raise RecursionError("nested too deeply")
        super().fetch_flow_collection_start(TokenClass)


def _composer_class(fast: bool) -> type:
    """A class that composes YAML nodes: libyaml's parser when present and `fast`, else PyYAML's own."""
    if fast and _CParser is not None:
        return type("_CComposer", (_CParser, SafeConstructor, _FastResolver), {})
    return type("_PyComposer", (yaml.reader.Reader, _FlowDepthScanner, yaml.parser.Parser,
                                yaml.composer.Composer, SafeConstructor, _FastResolver), {})


def _init_composer(cls: Any, stream: Any) -> Any:
    composer = cls.__new__(cls)
    if _CParser is not None and issubclass(cls, _CParser):
        _CParser.__init__(composer, stream)
    else:
        yaml.reader.Reader.__init__(composer, stream)
        yaml.scanner.Scanner.__init__(composer)
        yaml.parser.Parser.__init__(composer)
        yaml.composer.Composer.__init__(composer)
    SafeConstructor.__init__(composer)
    Resolver.__init__(composer)
    return composer


class _Chunks:
    """The stream libyaml reads from, so that progress can follow it."""

    def __init__(self, data: bytes, on_read: Callable[[int], None]) -> None:
        self.data, self.pos, self.on_read = data, 0, on_read

    def read(self, size: int) -> bytes:
        chunk = self.data[self.pos:self.pos + size]
        self.pos += len(chunk)
        self.on_read(self.pos)
        return chunk


def _too_deep_for_c(data: bytes) -> bool:
    """Whether the input might nest deeper than libyaml's recursion survives (it crashes
    the process, uncatchable). A cheap over-estimate: flow brackets counted without
    regard to quoting, block levels by the indentation or indicators that each needs."""
    if _DEEP_BLOCK.match(b"\n" + data[:MAX_NESTING]) or _DEEP_BLOCK.search(data):
        return True
    brackets = data.translate(None, _NON_BRACKETS)
    if len(brackets) < MAX_NESTING:
        return False
    codes = numpy.frombuffer(brackets, dtype=numpy.uint8)
    steps = numpy.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(numpy.cumsum(steps).max()) >= MAX_NESTING


def _yaml_documents(data: bytes, source: str, problems: list[str],
                    progress: Progress | None) -> Iterator[Document]:
    on_read = (lambda pos: progress.reading(source, pos, len(data))) if progress else None
    for index, doc, problem in _yaml_items(data, on_read):
        if problem is not None:
            problems.append(f"{source}: document {index}: {problem}")
        else:
            yield from _unpack(doc, source, index, problems)


YamlItem = tuple[int, Any, str | None]
"""(document index from 1, the object, or None with a problem)."""


def _yaml_items(data: bytes, on_read: Callable[[int], None] | None) -> Iterator[YamlItem]:
    """The documents of a YAML stream; a syntax error ends it (nothing after it can be trusted)."""
    fast = not _too_deep_for_c(data)
    if fast and fast_yaml.available():
        items = fast_yaml.read(data.decode("utf-8"), on_read, _libyaml_values)
        if items is not None:
            yield from items
            return
    yield from _libyaml_items(data, on_read, fast)


def _libyaml_values(scalars: list[str]) -> list[Any] | None:
    """Plain scalars as the libyaml path reads them (fast_yaml checks its readings against it)."""
    items = list(_libyaml_items("".join(f"- {s}\n" for s in scalars).encode("utf-8"), None, True))
    if len(items) != 1 or items[0][2] is not None or not isinstance(items[0][1], list):
        return None
    return items[0][1]


def _libyaml_items(data: bytes, on_read: Callable[[int], None] | None, fast: bool) -> Iterator[YamlItem]:
    anchors = b"&" in data  # without an anchor there is no alias: the plain conversion is enough
    stream = _Chunks(data, on_read) if fast and on_read else data if fast else data.decode("utf-8")
    composer = _init_composer(_composer_class(fast), stream)
    index = 0
    while True:
        index += 1
        try:
            if not composer.check_node():
                return
            node = composer.get_node()
            doc = _Converter(composer).convert(node) if anchors else _plain(node, composer)
        except yaml.YAMLError as exc:
            yield index, None, _yaml_error(exc)
            return
        except _ConvertError as exc:
            yield index, None, str(exc)
            continue
        except RecursionError:
            yield index, None, "nested too deeply"
            return
        yield index, doc, None


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}invalid YAML: {problem or ' '.join(str(exc).split())}"


def _plain(node: Node, constructor: SafeConstructor) -> Any:
    """_Converter's conversion for a stream without anchors: no alias to track."""
    kind = type(node)
    if kind is ScalarNode:
        tag = node.tag
        if tag in (_STR, _TIMESTAMP):
            return node.value
        return _Converter(constructor)._scalar(node)
    if kind is MappingNode:
        if node.tag != _MAP or any(k.tag == _MERGE for k, _ in node.value):
            return _Converter(constructor).convert(node)
        result = {}
        for key_node, value_node in node.value:
            key = _plain(key_node, constructor)
            try:
                result[key] = _plain(value_node, constructor)
            except TypeError as exc:
                raise _ConvertError(key_node.start_mark.line,
                                    f"a key must be a scalar, got {describe_type(key)}") from exc
        return result
    if node.tag != _SEQ:
        return constructor.construct_object(node, deep=True)
    return [_plain(child, constructor) for child in node.value]


class _ConvertError(Exception):
    """A document that parses but cannot become an object; str() is its problem line's tail."""

    def __init__(self, line: int | None, message: str) -> None:
        where = f"line {line + 1}: " if line is not None else ""
        super().__init__(f"{where}invalid YAML: {message}")


class _Converter:
    """YAML nodes to Python objects, faster than SafeConstructor for the common tags.

    Aliases are expanded into copies (no object is shared between two places, so code that
    sets defaults on one pod never changes another), and the values they produce are
    counted against MAX_ALIAS_VALUES. Timestamps stay strings, as the API server's JSON has
    them. Other tags go through SafeConstructor (ints, floats, booleans, nulls, binary)."""

    def __init__(self, constructor: SafeConstructor) -> None:
        self.constructor = constructor
        constructor.constructed_objects = {}
        self.seen: set[int] = set()
        self.active: set[int] = set()
        self.budget = MAX_ALIAS_VALUES

    def convert(self, node: Node, in_alias: bool = False) -> Any:
        kind = type(node)
        if kind is ScalarNode:
            if in_alias:
                self._spend()
            tag = node.tag
            if tag in (_STR, _TIMESTAMP):
                return node.value
            return self._scalar(node)
        key = id(node)
        if key in self.active:
            raise _ConvertError(node.start_mark.line, "an alias refers to itself")
        if key in self.seen:
            in_alias = True
        else:
            self.seen.add(key)
        if in_alias:
            self._spend()
        self.active.add(key)
        try:
            if kind is MappingNode:
                return self._mapping(node, in_alias)
            if node.tag != _SEQ:
                return self._other(node)
            return [self.convert(child, in_alias) for child in node.value]
        finally:
            self.active.discard(key)

    def _spend(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise _ConvertError(None, f"aliases expand to more than {MAX_ALIAS_VALUES} values (an alias bomb?)")

    def _mapping(self, node: Any, in_alias: bool) -> dict[Any, Any]:
        if node.tag != _MAP:
            return self._other(node)
        result: dict[Any, Any] = {}
        merged: list[dict[Any, Any]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                value = self.convert(value_node, in_alias)
                sources = value if isinstance(value, list) else [value]
                if not all(isinstance(s, dict) for s in sources):
                    raise _ConvertError(key_node.start_mark.line,
                                        "a merge key (<<) takes a mapping or a list of mappings")
                merged.extend(sources)
                continue
            key = self.convert(key_node, in_alias)
            try:
                result[key] = self.convert(value_node, in_alias)
            except TypeError as exc:  # an unhashable key, e.g. a mapping used as a key
                raise _ConvertError(key_node.start_mark.line,
                                    f"a key must be a scalar, got {describe_type(key)}") from exc
        if merged:
            # Explicit keys win over merged ones; among merged mappings the first wins.
            base: dict[Any, Any] = {}
            for source in reversed(merged):
                base.update(source)
            base.update(result)
            return base
        return result

    def _scalar(self, node: Node) -> Any:
        try:
            return self.constructor.construct_object(node)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError) as exc:
            raise _ConvertError(node.start_mark.line, str(exc)) from exc

    def _other(self, node: Node) -> Any:
        """Explicitly tagged collections (!!set, !!omap, !!pairs): rare, left to PyYAML."""
        return self.constructor.construct_object(node, deep=True)
