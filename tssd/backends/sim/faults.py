"""Error injection for the simulated library, with the real IBM SP return codes.

Each mount, read and write draws once from the library's own seeded generator (no global
``random``): with probability ``permanent_error_rate`` it fails for good, with
``transient_error_rate`` it fails in a way a retry may cure. The return codes are those
the SP client API reports for that operation (IBM's ``dsmrc.h``), so
code that handles them is exercised as it would be against a real server.
"""

from __future__ import annotations

import random
from typing import Literal

from tssd.errors import ConfigError, ObjectNotFound, PermanentBackendError, TransientBackendError

Operation = Literal["mount", "read", "write"]

# Transient codes by operation: 12 mount not possible, 41 exceed max mount points, 7 node
# in use, 51/55/59/63 session rejects, -50/-51/-52 communication failures, 15 retry,
# 9 data offline, 14 data unavailable, 38 restore in progress, 232 item in use,
# 233 lock conflict, 26 wait for space, 143 retry.
TRANSIENT_CODES: dict[Operation, tuple[int, ...]] = {
    "mount": (12, 41, 7, 15, 51, 55, 59, 63, -50, -51, -52),
    "read": (9, 14, 15, 38, 232, 233, 143, -50, -51, -52),
    "write": (26, 15, 232, 233, 143, -50, -51, -52),
}
# Permanent: 2 no match, 2063 object id not found (both: the object is gone),
# 124 file space not found.
PERMANENT_CODES: dict[Operation, tuple[int, ...]] = {
    "mount": (),
    "read": (2, 2063, 124),
    "write": (124,),
}
#: Codes meaning "the server has no such object": reported as ObjectNotFound.
NOT_FOUND_CODES = frozenset({2, 2063})


class FaultInjector:
    """Decides, deterministically for a seed and call order, which operations fail."""

    def __init__(self, transient_rate: float, permanent_rate: float, seed: int) -> None:
        for name, rate in (("transient", transient_rate), ("permanent", permanent_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"sim.{name}_error_rate must be between 0 and 1, not {rate}")
        if transient_rate + permanent_rate > 1.0:
            raise ConfigError("sim.transient_error_rate + sim.permanent_error_rate exceed 1")
        self.transient_rate = transient_rate
        self.permanent_rate = permanent_rate
        self._rng = random.Random(seed)

    @property
    def active(self) -> bool:
        return self.transient_rate > 0 or self.permanent_rate > 0

    def draw(
        self, op: Operation, subject: str
    ) -> TransientBackendError | PermanentBackendError | None:
        """The error this *op* on *subject* (volume or pnfsid) suffers, or None."""
        if not self.active:
            return None
        roll = self._rng.random()
        permanent = PERMANENT_CODES[op]
        if permanent:
            if roll < self.permanent_rate:
                code = self._rng.choice(permanent)
                cls = ObjectNotFound if code in NOT_FOUND_CODES else PermanentBackendError
                return cls(f"simulated IBM SP error {code} on {op} of {subject}", code=code)
            # What is left of the roll is uniform again, so the transient rate holds
            # for operations that have no permanent failure (mount) too.
            roll -= self.permanent_rate
        if roll < self.transient_rate:
            code = self._rng.choice(TRANSIENT_CODES[op])
            return TransientBackendError(
                f"simulated IBM SP error {code} on {op} of {subject}", code=code
            )
        return None
