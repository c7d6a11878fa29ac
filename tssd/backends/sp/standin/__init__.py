"""A stand-in for IBM's SP client API library, for tests and demos.

The C sources beside this file build ``libApiTSM64.so``: the same functions with the same
ABI as IBM's library, backed by a directory "server" instead of an SP server (see
``server.h`` for its layout). ``dsmadmc`` beside them answers the admin client's SELECT on
CONTENTS from the same directory.

One-line build (needs a C compiler, ``cc``)::

    python -m tssd.backends.sp.standin build DIR

puts ``libApiTSM64.so``, ``abi-dump`` (the C side's structure layouts as JSON) and
``dsmadmc`` in DIR. Then::

    python -m tssd.backends.sp.standin server SRVDIR --profile lto9 --scale 0.001

makes a server directory with timings taken from a ``tssd simulate`` profile (multiplied
by the scale) and writes ``SRVDIR/dsm.opt``, the options file to name in ``DSMI_CONFIG``
(its ``SERVERDIR`` line is what the stand-in reads).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tssd.tape.geometry import get_profile

SOURCE_DIR = Path(__file__).resolve().parent
LIBRARY_SOURCES = ("api.c", "api_query.c", "api_get.c", "api_send.c", "server.c")
CFLAGS = ("-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC")
LIBRARY_NAME = "libApiTSM64.so"
ABI_DUMP_NAME = "abi-dump"
DSMADMC_NAME = "dsmadmc"
OPTIONS_NAME = "dsm.opt"
CONF_NAME = "server.conf"
#: Return codes drawn for injected transient faults by default: mount not possible.
DEFAULT_TRANSIENT_CODES = (12,)


def build(out_dir: Path, cc: str = "cc") -> Path:
    """Compile the stand-in into *out_dir*; return the library's path.

    Raises FileNotFoundError when *cc* is missing and CalledProcessError when it fails.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    library = out_dir / LIBRARY_NAME
    sources = [str(SOURCE_DIR / name) for name in LIBRARY_SOURCES]
    subprocess.run(
        [cc, *CFLAGS, "-fvisibility=hidden", "-shared", "-o", str(library), *sources, "-lpthread"],
        check=True,
        capture_output=True,
        text=True,
    )
    subprocess.run(
        [cc, *CFLAGS, "-o", str(out_dir / ABI_DUMP_NAME), str(SOURCE_DIR / "abi_dump.c")],
        check=True,
        capture_output=True,
        text=True,
    )
    dsmadmc = out_dir / DSMADMC_NAME
    shutil.copyfile(SOURCE_DIR / DSMADMC_NAME, dsmadmc)
    dsmadmc.chmod(dsmadmc.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return library


@dataclass(frozen=True)
class ServerSettings:
    """What a stand-in server directory's ``server.conf`` holds."""

    #: Bytes per volume: volumes fill one after the other.
    capacity_bytes: int = 1 << 30
    #: The node's MAXNUMMP: concurrent retrieve sessions over all processes.
    max_mount_points: int = 2
    mount_s: float = 0.0
    unmount_s: float = 0.0
    locate_base_s: float = 0.0
    locate_full_s: float = 0.0
    per_file_s: float = 0.0
    #: Read pacing in bytes per second; 0 reads as fast as the disk does.
    read_bytes_s: float = 0.0
    #: Share of dsmInitEx, dsmBeginQuery, dsmBeginGetData, dsmSendObj and dsmDeleteObj
    #: calls that fail with one of transient_codes instead.
    transient_rate: float = 0.0
    transient_codes: tuple[int, ...] = DEFAULT_TRANSIENT_CODES
    #: A retrieve session is lost (-50) when it asks for its next object after this many;
    #: -1: never.
    drop_after_objects: int = -1
    #: How many sessions are lost that way over the server's life.
    drop_sessions: int = 1
    seed: int = 0
    volume_prefix: str = "SP"
    volume_suffix: str = ""

    @classmethod
    def from_profile(cls, name: str, scale: float, **overrides: object) -> ServerSettings:
        """Timings of the ``tssd simulate`` profile *name*, each multiplied by *scale*."""
        p = get_profile(name)
        timings: dict[str, object] = {
            "mount_s": (p.robot_s + p.load_s) * scale,
            "unmount_s": (p.unload_s + p.rewind_full_s / 2) * scale,
            "locate_base_s": p.locate_base_s * scale,
            "locate_full_s": p.locate_full_s * scale,
            "per_file_s": p.per_file_s * scale,
            "volume_suffix": p.volume_suffix,
        }
        timings.update(overrides)
        return cls(**timings)  # type: ignore[arg-type]

    def lines(self) -> list[str]:
        values = dict(self.__dict__)
        values["transient_codes"] = ",".join(str(code) for code in self.transient_codes)
        return [f"{key} = {value}" for key, value in values.items()]


def volume_name(settings: ServerSettings, volume: int) -> str:
    """The name the admin client shows for the volume whose restore-order ``top`` is
    *volume*."""
    return f"{settings.volume_prefix}{volume:04d}{settings.volume_suffix}"


def _write_in(directory: int, name: str, text: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, 0o600, dir_fd=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


def make_server(server_dir: Path, settings: ServerSettings) -> Path:
    """Create (or re-configure) a server directory; return its options file's path."""
    server_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    directory = os.open(server_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _write_in(directory, CONF_NAME, "\n".join(settings.lines()) + "\n")
        _write_in(directory, OPTIONS_NAME, f"SERVERDIR {server_dir.resolve()}\n")
    finally:
        os.close(directory)
    return server_dir / OPTIONS_NAME


def read_settings(server_dir: Path) -> ServerSettings:
    """The settings in a server directory's ``server.conf`` (defaults for missing keys)."""
    known = ServerSettings.__dataclass_fields__
    values: dict[str, object] = {}
    for line in (server_dir / CONF_NAME).read_text(encoding="utf-8").splitlines():
        key, sep, value = (part.strip() for part in line.partition("="))
        if not sep or key not in known:
            continue
        default = getattr(ServerSettings(), key)
        if isinstance(default, tuple):
            values[key] = tuple(int(code) for code in value.split(",") if code)
        elif isinstance(default, str):
            values[key] = value
        else:
            values[key] = type(default)(value)
    return ServerSettings(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Read:
    """One line of a server's ``positions.log``: an object read by a retrieve session."""

    session: str
    volume: int
    position: int
    object_id: int


def reads(server_dir: Path) -> list[Read]:
    """Every object read on the server, in the order read."""
    path = server_dir / "positions.log"
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        kind, session, volume, position, object_id = line.split()
        if kind == "read":
            found.append(Read(session, int(volume), int(position), int(object_id)))
    return found


def backward_locates(server_dir: Path) -> int:
    """How many reads went back on their volume within one retrieve session."""
    last: dict[tuple[str, int], int] = {}
    backward = 0
    for read in reads(server_dir):
        key = (read.session, read.volume)
        if key in last and read.position < last[key]:
            backward += 1
        last[key] = read.position
    return backward


def mounts(server_dir: Path) -> dict[int, int]:
    """How often each volume was mounted (``mounts.log``)."""
    path = server_dir / "mounts.log"
    counts: dict[int, int] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            volume = int(line.split()[2])
            counts[volume] = counts.get(volume, 0) + 1
    return counts
