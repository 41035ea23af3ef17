"""structlog set-up: one JSON object per line, with the bound object key on every line."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

# Whether debug lines are kept, as of the last configure() (structlog's default, before
# any configure(), prints everything). For hot paths whose only log line is a debug one:
# a call on a module's lazy logger assembles a bound logger first, even to drop the line.
debug_enabled = True


class _OnePrinter:
    def __init__(self, stream: TextIO) -> None:
        self.printer = structlog.PrintLogger(stream)

    def __call__(self, *args: object) -> structlog.PrintLogger:
        return self.printer


def configure(level: str = "info", json_output: bool = True, stream: TextIO | None = None) -> None:
    global debug_enabled
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    debug_enabled = numeric <= logging.DEBUG
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # One printer for every logger: the lazy proxies (not cached, so that a later
        # configure() applies everywhere) would otherwise build one per log call.
        logger_factory=_OnePrinter(stream or sys.stdout),
        cache_logger_on_first_use=False,
    )
