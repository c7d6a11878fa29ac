"""Which volumes and storage classes sessions hold: one owner, asked by all.

A volume is never given to two drives: the scheduler checks and takes a reservation
without an ``await`` in between, and the database keeps ``drives.volume`` unique. A
migration session reserves the tape it fills (which the scheduler did not know when it
started it), and a storage class is written by one session at a time.
"""

from __future__ import annotations

from collections.abc import Set


class Reservations:
    """The volumes and storage classes in use by a session or a dismount.

    The scheduler reserves before it starts a session and releases when it ends; a write
    session reserves the volume it was given. Reading :attr:`volumes` gives a live,
    read-only view.
    """

    def __init__(self) -> None:
        self._volumes: set[str] = set()
        self._classes: set[str] = set()
        #: Volumes reserved or released since :meth:`drain_touched` (the ranking scores
        #: their tapes again: a reserved tape is not ranked, a released one is again).
        self._touched: set[str] = set()

    def drain_touched(self) -> set[str]:
        touched, self._touched = self._touched, set()
        return touched

    @property
    def volumes(self) -> Set[str]:
        """The volumes reserved now (a live view: copy it to keep it)."""
        return self._volumes

    def volume_busy(self, volume: str) -> bool:
        return volume in self._volumes

    def class_busy(self, storage_class: str) -> bool:
        return storage_class in self._classes

    def hold_volume(self, volume: str) -> None:
        self._volumes.add(volume)
        self._touched.add(volume)

    def release_volume(self, volume: str) -> None:
        self._volumes.discard(volume)
        self._touched.add(volume)

    def hold_class(self, storage_class: str) -> None:
        self._classes.add(storage_class)

    def release_class(self, storage_class: str) -> None:
        self._classes.discard(storage_class)
