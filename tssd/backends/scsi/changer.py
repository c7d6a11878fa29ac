"""The changer, driven through ``mtx -f DEVICE COMMAND`` subprocesses.

``scsi.mtx`` names the command (split like a shell would): the real ``mtx`` binary on the
changer's generic SCSI device, or the emulator (``python3 -m tssd.backends.scsi.mtxemu``)
on an emulation directory. Both are driven the same way and their text parsed the same
way. One robot: commands are serialised. A command that does not finish within its
timeout (a hung load) is killed and reported as a transient error; the inventory is read
again before the next move because the state after a killed move is unknown.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Sequence

import structlog

from tssd.backends.scsi.inventory import Inventory, InventoryError, parse_inquiry, parse_status
from tssd.errors import ConfigError, PermanentBackendError, TransientBackendError

log = structlog.get_logger()

#: mtx messages that mean "the library is not in the state you assumed": inventory again.
_STATE_WORDS = re.compile(r"is Empty|Full|not ready|Unit Attention|busy", re.IGNORECASE)
#: mtx messages that no retry can fix.
_PERMANENT_WORDS = re.compile(
    r"Invalid|Illegal Request|No such|out of range|not a changer",
    re.IGNORECASE,
)


class ChangerTimeout(TransientBackendError):
    """An mtx command (typically a load) hung and was killed."""


class Changer:
    """One media changer and the ``mtx`` command that drives it."""

    def __init__(
        self,
        command: str | Sequence[str],
        device: str,
        *,
        move_timeout_s: float,
        status_timeout_s: float,
    ) -> None:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ConfigError("scsi.mtx is empty: name the mtx binary or the emulator")
        self.argv = argv
        self.device = device
        self.move_timeout_s = move_timeout_s
        self.status_timeout_s = status_timeout_s
        self._robot = asyncio.Lock()

    async def status(self) -> Inventory:
        out = await self._run(["status"], self.status_timeout_s)
        try:
            return parse_status(out)
        except InventoryError as exc:
            raise TransientBackendError(f"mtx status on {self.device}: {exc}") from exc

    async def inquiry(self) -> dict[str, str]:
        return parse_inquiry(await self._run(["inquiry"], self.status_timeout_s))

    async def load(self, slot: int, drive: int) -> None:
        await self._run(["load", str(slot), str(drive)], self.move_timeout_s)

    async def unload(self, slot: int, drive: int) -> None:
        await self._run(["unload", str(slot), str(drive)], self.move_timeout_s)

    async def transfer(self, source: int, target: int) -> None:
        await self._run(["transfer", str(source), str(target)], self.move_timeout_s)

    async def _run(self, args: list[str], timeout_s: float) -> str:
        argv = [*self.argv, "-f", self.device, *args]
        async with self._robot:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
            except OSError as exc:
                raise ConfigError(f"cannot run {argv[0]} (scsi.mtx): {exc.strerror}") from exc
            try:
                out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
            except TimeoutError as exc:
                await _kill(proc)
                log.error("scsi.changer.timeout", command=" ".join(args), timeout_s=timeout_s)
                raise ChangerTimeout(
                    f"mtx {' '.join(args)} on {self.device} did not finish in {timeout_s:g} s"
                ) from exc
            except BaseException:
                await _kill(proc)
                raise
        text, errors = out.decode(errors="replace"), err.decode(errors="replace").strip()
        if proc.returncode != 0:
            raise _failure(args, self.device, proc.returncode, errors or text.strip())
        log.debug("scsi.changer.done", command=" ".join(args))
        return text


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
    await proc.wait()


def _failure(args: list[str], device: str, rc: int | None, message: str) -> Exception:
    last = message.splitlines()[-1] if message else f"exit status {rc}"
    text = f"mtx {' '.join(args)} on {device} failed: {last}"
    log.warning("scsi.changer.failed", command=" ".join(args), rc=rc, error=last)
    if _PERMANENT_WORDS.search(message) and not _STATE_WORDS.search(last):
        return PermanentBackendError(text, code=rc)
    return TransientBackendError(text, code=rc)
