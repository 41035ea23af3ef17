"""DRA's CEL selectors evaluated against published devices, as the scheduler evaluates them.

A selector sees one `device`: `driver`, `attributes[domain][name]`,
`capacity[domain][name]` and `allowMultipleAllocations` (KEP-5075), the domain of an
unqualified name being the driver's (as the resource.k8s.io API defines; a qualified
`example.com/name` is in domain example.com). Attribute values are strings, integers,
booleans and versions (semantic versions); capacities are quantities. Kubernetes' CEL
libraries are given as far as selectors use them: `quantity()`, `isQuantity()` and a
quantity's `compareTo`, `isLessThan`, `isGreaterThan`, `asInteger`,
`asApproximateFloat`, `sign`, `isInteger`, `add`, `sub`; `semver()`, `isSemver()` and a
version's `compareTo`, `isLessThan`, `isGreaterThan`, `major`, `minor`, `patch`.

A runtime error (a missing attribute, a type mismatch) makes the scheduler fail the whole
allocation ("CEL runtime error"), not only that device: `Match.error` carries it.
The expressions run on the `common-expression-language` package (the Rust `cel`
interpreter): no loops, no I/O, bounded by the expression's size (the apiserver caps a
selector at 10 KiB), so a hostile selector costs a bounded evaluation per device.
tests/cluster/test_cluster_cel_differential.py checks every answer against the real
scheduler.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import cel

from objtypes import Obj
from reconcilers.devices.taints import Taint, device_taints

_QUANTITY = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:([eE][+-]?[0-9]+)|([a-zA-Z]*))$")
_SUFFIXES = {
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
_SEMVER = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
# How the values of the two library types travel through the interpreter: maps with
# one marker key, which the library functions read back.
QUANTITY, SEMVER = "@quantity", "@semver"


class SelectorError(Exception):
    """A selector that does not compile, or fails on a device (a CEL runtime error)."""


def quantity_value(text: str) -> Fraction:
    """A Kubernetes quantity's exact value (`80Gi`, `1.5`, `500m`, `1e3`)."""
    match = _QUANTITY.match(text.strip())
    if match is None or (match.group(4) or "") not in _SUFFIXES:
        raise SelectorError(f"quantities must match the regular expression: {text!r}")
    sign, number, exponent, suffix = match.groups()
    value = Fraction(number) * (Fraction(10) ** int(exponent[1:]) if exponent else 1)
    value *= _SUFFIXES[suffix or ""]
    return -value if sign == "-" else value


def _semver_key(text: str) -> tuple[Any, ...]:
    match = _SEMVER.match(text)
    if match is None:
        raise SelectorError(f"could not parse {text!r} as semver")
    major, minor, patch, pre = match.groups()
    # A prerelease sorts before its release; its identifiers compare numerically when
    # numeric, else lexically, numeric ones first (semver 2.0.0, section 11).
    pre_key: tuple[Any, ...] = (
        (0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))
        if pre
        else (1, ())
    )
    return (int(major), int(minor), int(patch), pre_key)


def _quantity(value: Any) -> Fraction:
    if isinstance(value, Mapping) and QUANTITY in value:
        return quantity_value(str(value[QUANTITY]))
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    raise SelectorError(f"no such overload: quantity expected, got {value!r}")


def _semver(value: Any) -> tuple[Any, ...]:
    if isinstance(value, Mapping) and SEMVER in value:
        return _semver_key(str(value[SEMVER]))
    raise SelectorError(f"no such overload: semver expected, got {value!r}")


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Mapping) and SEMVER in a:
        x, y = _semver(a), _semver(b)
        return (x > y) - (x < y)
    p, q = _quantity(a), _quantity(b)
    return (p > q) - (p < q)


def _as_quantity(value: Fraction) -> Obj:
    text = str(value.numerator) if value.denominator == 1 else f"{float(value)!r}"
    return {QUANTITY: text}


def _checked_quantity(text: Any) -> Obj:
    quantity_value(str(text))
    return {QUANTITY: str(text)}


def _checked_semver(text: Any) -> Obj:
    _semver_key(str(text))
    return {SEMVER: str(text)}


def _is(parse: Callable[[str], Any]) -> Callable[[Any], bool]:
    def check(text: Any) -> bool:
        try:
            parse(str(text))
        except SelectorError:
            return False
        return True

    return check


def _as_integer(q: Any) -> int:
    value = _quantity(q)
    if value.denominator != 1 or not -(2**63) <= value.numerator < 2**63:
        raise SelectorError("cannot convert value to integer")
    return value.numerator


LIBRARY: dict[str, Callable[..., Any]] = {
    "quantity": _checked_quantity,
    "isQuantity": _is(quantity_value),
    "semver": _checked_semver,
    "isSemver": _is(_semver_key),
    "compareTo": _compare,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "sign": lambda q: (_quantity(q) > 0) - (_quantity(q) < 0),
    "isInteger": lambda q: _quantity(q).denominator == 1,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: float(_quantity(q)),
    "add": lambda a, b: _as_quantity(_quantity(a) + _quantity(b)),
    "sub": lambda a, b: _as_quantity(_quantity(a) - _quantity(b)),
    "major": lambda v: _semver(v)[0],
    "minor": lambda v: _semver(v)[1],
    "patch": lambda v: _semver(v)[2],
}


@dataclass(frozen=True)
class Device:
    """One published device, as a selector sees it, and where it is."""

    driver: str
    pool: str
    name: str
    node: str  # "" for a slice of all nodes (or selected by label)
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allow_multiple: bool = False  # allowMultipleAllocations (KEP-5075): a shareable device

    @property
    def path(self) -> str:
        """`driver/pool/device`, the allocation result's three names."""
        return f"{self.driver}/{self.pool}/{self.name}"

    def variable(self) -> Obj:
        return {
            "driver": self.driver,
            "attributes": {d: dict(v) for d, v in self.attributes.items()},
            "capacity": {d: dict(v) for d, v in self.capacity.items()},
            "allowMultipleAllocations": self.allow_multiple,
        }

    def attribute(self, name: str) -> Any:
        """An attribute of the driver's own domain, as a plain value (for messages)."""
        value = (self.attributes.get(self.driver) or {}).get(name)
        if isinstance(value, Mapping):
            return value.get(SEMVER, value.get(QUANTITY))
        return value

    def memory(self) -> str | None:
        return self.capacity_of("memory")

    def capacity_of(self, name: str) -> str | None:
        """A capacity by its name in the slice (unqualified: the driver's domain)."""
        domain, short = _split(self.driver, name)
        value = (self.capacity.get(domain) or {}).get(short)
        return str(value[QUANTITY]) if isinstance(value, Mapping) else None


def _split(driver: str, name: str) -> tuple[str, str]:
    domain, _, short = name.rpartition("/")
    return (domain or driver, short)


def _attribute_value(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return None
    for kind in ("string", "int", "bool"):
        if kind in value:
            return value[kind]
    if "version" in value:
        return {SEMVER: str(value["version"])}
    return None


def devices(slices: Iterable[Obj]) -> list[Device]:
    """Every device the newest generation of each pool publishes."""
    slices = [s for s in slices if isinstance(s, Mapping)]
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        key = (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
        gen = int((spec.get("pool") or {}).get("generation") or 0)
        newest[key] = max(newest.get(key, gen), gen)
    found = []
    for s in slices:
        spec = s.get("spec") or {}
        driver, pool = (
            str(spec.get("driver") or ""),
            str((spec.get("pool") or {}).get("name") or ""),
        )
        if int((spec.get("pool") or {}).get("generation") or 0) < newest[(driver, pool)]:
            continue
        for d in spec.get("devices") or []:
            if not isinstance(d, Mapping):
                continue
            attributes: dict[str, dict[str, Any]] = {}
            for name, value in (d.get("attributes") or {}).items():
                domain, short = _split(driver, str(name))
                attributes.setdefault(domain, {})[short] = _attribute_value(value)
            capacity: dict[str, dict[str, Any]] = {}
            for name, value in (d.get("capacity") or {}).items():
                if isinstance(value, Mapping) and value.get("value") is not None:
                    domain, short = _split(driver, str(name))
                    capacity.setdefault(domain, {})[short] = {QUANTITY: str(value["value"])}
            found.append(
                Device(
                    driver,
                    pool,
                    str(d.get("name") or ""),
                    str(spec.get("nodeName") or ""),
                    attributes,
                    capacity,
                    device_taints(d),
                    d.get("allowMultipleAllocations") is True,
                )
            )
    return found


@lru_cache(maxsize=1024)
def _program(expression: str) -> Any:
    try:
        return cel.compile(expression)
    except ValueError as e:
        raise SelectorError(f"compilation failed: {e}") from e


def matches(expression: str, device: Device) -> bool:
    """Whether the selector selects the device; SelectorError on a runtime error."""
    context = cel.Context()
    for name, fn in LIBRARY.items():
        context.add_function(name, fn)
    context.add_variable("device", device.variable())
    try:
        result = _program(expression).execute(context)
    except SelectorError:
        raise
    except KeyError as e:
        raise SelectorError(f"no such key: {e.args[0] if e.args else e}") from e
    except Exception as e:  # the binding raises plain exceptions for runtime errors
        raise SelectorError(str(e)) from e
    if not isinstance(result, bool):
        raise SelectorError(f"expression must evaluate to a bool, got {result!r}")
    return result
