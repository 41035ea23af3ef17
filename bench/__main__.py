"""Benchmarks: `python -m bench [--sizes 1000,10000,50000]` (or `make bench`).

Prints throughput and ratios; timing is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio

from controller import logging as log_setup

from . import pipeline_bench, queue_bench
from .report import table


async def main(sizes: list[int], queue_adds: int) -> None:
    queue = await queue_bench.run(adds=queue_adds, keys=max(1, queue_adds // 10))
    baseline = queue[0]
    print(
        table(
            f"Work queue alone: {queue_adds:,} adds over {queue_adds // 10:,} keys",
            ["queue", "adds/s", "vs baseline", "processed", "dedup (adds/item)", "drain items/s"],
            [
                [
                    r.name,
                    r.add_rate,
                    f"{r.add_rate / baseline.add_rate:.2f}x",
                    r.processed,
                    f"{r.dedup:.1f}x",
                    r.drain_rate,
                ]
                for r in queue
            ],
        )
    )
    print()
    rows = []
    for n in sizes:
        print(f"pipeline: {n:,} Models ...", flush=True)
        r = await pipeline_bench.run(n)
        rows.append(
            [
                r.objects,
                r.seconds,
                r.objects_per_second,
                r.events_per_second,
                int(r.reconciles),
                r.p50_ms,
                r.p99_ms,
                int(r.bytes_per_object),
                int(r.rss_per_object),
            ]
        )
    print(
        table(
            "Watch -> queue -> reconcile -> status (test API server in its own process)",
            [
                "objects",
                "seconds",
                "objects/s",
                "events/s",
                "reconciles",
                "p50 ms",
                "p99 ms",
                "cache B/object",
                "RSS B/object",
            ],
            rows,
        )
    )
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        print(
            f"\nthroughput at {last[0]:,} vs {first[0]:,} objects: "
            f"{last[2] / first[2]:.2f}x; p99 latency ratio {last[6] / first[6]:.1f}x"
        )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--queue-adds", type=int, default=200_000)
    args = parser.parse_args()
    log_setup.configure("error")
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.queue_adds))


if __name__ == "__main__":
    cli()
