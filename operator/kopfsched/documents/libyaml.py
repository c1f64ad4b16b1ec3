"""The libyaml engine: PyYAML's C parser (`yaml.CParser`) with our own resolver and
constructor, three times faster than `yaml.CSafeLoader` on a cluster export (most of
CSafeLoader's time is its generic Python constructor). It reads every input the fast engine
(`fast_yaml`) declines, and reports every syntax error. Safety: a document whose aliases
expand to more than `MAX_ALIAS_VALUES` values is refused (a "billion laughs" bomb), and input
nested deeper than libyaml's C stack survives goes to the pure-Python parser (which stops
cleanly; `too_deep_for_c`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy
import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from kopfsched.documents.wording import describe_type

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

YamlItem = tuple[int, Any, str | None]
"""(document index from 1, the object, or None with a problem)."""


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
    possible simple keys costs each token time in the flow depth, so `[` x 3000 took seconds of
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


def too_deep_for_c(data: bytes) -> bool:
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


def values(scalars: list[str]) -> list[Any] | None:
    """Plain scalars as the libyaml path reads them (fast_yaml checks its readings against it)."""
    found = list(items("".join(f"- {s}\n" for s in scalars).encode("utf-8"), None, True))
    if len(found) != 1 or found[0][2] is not None or not isinstance(found[0][1], list):
        return None
    return found[0][1]


def items(data: bytes, on_read: Callable[[int], None] | None, fast: bool) -> Iterator[YamlItem]:
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
