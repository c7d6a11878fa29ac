"""A :class:`~tssd.backends.base.TapeBackend` whose every call fails the test: the base
of the fakes that implement only the calls a test makes, typed as the real thing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from tssd.backends.base import (
    DriveInfo,
    ReadItem,
    ReadResult,
    TapeBackend,
    TapeCopy,
    WriteItem,
    WriteResult,
)


class StubBackend(TapeBackend):
    """Every abstract call raises :class:`AssertionError`: override the ones used."""

    name = "stub"

    async def drives(self) -> list[DriveInfo]:
        raise AssertionError("drives: not expected by this test")

    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        raise AssertionError("locate: not expected by this test")

    async def mount(self, drive: str, volume: str) -> None:
        raise AssertionError("mount: not expected by this test")

    async def dismount(self, drive: str) -> None:
        raise AssertionError("dismount: not expected by this test")

    def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        raise AssertionError("read: not expected by this test")

    async def writable_volume(self, storage_class: str, size: int) -> str:
        raise AssertionError("writable_volume: not expected by this test")

    def write(self, drive: str, items: Sequence[WriteItem]) -> AsyncIterator[WriteResult]:
        raise AssertionError("write: not expected by this test")

    async def remove(self, bfid: str) -> None:
        raise AssertionError("remove: not expected by this test")
