"""CEL device selectors (resource.k8s.io DeviceSelector.cel.expression), compiled once each.

The expressions see one variable, `device`, as upstream's DRA CEL environment does:

- `device.driver`: the driver name;
- `device.allowMultipleAllocations`: whether the device may be shared (false when unset);
- `device.attributes["<domain>"].<name>`: the device's attributes grouped by domain (an
  unqualified attribute name belongs to the driver's domain); a domain the device has no
  attribute in reads as an empty map, so only the attribute lookup fails;
- `device.capacity["<domain>"].<name>`: capacities, as quantities.

Plus upstream's Kubernetes CEL library functions that selectors use: `quantity("40Gi")` and
the Quantity methods `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `sign`,
`isInteger`, `add`, `sub`; `semver("1.2.3")` with `compareTo`, `isGreaterThan`,
`isLessThan`, `major`, `minor`, `patch`; and the CEL strings extension (`lowerAscii`, ...).

The engine is cel-expr-python (Google's CEL C++ runtime, type-checked as cel-go is); see
docs/dra.md for why. Known differences from cel-go: a quantity is an int of milli-units (so
`quantity("1") == 1000`, and comparing a quantity with `>=` compiles where upstream rejects
it), a version is a string, and `device` is dynamically typed (a misspelt field such as
`device.atributes` fails when evaluated, not when compiled).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.quantity import QuantityError, parse_quantity


class CELError(Exception):
    """A compile or runtime error, worded as upstream's (e.g. "no such key: model")."""


def _quantity(text: str) -> int:
    try:
        return _milli(parse_quantity(text))
    except QuantityError as exc:
        raise ValueError(f"invalid quantity {text!r}") from exc


def _milli(value: Any) -> int:
    scaled = value * 1000
    return int(scaled) if scaled == int(scaled) else int(scaled) + (1 if scaled > 0 else 0)


def quantity_milli(raw: Any) -> int:
    """A capacity value as the int of milli-units CEL sees (0 when malformed)."""
    try:
        return _milli(parse_quantity(raw))
    except QuantityError:
        return 0


def _compare(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _as_integer(a: int) -> int:
    if a % 1000:
        raise ValueError("cannot convert value to integer")
    return a // 1000


_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                     r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


def _semver_key(text: str) -> tuple[Any, ...]:
    match = _SEMVER.match(text)
    if match is None:
        raise ValueError(f"invalid semver {text!r}")
    major, minor, patch, pre, _ = match.groups()
    # A release sorts after its pre-releases; numeric identifiers sort below alphanumeric ones.
    pre_key: tuple[Any, ...] = (1,) if pre is None else (0, *(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split(".")))
    return int(major), int(minor), int(patch), pre_key


def _semver(text: str) -> str:
    _semver_key(text)
    return text


def _semver_compare(a: str, b: str) -> int:
    ka, kb = _semver_key(a), _semver_key(b)
    return (ka > kb) - (ka < kb)


def _overload(name: str, ident: str, result: Any, params: list[Any], impl: Any, *, member: bool) -> Any:
    from cel_expr_python import cel

    return cel.FunctionDecl(name, [cel.Overload(ident, result, params, is_member=member, impl=impl)])


def _functions() -> list[Any]:
    from cel_expr_python import cel

    T = cel.Type
    decls = [
        _overload("quantity", "quantity_string", T.INT, [T.STRING], _quantity, member=False),
        _overload("semver", "semver_string", T.STRING, [T.STRING], _semver, member=False),
        _overload("asInteger", "quantity_asInteger", T.INT, [T.INT], _as_integer, member=True),
        _overload("asApproximateFloat", "quantity_asApproximateFloat", T.DOUBLE, [T.INT],
                  lambda a: a / 1000, member=True),
        _overload("isInteger", "quantity_isInteger", T.BOOL, [T.INT], lambda a: a % 1000 == 0, member=True),
        _overload("sign", "quantity_sign", T.INT, [T.INT], lambda a: (a > 0) - (a < 0), member=True),
        _overload("add", "quantity_add", T.INT, [T.INT, T.INT], lambda a, b: a + b, member=True),
        _overload("sub", "quantity_sub", T.INT, [T.INT, T.INT], lambda a, b: a - b, member=True),
        _overload("major", "semver_major", T.INT, [T.STRING], lambda a: _semver_key(a)[0], member=True),
        _overload("minor", "semver_minor", T.INT, [T.STRING], lambda a: _semver_key(a)[1], member=True),
        _overload("patch", "semver_patch", T.INT, [T.STRING], lambda a: _semver_key(a)[2], member=True),
    ]
    for name, test in (("compareTo", None), ("isGreaterThan", 1), ("isLessThan", -1)):
        quantity_impl = _compare if test is None else (lambda a, b, t=test: _compare(a, b) == t)
        semver_impl = _semver_compare if test is None else (lambda a, b, t=test: _semver_compare(a, b) == t)
        result = T.INT if test is None else T.BOOL
        decls.append(cel.FunctionDecl(name, [
            cel.Overload(f"quantity_{name}", result, [T.INT, T.INT], is_member=True, impl=quantity_impl),
            cel.Overload(f"semver_{name}", result, [T.STRING, T.STRING], is_member=True, impl=semver_impl),
        ]))
    return decls


_ENV: Any = None


def _env() -> Any:
    global _ENV
    if _ENV is None:
        # Imported on the first selector: pods without claims never load the CEL runtime.
        from cel_expr_python import cel
        from cel_expr_python.ext import ext_strings

        _ENV = cel.NewEnv(variables={"device": cel.Type.DYN}, functions=_functions(),
                          extensions=[ext_strings.ExtStrings()])
    return _ENV


_DOMAIN_LOOKUP = re.compile(r"""\b(attributes|capacity)\s*\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]""")
_NOT_FOUND = re.compile(r'^NOT_FOUND: Key not found in map : "(.*)"$')


@dataclass(slots=True)
class Expression:
    """One compiled selector expression. `domains` are the attribute/capacity domains it
    looks up by a literal, which read as empty maps on a device that lacks them."""

    source: str
    program: Any
    attribute_domains: tuple[str, ...]
    capacity_domains: tuple[str, ...]

    def matches(self, device: dict[str, Any]) -> bool:
        """Evaluate against a device as `device_variable` built it; raises CELError."""
        for domain in self.attribute_domains:
            device["attributes"].setdefault(domain, {})
        for domain in self.capacity_domains:
            device["capacity"].setdefault(domain, {})
        value = self.program.eval(data={"device": device})
        kind = value.type().name()
        if kind == "BOOL":
            return bool(value.value())
        if kind == "ERROR":
            raise CELError(_runtime_message(str(value.value())))
        raise CELError(f"must evaluate to bool, got {kind.lower()}")


def _runtime_message(text: str) -> str:
    match = _NOT_FOUND.match(text)
    if match is not None:
        return f"no such key: {match.group(1)}"
    return re.sub(r"^[A-Z_]+: ", "", text)


_CACHE: dict[str, Expression | CELError] = {}
_CACHE_LIMIT = 4096


def compile_expression(source: str) -> Expression:
    """The compiled expression, from a process-wide cache (selectors repeat across claims,
    classes and cycles; upstream keeps an LRU of them too). Raises CELError."""
    cached = _CACHE.get(source)
    if cached is None:
        cached = _compile(source)
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[source] = cached
    if isinstance(cached, CELError):
        raise cached
    return cached


def _compile(source: str) -> Expression | CELError:
    try:
        program = _env().compile(source)
    except RuntimeError as exc:
        return CELError(str(exc).removeprefix("INVALID_ARGUMENT: ").strip())
    kind = program.return_type().name()
    if kind not in ("BOOL", "DYN"):
        return CELError(f"must evaluate to bool, got {kind.lower()}")
    attribute_domains: list[str] = []
    capacity_domains: list[str] = []
    for field, double, single in _DOMAIN_LOOKUP.findall(source):
        (attribute_domains if field == "attributes" else capacity_domains).append(double or single)
    return Expression(source, program, tuple(dict.fromkeys(attribute_domains)), tuple(dict.fromkeys(capacity_domains)))



def attribute_value(raw: Any) -> Any:
    """A DeviceAttribute ({"string": ..} / {"int": ..} / {"bool": ..} / {"version": ..}) as a
    plain value; None when it holds none of them."""
    if not isinstance(raw, dict):
        return None
    for key in ("string", "int", "bool", "version"):
        if key in raw:
            return raw[key]
    return None


def qualify(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of an attribute or capacity name; unqualified names are the driver's."""
    domain, slash, ident = name.rpartition("/")
    return (domain, ident) if slash else (driver, name)


def device_variable(driver: str, raw_device: dict[str, Any]) -> dict[str, Any]:
    """The `device` variable for a ResourceSlice device (v1: attributes and capacity at the top)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, raw in (raw_device.get("attributes") or {}).items():
        value = attribute_value(raw)
        if value is not None:
            domain, ident = qualify(name, driver)
            attributes.setdefault(domain, {})[ident] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, raw in (raw_device.get("capacity") or {}).items():
        domain, ident = qualify(name, driver)
        value = raw.get("value") if isinstance(raw, dict) else raw
        capacity.setdefault(domain, {})[ident] = quantity_milli(value)
    return {"driver": driver, "allowMultipleAllocations": raw_device.get("allowMultipleAllocations") is True,
            "attributes": attributes, "capacity": capacity}
