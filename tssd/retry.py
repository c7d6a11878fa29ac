"""The one place where transient backend errors are retried.

Bounded exponential backoff; every retry is counted in ``tssd_backend_retries_total`` and
every error in ``tssd_backend_errors_total{transient}``. Permanent errors pass through at
once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog

from tssd.clock import Clock
from tssd.errors import BackendError, TransientBackendError
from tssd.metrics import Metrics

T = TypeVar("T")
log = structlog.get_logger()


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_s: float = 1.0
    max_s: float = 60.0

    def delay(self, attempt: int) -> float:
        """Delay before retry number *attempt* (1-based)."""
        return float(min(self.max_s, self.base_s * 2 ** (attempt - 1)))


class Retrier:
    def __init__(self, policy: RetryPolicy, metrics: Metrics, clock: Clock) -> None:
        self.policy = policy
        self.metrics = metrics
        self.clock = clock

    def another_attempt(
        self, attempts: int, *, op: str, error: TransientBackendError, **context: object
    ) -> bool:
        """Whether work that failed transiently after *attempts* tries goes round again.

        For per-file errors that a backend reports in a result instead of raising: the
        request returns to the queue rather than being retried in place.
        """
        self.metrics.backend_errors_total.labels(transient="true").inc()
        if attempts >= self.policy.attempts:
            log.warning("backend.gave_up", op=op, attempts=attempts, error=str(error),
                        code=error.code, **context)  # fmt: skip
            return False
        self.metrics.backend_retries_total.inc()
        log.info("backend.retry", op=op, attempt=attempts, error=str(error), code=error.code,
                 **context)  # fmt: skip
        return True

    async def call(self, op: str, fn: Callable[[], Awaitable[T]], **context: object) -> T:
        """Run ``fn()``; retry transient backend errors up to the policy's attempts."""
        attempt = 1
        while True:
            try:
                return await fn()
            except TransientBackendError as exc:
                self.metrics.backend_errors_total.labels(transient="true").inc()
                if attempt >= self.policy.attempts:
                    log.warning(
                        "backend.gave_up",
                        op=op,
                        attempts=attempt,
                        error=str(exc),
                        code=exc.code,
                        **context,
                    )
                    raise
                delay = self.policy.delay(attempt)
                log.info(
                    "backend.retry",
                    op=op,
                    attempt=attempt,
                    delay_s=delay,
                    error=str(exc),
                    code=exc.code,
                    **context,
                )
                self.metrics.backend_retries_total.inc()
                await self.clock.sleep(delay)
                attempt += 1
            except BackendError:
                self.metrics.backend_errors_total.labels(transient="false").inc()
                raise
