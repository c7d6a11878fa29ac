"""Volume names: the admin client's, or the restore-order key.

The client API tells a copy's volume only as the ``top`` and ``hi_hi`` words of its
restore order. With ``sp.admin_command`` configured, tssd asks the server's CONTENTS
table once per unknown key for the volume holding one of its objects and names the
volume so (what an operator sees in ``q volume``); without it the key is the name.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import shlex
from collections.abc import Iterable

import structlog

from tssd.backends.sp.client import ArchivedObject
from tssd.backends.sp.naming import volume_key
from tssd.errors import TransientBackendError

log = structlog.get_logger()
#: Most bytes of admin client output read (a CONTENTS answer for one object is short).
MAX_OUTPUT = 1024 * 1024


def contents_select(node: str, filespace: str, high: str, low: str) -> str:
    """The SELECT naming the volume of one object (quotes doubled, as SQL wants)."""

    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    where = [f"filespace_name={quoted(filespace)}", f"file_name={quoted(f'{high} {low}')}"]
    if node:
        where.insert(0, f"node_name={quoted(node.upper())}")
    # Every value is quoted above: this is the admin client's SQL, not a database's.
    return f"select volume_name from contents where {' and '.join(where)}"  # noqa: S608


def first_volume(output: str) -> str | None:
    """The first volume name of a ``-dataonly=yes -comma`` answer."""
    for row in csv.reader(output.splitlines()):
        if row and row[0].strip() and not row[0].startswith("ANR"):
            return row[0].strip()
    return None


class VolumeNames:
    """Restore-order key <-> volume name, learned from query answers."""

    def __init__(self, admin_command: str, node: str, filespace: str, timeout_s: float) -> None:
        self._command = shlex.split(admin_command)
        self._node = node
        self._filespace = filespace
        self._timeout_s = timeout_s
        self._names: dict[str, str] = {}
        self._keys: dict[str, str] = {}

    def known(self, volume: str) -> bool:
        return volume in self._keys

    def name(self, key: str, obj: ArchivedObject | None = None) -> str:
        return self._names.get(key, key)

    async def learn(self, objects: Iterable[ArchivedObject]) -> None:
        """Name every key among *objects* not yet named (one admin call per new key)."""
        for obj in objects:
            key = volume_key(*obj.restore_order[:2])
            if key in self._names:
                continue
            name = await self._ask(obj) if self._command else None
            self._names[key] = name or key
            self._keys[name or key] = key

    async def _ask(self, obj: ArchivedObject) -> str | None:
        select = contents_select(self._node, self._filespace, obj.high, obj.low)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._command, select,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        except OSError as exc:
            raise TransientBackendError(f"cannot run sp.admin_command: {exc}") from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self._timeout_s)
        except TimeoutError as exc:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise TransientBackendError(
                f"sp.admin_command did not answer in {self._timeout_s:g} s"
            ) from exc
        name = first_volume(out[:MAX_OUTPUT].decode("utf-8", "replace"))
        if proc.returncode != 0 or name is None:
            log.warning(
                "sp.admin.unanswered",
                rc=proc.returncode,
                error=err[:400].decode("utf-8", "replace").strip(),
            )
        return name
