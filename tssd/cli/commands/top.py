"""``tssctl top``: drives, queues and the last mounts, live, until ``q`` or Ctrl-C.

On a terminal the screen is redrawn in place (rich's Live display on the alternate
screen) every ``--interval`` seconds; keys are read from the terminal in cbreak mode
between refreshes, so a key press is seen at once and never waits for the next one.
When stdout is not a terminal (a pipe, a file, cron, a test) the same tables are printed
once as plain text and tssctl exits; ``--count N`` prints N blocks, one per refresh.
``--json`` prints one ``GET /v1/top`` answer.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator
from typing import Any

from tssd.cli.commands import EXIT_OK, command, emit_json, positive_int, wants_json
from tssd.cli.render import PIPE_WIDTH
from tssd.wire import ApiError, Client, WireError

# rich's console, live display and the screen's layout are imported by the two functions
# that draw: every other tssctl command imports this module too, to register it.

QUIT_KEYS = frozenset(b"qQ")


def interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.2 <= value <= 3600:
        raise argparse.ArgumentTypeError("must be from 0.2 to 3600 seconds")
    return value


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interval", type=interval, default=1.5, metavar="S",
                        help="seconds between refreshes (default 1.5)")  # fmt: skip
    parser.add_argument("--count", type=positive_int, metavar="N",
                        help="stop after N refreshes (default: until q or Ctrl-C on a"
                             " terminal, 1 otherwise)")  # fmt: skip


@command("top", "live view of drives, queues and the last mounts (q quits)", _arguments)
def top(args: argparse.Namespace, client: Client) -> int:
    if wants_json(args):
        emit_json(fetch(client))
        return EXIT_OK
    try:
        if sys.stdout.isatty():
            return live(client, args.interval, args.count)
        # Nobody can press q in a pipe: one frame, unless asked for more.
        return plain(client, args.interval, args.count or 1)
    except KeyboardInterrupt:  # Ctrl-C is how one leaves a view: not an error
        return EXIT_OK


def fetch(client: Client) -> dict[str, Any]:
    data: dict[str, Any] = client.call("GET", "/v1/top", timeout=10)
    return data


def plain(client: Client, every: float, count: int) -> int:
    from rich.console import Console

    from tssd.cli.top import screen

    console = Console(width=PIPE_WIDTH, color_system=None, highlight=False, emoji=False)
    shown = 0
    while True:
        console.print(screen(fetch(client), interval=every, plain=True))
        sys.stdout.flush()
        shown += 1
        if shown >= count:
            return EXIT_OK
        time.sleep(every)
        console.print()


def live(client: Client, every: float, count: int | None) -> int:
    from rich.console import Console
    from rich.live import Live

    from tssd.cli.top import screen

    console = Console(highlight=False, emoji=False)
    data = fetch(client)  # unreachable at start: the usual error and exit code
    shown = 0
    with keys() as pressed, Live(console=console, screen=True, auto_refresh=False) as view:
        while True:
            view.update(screen(data, interval=every), refresh=True)
            shown += 1
            if (count is not None and shown >= count) or pressed(every):
                return EXIT_OK
            try:
                data = fetch(client)
            except (WireError, ApiError) as exc:  # keep the last figures, say why they are stale
                data = {k: v for k, v in data.items() if k != "stale"} | {"stale": str(exc)}


@contextlib.contextmanager
def keys() -> Iterator[Any]:
    """A function waiting up to *timeout* s for a key; True when it was a quit key.

    The terminal is in cbreak mode meanwhile (keys arrive unbuffered and unechoed, Ctrl-C
    still interrupts) and restored afterwards, whatever happens.
    """
    fd = sys.stdin.fileno() if sys.stdin.isatty() else None
    saved = termios.tcgetattr(fd) if fd is not None else None
    if fd is not None:
        tty.setcbreak(fd)

    def pressed(timeout: float) -> bool:
        if fd is None:
            time.sleep(timeout)
            return False
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            typed = os.read(fd, 64)
            if QUIT_KEYS & set(typed):
                return True
            if not typed:  # the terminal went away: refresh on the clock only
                time.sleep(max(0.0, deadline - time.monotonic()))
                return False
        return False

    try:
        yield pressed
    finally:
        if fd is not None and saved is not None:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
