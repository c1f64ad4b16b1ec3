"""Kubernetes resource quantities ("100m", "1.5Gi", "2e3") as exact integers."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
MAX_DIGITS = 1000
"""Longer numbers are refused: no quantity needs them, and Python's int() refuses strings of
over 4300 digits with a bare ValueError."""
MAX_EXPONENT = 100
"""Exponents are clamped to ±100 before the value is computed: 1e999999999 would be a
billion-digit integer. Nothing in a cluster comes near 1e100, so every comparison the
scheduler makes (and rounding a non-zero value up to 1n, as upstream) is unchanged."""
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


class QuantityError(ValueError):
    """A resource quantity that Kubernetes would not accept."""


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity; raises QuantityError for malformed input."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression '{_QUANTITY.pattern}'")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str):
        kind = {dict: "object", list: "array", type(None): "null"}.get(type(value), type(value).__name__)
        raise QuantityError(f"quantity must be a string or a number, got {kind}")  # JSON Schema's names
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(f"invalid quantity {value!r}")
    number, exponent, suffix = match.groups()
    if len(number) > MAX_DIGITS:
        raise QuantityError(f"invalid quantity: more than {MAX_DIGITS} digits")
    result = Fraction(number)
    if exponent:
        digits = exponent[1:].lstrip("+-").lstrip("0") or "0"
        power = MAX_EXPONENT if len(digits) > 4 else min(int(digits), MAX_EXPONENT)
        result *= Fraction(10) ** (-power if exponent[1] == "-" else power)
    else:
        result *= _SUFFIXES[suffix or ""]
    return result


def milli_value(value: str | int | float) -> int:
    """The value in thousandths, rounded up (upstream's Quantity.MilliValue)."""
    return math.ceil(parse_quantity(value) * 1000)


def int_value(value: str | int | float) -> int:
    """The value rounded up to an integer (upstream's Quantity.Value)."""
    return math.ceil(parse_quantity(value))
