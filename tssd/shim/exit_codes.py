"""What each exit code of tss-hsm means: when it is given and why that code.

The codes themselves are declared in tssd/shim/args.py; their meanings here, beside no
code that runs in the shim (which stays cheap to start). docs/reference/exit-codes.md is
generated from this table, and tests/unit/test_reference_docs.py fails when a code of
args.py is missing from it. What dCache does with each code: docs/dcache.md, "Exit codes".
"""

from __future__ import annotations

from typing import NamedTuple

from tssd.shim.args import (
    EXIT_INVALID,
    EXIT_NO_SPACE,
    EXIT_OK,
    EXIT_OTHER,
    EXIT_PENDING,
    EXIT_PERMANENT,
    EXIT_READ,
    EXIT_TERMINATED,
    EXIT_WRITE,
)


class ExitCode(NamedTuple):
    code: int
    when: str
    why: str


EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(
        EXIT_OK,
        (
            "done: `put` printed the URI, `get` wrote `<path>.crcval` and the adler32 matches "
            "`flag-c`"
        ),
        "",
    ),
    ExitCode(
        EXIT_PENDING,
        (
            "poll mode: accepted or still in progress, or tssd unreachable, shutting down, "
            "without its database, or not giving a complete answer within its deadline (one "
            "stderr line)"
        ),
        '"not yet": no alarm, and dCache\'s deadline still counts',
    ),
    ExitCode(
        EXIT_OTHER,
        (
            "block mode: tssd unreachable for `-reconnect-timeout`; the pool's user may not open "
            "tssd's socket; request cancelled in tssd; tssd's own user may not read or write a "
            'pool path (EACCES, EPERM, see "Who owns the files"); a pool path outside tssd\'s pool'
            ' roots (the message names `--pool-root`, see "Pool roots"); a recalled file missing '
            "or short; an answer tssd should never give (no URI, or a URI with a control "
            "character); any other failure"
        ),
        (
            "dCache retries, and the retry succeeds once the cause is fixed: the installation "
            "faults among these must never set a flush aside as 30-39 would"
        ),
    ),
    ExitCode(
        EXIT_PERMANENT,
        (
            "permanent backend failure: no copy on tape, checksum mismatch after every retry, a "
            "file larger than any cartridge (`put`)"
        ),
        (
            "flush: set aside for an admin, since writing it again cannot help; stage: handled "
            "like 1"
        ),
    ),
    ExitCode(
        EXIT_INVALID,
        "invalid arguments or storage info",
        "as 31",
    ),
    ExitCode(
        EXIT_NO_SPACE,
        "the pool's file system is full (`get`: ENOSPC writing `<path>` or `.crcval`)",
        "disables the pool on a stage: only for the pool's own file system",
    ),
    ExitCode(
        EXIT_READ,
        "the pool's file cannot be read (`put`: missing, wrong size, I/O error)",
        "flush: retried like 1",
    ),
    ExitCode(
        EXIT_WRITE,
        (
            "the pool's file system cannot be written (`get`: destination directory missing or "
            "not writable by the pool's user, EIO, EROFS)"
        ),
        "disables the pool on a stage",
    ),
    ExitCode(
        EXIT_TERMINATED,
        "killed by SIGTERM (dCache's timeout); the request stays in tssd",
        "the retry attaches to the request",
    ),
)
