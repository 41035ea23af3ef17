"""The JSON nesting bound (controller/jsondepth.depth) on the documents it meets and on
hostile ones, against one pair-removing pass per level all the way down, in the same run.

    python -m bench.jsondepth_bench

Prints ms per call and the ratio hybrid/passes for each document.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from controller import jsondepth

_ITEM = {
    "metadata": {"name": "p", "labels": {"a": "b"}, "ownerReferences": [{"uid": "x"}]},
    "spec": {
        "containers": [
            {
                "name": "c",
                "args": ["--a", "[x]"],
                "env": [{"name": "E", "value": "v"}],
                "ports": [{"containerPort": 1}],
            }
        ]
    },
    "status": {"conditions": [{"type": "Ready", "status": "True"}] * 4},
}


def documents() -> list[tuple[str, bytes, int]]:
    """(what it is, the document, calls to time)."""
    listing = json.dumps({"kind": "PodList", "items": [_ITEM] * 60}).encode()

    def chains(deep: int) -> bytes:
        return b"[" + b",".join([b"[" * deep + b"]" * deep] * 1400) + b"]"

    return [
        (f"a list of 60 Pods, {len(listing) // 1000} kB", listing, 300),
        ("1,400 chains 513 deep (past the bound)", chains(513), 3),
        ("1,400 chains 510 deep (just inside)", chains(510), 3),
    ]


def _best(call: Callable[[bytes], object], data: bytes, calls: int) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            call(data)
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def main() -> None:
    print(f"{'document':42} {'passes ms':>10} {'hybrid ms':>10} {'hybrid/passes':>14}")
    hybrid_passes = jsondepth.PASSES
    for name, data, calls in documents():
        try:
            jsondepth.PASSES = jsondepth.MAX_DEPTH + 1  # a pass per level, as before
            passes = _best(jsondepth.depth, data, calls)
            expected = jsondepth.depth(data)
        finally:
            jsondepth.PASSES = hybrid_passes
        hybrid = _best(jsondepth.depth, data, calls)
        assert jsondepth.depth(data) == expected, name
        print(f"{name:42} {passes * 1000:10.3f} {hybrid * 1000:10.3f} {hybrid / passes:14.2f}")


if __name__ == "__main__":
    main()
