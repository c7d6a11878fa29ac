"""``tssctl where``, ``tssctl duplicates``, ``tssctl catalog import|export``: the backend's
catalog (copies of files on tape) as IBM SP's ``dsmc query archive`` would show it.

``catalog import`` reads FILE here and sends its text (so it works over TCP too);
``--server-path`` has the daemon read FILE on its own host instead, for very large
catalogs. Import and export need a backend with catalog tools (the simulated library).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tssd.cli import render
from tssd.cli.commands import EXIT_OK, EXIT_USAGE, command, emit_json, fail, group, wants_json
from tssd.wire import Client

#: Catalog import and export may move 100,000s of rows.
SLOW_TIMEOUT_S = 600.0


def _where_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pnfsid", help="the file's pnfsid (hex)")


@command("where", "every copy of a file: volume, sequence, size, written time", _where_arguments)
def where(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", f"/v1/catalog/copies/{args.pnfsid}")
    if wants_json(args):
        emit_json(data)
        return EXIT_OK
    rows = [
        (
            c["volume"],
            c["seq"],
            render.human_size(c["size"]),
            c["written_at"],
            c["media"],
            c["bfid"],
        )
        for c in data["copies"]
    ]
    print(render.table(("VOLUME", "SEQ", "SIZE", "WRITTEN", "MEDIA", "BFID"), rows, right=(1, 2)))
    return EXIT_OK


def _duplicates_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit", type=int, default=50, metavar="N", help="list at most N files (default 50)"
    )


@command(
    "duplicates",
    "files with more than one copy, and the extra mounts they cost",
    _duplicates_arguments,
)
def duplicates(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", f"/v1/catalog/duplicates?limit={max(0, args.limit)}")
    if wants_json(args):
        emit_json(data)
        return EXIT_OK
    print(_summary(data))
    if data["duplicates"]:
        print()
        print(_duplicates_table(data["duplicates"]))
        if data["truncated"]:
            print(f"(first {len(data['duplicates'])} of {data['duplicated_files']}; --limit N)")
    return EXIT_OK


def _summary(data: dict[str, Any]) -> str:
    mounts = data["mounts"]
    return render.key_values(
        [
            ("files", data["files"]),
            ("copies", data["copies"]),
            ("files with several copies", data["duplicated_files"]),
            ("extra copies", data["extra_copies"]),
            ("mounts, newest copies", mounts["newest"]),
            ("mounts, oldest copies", mounts["oldest"]),
            ("mounts, fewest found", mounts["minimum"]),
            ("extra mounts (newest - fewest)", data["extra_mounts"]),
        ]
    )


def _duplicates_table(entries: list[dict[str, Any]]) -> str:
    rows = [
        (
            e["pnfsid"],
            e["copies"],
            render.shorten(",".join(e["volumes"]), 40),
            f"{e['oldest']['volume']}/{e['oldest']['seq']}",
            f"{e['newest']['volume']}/{e['newest']['seq']}",
        )
        for e in entries
    ]
    return render.table(("PNFSID", "COPIES", "VOLUMES", "OLDEST", "NEWEST"), rows, right=(1,))


group("catalog", 'import or export the backend catalog (CSV: docs/api.md, "catalog CSV")')


def _import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="catalog CSV: pnfsid,volume,seq,size,storage_class,written_at")
    parser.add_argument(
        "--replace", action="store_true", help="the catalog becomes exactly FILE (default: merge)"
    )
    parser.add_argument(
        "--server-path", action="store_true", help="FILE is a path on the daemon's host"
    )
    parser.add_argument(
        "--force", action="store_true", help="with --replace: accept a FILE with no rows"
    )


@command("catalog import", "load copies from a catalog CSV", _import_arguments)
def catalog_import(args: argparse.Namespace, client: Client) -> int:
    body: dict[str, Any] = {"replace": args.replace}
    if args.force:
        body["force"] = True
    if args.server_path:
        body["path"] = str(Path(args.file).absolute())
    else:
        try:
            body["csv"] = Path(args.file).read_text(encoding="utf-8")
        except OSError as exc:
            return fail(f"cannot read {args.file}: {exc.strerror}", EXIT_USAGE)
    data = client.call("POST", "/v1/catalog/import", body, timeout=SLOW_TIMEOUT_S)
    if wants_json(args):
        emit_json(data)
    else:
        how = "replaced the catalog with" if data["replace"] else "merged"
        print(
            f"{how} {data['rows']} rows on {data['volumes']} volumes; "
            f"the catalog holds {data['objects']} copies"
        )
    return EXIT_OK


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="where to write the CSV ('-' = standard output)")


@command("catalog export", "write the catalog as CSV", _export_arguments)
def catalog_export(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", "/v1/catalog/export", timeout=SLOW_TIMEOUT_S)
    if args.file == "-":
        sys.stdout.write(data["csv"])
        return EXIT_OK
    try:
        Path(args.file).write_text(data["csv"], encoding="utf-8")
    except OSError as exc:
        return fail(f"cannot write {args.file}: {exc.strerror}", EXIT_USAGE)
    if wants_json(args):
        emit_json({"rows": data["rows"], "file": args.file})
    else:
        print(f"wrote {data['rows']} rows to {args.file}")
    return EXIT_OK
