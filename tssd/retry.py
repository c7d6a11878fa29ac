"""The one place where transient backend errors are retried.

Bounded exponential backoff; every retry is counted in ``tssd_backend_retries_total`` and
every error in ``tssd_backend_errors_total{transient}``. Permanent errors pass through at
once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from tssd.clock import Clock
from tssd.errors import BackendError, TransientBackendError
from tssd.metrics import Metrics

T = TypeVar("T")
#: Requests whose transient failures are remembered at once.
MAX_TRACKED = 100_000
log = structlog.get_logger()


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_s: float = 1.0
    max_s: float = 60.0
    #: Same failures in a row after which a request is given up (backend.max_same_failures).
    same_failures: int = 3

    def delay(self, attempt: int) -> float:
        """Delay before retry number *attempt* (1-based)."""
        return float(min(self.max_s, self.base_s * 2 ** (attempt - 1)))


class Retrier:
    def __init__(self, policy: RetryPolicy, metrics: Metrics, clock: Clock) -> None:
        self.policy = policy
        self.metrics = metrics
        self.clock = clock
        self._later: set[asyncio.Task[Any]] = set()
        #: Transient failures per request id in this process (bounded: oldest dropped).
        self._failures: dict[object, int] = {}
        #: The last failure per request id and how many times in a row it happened.
        self._strikes: dict[object, tuple[str, int]] = {}

    def _count_failure(self, key: object, attempts: int) -> int:
        if key is None:
            return attempts
        count = self._failures.pop(key, 0) + 1
        self._failures[key] = count
        while len(self._failures) > MAX_TRACKED:
            del self._failures[next(iter(self._failures))]
        return count

    def same_again(self, key: object, error: BaseException) -> int:
        """Count a failure of *key* (a request id); return how many in a row were *error*.

        "The same" is the same type and message: work that fails identically each time
        (a file no tape can hold, a library with no room) is not going to succeed by
        going round again, and going round costs a drive and a storm of events.
        """
        same = f"{type(error).__name__}: {error}"
        last, count = self._strikes.pop(key, ("", 0))
        count = count + 1 if last == same else 1
        self._strikes[key] = (same, count)
        while len(self._strikes) > MAX_TRACKED:
            del self._strikes[next(iter(self._strikes))]
        return count

    def give_up(self, key: object, error: BaseException) -> bool:
        """Whether *key* has now failed ``same_failures`` times in a row with *error*."""
        if self.same_again(key, error) < self.policy.same_failures:
            return False
        self._strikes.pop(key, None)
        return True

    def another_attempt(
        self, attempts: int, *, op: str, error: TransientBackendError, **context: object
    ) -> bool:
        """Whether work that failed transiently after *attempts* tries goes round again.

        For per-file errors that a backend reports in a result instead of raising: the
        request returns to the queue rather than being retried in place. With a
        ``request_id`` in *context* the request's own failures are counted instead of
        *attempts*: a claim given back unread (session ended, crash) is no failed try.
        """
        self.metrics.backend_errors_total.labels(transient="true").inc()
        attempts = self._count_failure(context.get("request_id"), attempts)
        if attempts >= self.policy.attempts:
            self._failures.pop(context.get("request_id"), None)
            log.warning("backend.gave_up", op=op, attempts=attempts, error=str(error),
                        code=error.code, **context)  # fmt: skip
            return False
        self.metrics.backend_retries_total.inc()
        log.info("backend.retry", op=op, attempt=attempts, error=str(error), code=error.code,
                 **context)  # fmt: skip
        return True

    def later(self, attempts: int, fn: Callable[[], Awaitable[Any]], **context: object) -> float:
        """Run ``fn()`` after the backoff delay of retry number *attempts*; return the delay.

        For work that goes back to the queue after a per-file transient error: requeued at
        once, a mounted tape's session would take it straight back and burn its attempts
        in a second. A crash meanwhile loses nothing: start-up requeues active requests.
        """
        attempts = self._failures.get(context.get("request_id"), attempts)
        delay = self.policy.delay(max(1, attempts))
        task = asyncio.create_task(self._after(delay, fn, context), name="retry-later")
        self._later.add(task)
        task.add_done_callback(self._later.discard)
        return delay

    async def _after(self, delay: float, fn: Callable[[], Awaitable[Any]], context: Any) -> None:
        await self.clock.sleep(delay)
        try:
            await fn()
        except Exception as exc:  # a background task has nobody to raise to
            log.error("backend.requeue_failed", error=str(exc), **context)

    @property
    def waiting(self) -> int:
        """Requeues waiting for their backoff delay."""
        return len(self._later)

    def cancel_waiting(self) -> None:
        """Drop the pending requeues (shutdown: start-up requeues their requests)."""
        for task in list(self._later):
            task.cancel()

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
