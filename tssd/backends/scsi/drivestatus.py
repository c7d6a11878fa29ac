"""What a tape drive reports about itself (``MTIOCGET``), as a plain value.

Its own module so that the emulated devices can use it without importing asyncio.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DriveStatus:
    online: bool
    bot: bool = False
    eod: bool = False
    eot: bool = False
    write_protected: bool = False
    file_number: int = -1
    block_number: int = -1
