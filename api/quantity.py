"""Byte counts written as Kubernetes quantities (`80Gi`, `24G`, `1.5e9`) or with the
units people write for GPU memory (`80GB`, `24GiB`).

Model `hardware.gpu.memory` is free text in LLMKube's CRD; a GPUQuota's `vramBytes` can
only be charged from it when it says a size, so a value that says none is refused.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_UNITS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def bytes_of(text: str) -> int | None:
    """The byte count text names, rounded up; None when it names none."""
    match = _QUANTITY.match(text)
    if match is None:
        return None
    number, unit = match.groups()
    if unit.endswith("B") and unit not in ("B",):
        unit = unit[:-1]  # GB -> G, GiB -> Gi
        unit = "k" if unit == "K" else unit
    elif unit == "B":
        unit = ""
    scale = _UNITS.get(unit)
    if scale is None:
        return None
    try:
        value = Decimal(number) * scale
    except InvalidOperation:
        return None
    return int(-(-value // 1))
