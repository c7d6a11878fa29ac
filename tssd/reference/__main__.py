"""``python -m tssd.reference DIR [--check]``: write (or check) the reference pages."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tssd.reference import PAGES, page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tssd.reference", description=__doc__)
    parser.add_argument("directory", type=Path, help="where the pages go (docs/reference)")
    parser.add_argument("--check", action="store_true", help="fail if a page is not current")
    args = parser.parse_args(argv)
    stale = []
    for name in PAGES:
        path: Path = args.directory / name
        text = page(name)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(name)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        sys.stderr.write(f"stale reference pages: {', '.join(stale)}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
