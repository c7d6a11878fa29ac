"""Entry point of ``tss-hsm``: help, signals, and the mapping of outcomes to exit codes."""

from __future__ import annotations

import sys

from tssd.shim import fastclient
from tssd.shim.actions import PASS_THROUGH, diag, run
from tssd.shim.args import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_OTHER,
    EXIT_TERMINATED,
    HsmExit,
    parse_args,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal  # typeshed knows the public name only
    from collections.abc import Sequence
    from types import FrameType
    from typing import Any
else:
    import _signal  # loaded at start-up already; signal.py would import enum (milliseconds)

HELP = """\
usage: tss-hsm put <pnfsid> <path> -si=<storage info> [-key=value ...]
       tss-hsm get <pnfsid> <path> -si=<storage info> -uri=<uri> [-uri=<uri> ...] [-key=value ...]
       tss-hsm remove -uri=<uri> [-uri=<uri> ...] [-key=value ...]

The dCache HSM script of tssd (hsm create osm <name> script -command=.../tss-hsm-fast ...;
tss-hsm-fast is this script without the cost of Python's site initialisation).
  put      migrate the pool file <path> to tape; prints its tape URI on stdout
  get      recall the file to <path>; writes <path>.crcval with its adler32
  remove   delete the tape copy of each -uri= (named by its bfid= parameter)

Options, as -key=value (a bare -key is empty, i.e. unset; unknown options are ignored):
  -tssd=TARGET          socket path, unix:PATH or http(s):// URL; default $TSSD_URL,
                        else $TSSD_HOME/tssd.sock, else ~/.local/state/tssd/tssd.sock
  -mode=block|poll      block (default) waits for the request; poll submits (or finds the
                        request already in tssd) and exits 72 until it has finished, so
                        dCache calls again after p:delay; remove always waits
  -queue=NAME           tssd queue (default: the daemon's)
  -priority=INT         priority within the queue
  -hsmType=TYPE         URI scheme (default: hsm= of the storage info, else osm)
  -hsmInstance=NAME     URI authority (default: that of the first -uri=, else the type)
  -reconnect-timeout=S  how long to wait for a restarting tssd mid-wait (default 3600)
  -si=STORAGEINFO       from dCache: size=..;sClass=..;flag-c=1:<adler32>;store=..;...
  -uri=URI              a copy on tape: <type>://<instance>/?store=..&group=..&bfid=..
Environment: TSSD_URL, TSSD_HOME (see -tssd), TSSD_TOKEN_FILE (API bearer token).

Exit codes: 0 done; 1 failure dCache retries (block mode: tssd unreachable for
-reconnect-timeout; a permission error of tssd's own user; a path outside tssd's
pool roots, fixed with tssd serve --pool-root); 31 permanent backend
failure; 32 invalid arguments; 41 no space on the pool's file system; 42 pool file
unreadable; 43 pool file system unwritable; 72 in progress, or tssd unreachable (poll
mode); 143 SIGTERM (the request stays in tssd and the next call attaches to it).
stdout carries only put's URI; every diagnostic is one line on stderr.
"""


class Terminated(BaseException):
    """SIGTERM. A BaseException so that no ``except Exception`` on the way can swallow it."""


def api_exit_code(exc: fastclient.ApiError) -> int:
    if exc.exit_code in PASS_THROUGH:
        return exc.exit_code
    # tssd names 1 for a refusal that is its installation's fault (a path outside its
    # pool roots): dCache retries 1, but sets a flush failing with 32 aside for an admin.
    if exc.status == 400 and not exc.exit_code_named:
        return EXIT_INVALID
    return EXIT_OTHER


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM during the farewell line must kill us, not raise out of main.
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
    raise Terminated


def _dispatch(args: Sequence[str]) -> int:
    if "--help" in args or args[:1] in (["-h"], ["help"]):
        sys.stdout.write(HELP)
        return EXIT_OK
    try:
        return run(parse_args(args))
    except HsmExit as exc:
        diag(exc.message)
        return exc.code
    except fastclient.ApiError as exc:
        diag(f"tssd refused ({exc.status} {exc.type}): {exc.message}")
        return api_exit_code(exc)
    except fastclient.WireError as exc:
        diag(str(exc))
        return EXIT_OTHER


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tss-hsm``; returns the exit code for dCache."""
    args = list(sys.argv[1:] if argv is None else argv)
    previous: Any = _signal.SIG_DFL
    try:
        previous = _signal.signal(_signal.SIGTERM, _on_sigterm)
        return _dispatch(args)
    except Terminated:
        diag("terminated by SIGTERM (dCache timeout); the request stays in tssd")
        return EXIT_TERMINATED
    except BaseException as exc:  # a traceback would reach dCache as many lines of noise
        diag(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_OTHER
    finally:
        try:
            _signal.signal(_signal.SIGTERM, previous)
        except (Terminated, ValueError, TypeError):
            pass


if __name__ == "__main__":
    sys.exit(main())
