"""``python -m tssd.backends.sp.standin build DIR`` compiles the stand-in library;
``... server SRVDIR [--profile P --scale F ...]`` makes a server directory for it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from tssd.backends.sp.standin import ServerSettings, build, make_server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tssd.backends.sp.standin")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile libApiTSM64.so, abi-dump and dsmadmc into DIR")
    b.add_argument("dir", type=Path)
    b.add_argument("--cc", default="cc", help="the C compiler (default: cc)")
    s = sub.add_parser("server", help="make a stand-in server directory; print its dsm.opt")
    s.add_argument("dir", type=Path)
    s.add_argument("--profile", default="lto9", help="tssd simulate profile for the timings")
    s.add_argument("--scale", type=float, default=0.0, help="factor on the profile's timings")
    s.add_argument("--capacity-bytes", type=int, default=ServerSettings.capacity_bytes)
    s.add_argument("--max-mount-points", type=int, default=ServerSettings.max_mount_points)
    s.add_argument("--transient-rate", type=float, default=0.0)
    s.add_argument("--transient-codes", default="12", help="comma-separated return codes")
    s.add_argument("--drop-after-objects", type=int, default=-1)
    s.add_argument("--drop-sessions", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "build":
        try:
            library = build(args.dir, cc=args.cc)
        except FileNotFoundError:
            sys.stderr.write(f"no C compiler {args.cc!r}: install one (e.g. gcc)\n")
            return 1
        except subprocess.CalledProcessError as exc:
            sys.stderr.write(exc.stderr)
            return 1
        sys.stdout.write(f"{library}\n")
        return 0
    settings = ServerSettings.from_profile(
        args.profile,
        args.scale,
        capacity_bytes=args.capacity_bytes,
        max_mount_points=args.max_mount_points,
        transient_rate=args.transient_rate,
        transient_codes=tuple(int(code) for code in args.transient_codes.split(",") if code),
        drop_after_objects=args.drop_after_objects,
        drop_sessions=args.drop_sessions,
        seed=args.seed,
    )
    sys.stdout.write(f"{make_server(args.dir, settings)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
