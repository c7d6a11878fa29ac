"""No control character from the daemon reaches the operator's terminal raw.

Every tssctl command, enumerated from tssctl's own argument parser (a new view is covered
without touching this test), runs against a real ``tssd serve`` holding a request whose
path carries ESC, an OSC title change, CR and C1 bytes, and whose error quotes that
path. A second pass hands every command answers in which every string value carries
them too (a volume, drive or queue name from some backend, a warning, a rule's detail).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, storage_info

from tssd.cli.tssctl import main
from tssd.printable import printable
from tssd.testing import adler32_file
from tssd.wire import Client

pytestmark = [pytest.mark.timeout(300)]

HOSTILE = "\x1b]0;owned\x07\x1b[2J\rforged\x9b31m\x85\u202e"
RAW = {chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x202E]} - {"\n"}
PNFSID = "0000AA11BB22CC33DD44EE55FF667788"


def leaves(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[Any]:
    """(words, parser) of every runnable tssctl command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if parser.get_default("run") is not None and words:
        yield words, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaves(sub, (*words, name))


def arguments(
    words: tuple[str, ...], parser: argparse.ArgumentParser, v: dict[str, str]
) -> list[str]:
    """The positional and required arguments of one command, from their metavar or name."""
    argv: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        name = str(action.metavar or action.dest).upper().replace("-", "_")
        if not action.option_strings:
            key = f"{' '.join(words)} {name}"
            assert key in v or name in v, f"no value for {key}: add one to VALUES"
            argv.append(v.get(key, v.get(name, "")))
        elif action.required:
            assert name in v, f"no value for {action.option_strings[0]} of {words}"
            argv += [action.option_strings[0], v[name]]
    return argv


def poisoned(data: Any) -> Any:
    if isinstance(data, str):
        return data + HOSTILE
    if isinstance(data, list):
        return [poisoned(x) for x in data]
    if isinstance(data, dict):
        return {k: poisoned(x) for k, x in data.items()}
    return data


def prepare(daemon: Daemon, tmp_path: Path) -> dict[str, str]:
    """A tape copy, a mount, and a failed recall with a hostile path and error."""
    daemon.start()
    pool = daemon.home / "pools"
    pool.mkdir(parents=True, exist_ok=True)
    source = pool / "source"
    source.write_bytes(os.urandom(5000))
    si = storage_info(5000, adler32_file(source))
    put = daemon.hsm("put", PNFSID, str(source), f"-si={si}")
    assert put.returncode == 0, put.stderr
    got = daemon.hsm("get", PNFSID, str(pool / "back"), f"-si={si}", f"-uri={put.stdout.strip()}")
    assert got.returncode == 0, got.stderr
    hostile = f"{pool}/{HOSTILE}/file"
    client = daemon.client()
    body = {"kind": "recall", "pnfsid": "00000000DEADBEEF", "path": hostile}
    rid = client.call("POST", "/v1/requests", body)["request"]["id"]
    url = f"/v1/requests/{rid}"
    daemon.wait_for(lambda: client.call("GET", url)["request"]["state"] == "failed")
    listing = tmp_path / "list.txt"
    listing.write_text(f"{PNFSID} {pool}/{HOSTILE}/again\n")
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("pnfsid,volume,seq,size,storage_class,written_at\n")
    tape = client.call("GET", "/v1/tapes?limit=1")["tapes"][0]["volume"]
    drive = client.call("GET", "/v1/drives")["drives"][0]["name"]
    return {
        "ID": str(rid),
        "queues set NAME": "default",
        "NAME": drive,
        "VOLUME": tape,
        "PNFSID": PNFSID,
        "catalog import FILE": str(catalog),
        "catalog export FILE": str(tmp_path / "export.csv"),
        "FILE": str(listing),
        "T": "1h",
    }


def test_no_view_prints_a_control_character_raw(
    daemon: Daemon,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    values = prepare(daemon, tmp_path)
    for key, value in daemon.env.items():
        monkeypatch.setenv(key, value)
    from tssd.cli.commands import build_parser

    commands = list(leaves(build_parser()))
    assert len(commands) >= 20
    shown: dict[str, str] = {}
    call = Client.call
    for poison in (False, True):
        if poison:
            monkeypatch.setattr(Client, "call", lambda *a, **k: poisoned(call(*a, **k)))
        for words, parser in commands:
            argv = [*words, *arguments(words, parser, values)]
            main(argv)
            out, err = capsys.readouterr()
            raw = sorted({c for c in out + err if c in RAW})
            assert not raw, f"tssctl {' '.join(argv)!r} printed {raw!r}:\n{out}{err}"
            assert "unexpected error" not in err, (argv, err)  # shown, not crashed on
            shown[" ".join(words)] = out + err
    # The escapes are shown, not dropped: the operator sees what the path holds.
    assert printable(HOSTILE) in shown["requests show"]
