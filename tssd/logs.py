"""structlog configuration, called once by each entry point.

Library modules only call ``structlog.get_logger()`` and emit events with a stable,
dotted name (``request.done``, ``mount.ready``) and key-value fields.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog


def configure_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Route structlog (and stdlib logging) to *stream* as JSON or console lines."""
    stream = stream or sys.stderr
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    use_console = fmt == "console" or (fmt == "auto" and stream.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=stream.isatty())
        if use_console
        else structlog.processors.JSONRenderer(sort_keys=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=True,
    )
    # Third-party libraries (aiohttp, alembic) log through the standard library.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=stream, force=True)
