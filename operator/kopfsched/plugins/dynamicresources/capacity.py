"""Consumable capacity (upstream's DRAConsumableCapacity with DRAFractionalCapacityRange, both
beta and on in v1.37): how much of a device's `capacity` one request consumes, and whether
that still fits beside what other allocations consume.

A request may list `capacity.requests` (name → quantity). For each capacity of a device the
consumed amount is (upstream's calculateConsumedCapacity):

- not requested: the policy's `default`, else the whole `value`;
- requested, no `requestPolicy`: the request as it is;
- `validRange`: below `min` rounds up to `min`; with `step`, up to `min + n*step` (in
  thousandths when every bound is a whole number of thousandths, which DRAFractionalCapacityRange
  allows, else in whole units); without `step`, as it is;
- `validValues`: up to the first valid value at or above it, or the request itself above all.

The device fits when every requested name is one of its capacities, no consumed amount breaks
the policy (above `max`, off the step, not a valid value; `default` itself always passes) and,
per capacity, what the allocated claims consume plus what this allocation already takes plus
this request stays within `value`. A request that cannot be represented in the range
arithmetic, or a negative amount, is an error for the whole attempt (CapacityError), not a
device that does not fit.

Quantities keep their format, so that `consumedCapacity` reads as upstream writes it
(Quantity.String: `1Gi`, `1500m`, `2e3`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kopfsched.framework.quantity import QuantityError, parse_quantity

MAX_INT64 = 2**63 - 1
DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"


class CapacityError(Exception):
    """A capacity request the range arithmetic cannot represent, or a negative amount."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A resource.Quantity: its exact value and the format it prints in."""

    value: Fraction
    format: str = DECIMAL_SI

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


def quantity(raw: Any) -> Quantity:
    """Parse as the API server does (the format from the suffix; finer than 1n rounds up)."""
    value = parse_quantity(raw)
    if value.denominator != 1 and (value * 10**9).denominator != 1:
        value = Fraction(math.ceil(value * 10**9), 10**9)
    text = raw.strip() if isinstance(raw, str) else ""
    if text.endswith(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")):
        return Quantity(value, BINARY_SI)
    if "e" in text.lower() and not text.endswith("E"):
        return Quantity(value, DECIMAL_EXPONENT)
    return Quantity(value, DECIMAL_SI)


def format_quantity(value: Fraction, fmt: str) -> str:
    """Quantity.String (CanonicalizeBytes): BinarySI in powers of 1024 when a whole number of
    at least 1024 in size, else decimal with an exponent that is a multiple of three."""
    if value == 0:
        return "0"
    if fmt == BINARY_SI and abs(value) >= 1024 and value.denominator == 1:
        number, power = int(value), 0
        while number % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
            number, power = number // 1024, power + 1
        return f"{number}{_BINARY_SUFFIXES[power]}"
    exponent = 0
    mantissa = value
    while mantissa.denominator != 1:
        mantissa, exponent = mantissa * 10, exponent - 1
    number = int(mantissa)
    while number % 10 == 0:
        number, exponent = number // 10, exponent + 1
    while exponent % 3:
        number, exponent = number * 10, exponent - 1
    if fmt == DECIMAL_EXPONENT:
        return f"{number}e{exponent}" if exponent else str(number)
    suffix = _DECIMAL_SUFFIXES.get(exponent)
    return f"{number}{suffix}" if suffix is not None else f"{number}e{exponent}"


@dataclass(frozen=True, slots=True)
class Capacity:
    """One DeviceCapacity: its value and request policy."""

    value: Quantity
    policy: bool = False
    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    ranged: bool = False
    minimum: Quantity | None = None
    maximum: Quantity | None = None
    step: Quantity | None = None


def _optional(raw: Any) -> Quantity | None:
    return None if raw is None else quantity(raw)


def device_capacities(raw_device: Mapping[str, Any]) -> dict[str, Capacity]:
    """A ResourceSlice device's capacities; a malformed quantity reads as zero."""
    out: dict[str, Capacity] = {}
    for name, raw in (raw_device.get("capacity") or {}).items():
        if not isinstance(raw, dict):
            continue
        try:
            policy = raw.get("requestPolicy")
            if not isinstance(policy, dict):
                out[name] = Capacity(quantity(raw.get("value", 0)))
                continue
            valid_range = policy.get("validRange")
            ranged = isinstance(valid_range, dict)
            bounds = valid_range if isinstance(valid_range, dict) else {}
            out[name] = Capacity(quantity(raw.get("value", 0)), True, _optional(policy.get("default")),
                                 tuple(quantity(v) for v in policy.get("validValues") or ()), ranged,
                                 _optional(bounds.get("min")), _optional(bounds.get("max")),
                                 _optional(bounds.get("step")))
        except QuantityError:
            out[name] = Capacity(Quantity(Fraction(0)))
    return out


def request_capacities(spec: Mapping[str, Any]) -> dict[str, Quantity] | None:
    """A request's `capacity.requests`, None when it has none. Raises QuantityError."""
    requests = (spec.get("capacity") or {}).get("requests")
    if requests is None:
        return None
    return {name: quantity(raw) for name, raw in requests.items()}


def _milli(q: Quantity) -> int | None:
    """safeMilliValue: the value in thousandths when that loses nothing and fits an int64."""
    scaled = q.value * 1000
    if scaled.denominator != 1 or abs(scaled) > MAX_INT64:
        return None
    return int(scaled)


def _int(q: Quantity) -> int:
    """Quantity.Value: rounded up, away from zero."""
    return math.ceil(q.value) if q.value >= 0 else math.floor(q.value)


def _use_milli(capacity: Capacity) -> bool:
    for index, bound in enumerate((capacity.minimum, capacity.maximum, capacity.step)):
        if bound is None:
            continue
        milli = _milli(bound)
        if milli is None or (index == 2 and milli < 1):
            return False
    return True


def _round_up_range(requested: Quantity, capacity: Capacity) -> Quantity:
    minimum, step = capacity.minimum, capacity.step
    assert minimum is not None
    if requested.value < minimum.value:
        return minimum
    if step is None:
        return requested
    if _use_milli(capacity):
        requested_milli = _milli(requested)
        if requested_milli is None:
            raise CapacityError(f"{_NOT_REPRESENTABLE}: request {requested} is not a representable milli value")
        step_milli, min_milli = _milli(step) or 0, _milli(minimum) or 0
        added = requested_milli - min_milli
        n = -(-added // step_milli)
        if n > (MAX_INT64 - min_milli) // step_milli:
            raise CapacityError(f"{_NOT_REPRESENTABLE}: rounding request {requested} up to the next step passes "
                                "the milli-value range")
        return Quantity(Fraction(min_milli + step_milli * n, 1000), step.format)
    if requested.value > MAX_INT64:
        raise CapacityError(f"{_NOT_REPRESENTABLE}: request {requested} exceeds MaxInt64")
    step_int, min_int = _int(step), _int(minimum)
    added = _int(requested) - min_int
    n = added // step_int if added % step_int == 0 else added // step_int + 1
    if min_int >= 0 and n > (MAX_INT64 - min_int) // step_int:
        raise CapacityError(f"{_NOT_REPRESENTABLE}: rounding request {requested} up to the next step passes MaxInt64")
    return Quantity(Fraction(min_int + step_int * n), step.format)


def consumed(requested: Quantity | None, capacity: Capacity) -> Quantity:
    """What a request takes of one capacity (upstream's calculateConsumedCapacity)."""
    if requested is None:
        return capacity.default if capacity.default is not None else capacity.value
    if not capacity.policy:
        return requested
    if capacity.ranged and capacity.minimum is not None:
        return _round_up_range(requested, capacity)
    if capacity.valid_values:
        return next((v for v in capacity.valid_values if requested.value <= v.value), requested)
    return requested


def _violates(amount: Quantity, capacity: Capacity) -> bool:
    if not capacity.policy:
        return False
    if capacity.default is not None and amount.value == capacity.default.value:
        return False
    if capacity.ranged:
        if capacity.maximum is not None and amount.value > capacity.maximum.value:
            return True
        if capacity.step is not None and capacity.minimum is not None:
            if _use_milli(capacity):
                requested = _milli(amount)
                if requested is None:
                    return True
                step, minimum = _milli(capacity.step) or 0, _milli(capacity.minimum) or 0
            else:
                requested, step, minimum = _int(amount), _int(capacity.step), _int(capacity.minimum)
            return step != 0 and (requested - minimum) % step != 0
        return False
    if capacity.valid_values:
        return all(amount.value != v.value for v in capacity.valid_values)
    return False


def consumption(requests: Mapping[str, Quantity] | None, capacities: Mapping[str, Capacity]) -> dict[str, Quantity]:
    """What a request consumes of every capacity of the device (GetConsumedCapacityFromRequest).
    Raises CapacityError, worded as upstream's `capacity "name": ...`."""
    out = {}
    for name in sorted(capacities):
        capacity = capacities[name]
        try:
            amount = consumed(None if requests is None else requests.get(name), capacity)
        except CapacityError as exc:
            raise CapacityError(f"capacity {json.dumps(name)}: {exc}") from None
        if amount.value < 0:
            raise CapacityError(f"capacity {json.dumps(name)}: capacity value is negative")
        out[name] = amount
    return out


def fits(requests: Mapping[str, Quantity] | None, capacities: Mapping[str, Capacity],
         allocated: Mapping[str, Fraction] | None, allocating: Mapping[str, Fraction] | None) -> bool:
    """Whether the request fits the device beside the allocated claims' and this allocation's
    consumption (upstream's CmpRequestOverCapacity). Raises CapacityError."""
    if requests and any(name not in capacities for name in requests):
        return False
    amounts = consumption(requests, capacities)
    for name, amount in amounts.items():
        capacity = capacities[name]
        if _violates(amount, capacity):
            return False
        total = amount.value
        if allocated:
            total += allocated.get(name, 0)
        if allocating:
            total += allocating.get(name, 0)
        if total > capacity.value.value:
            return False
    return True
