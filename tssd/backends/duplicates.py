"""Files with several copies, and the mounts the choice of copy costs (``tssctl duplicates``).

GridKa's lesson (their CHEP 2019 paper on TSS): dCache re-wrote files whose store it never saw
acknowledged, so a recall list from 10 tapes needed 58 mounts when the newest copy of
each file was read. To recall every file in the catalog, one copy per file must be read;
the number of distinct volumes holding the chosen copies is the number of mounts. Three
choices are counted:

* ``newest``: each file's most recently written copy (what TSS recalls);
* ``oldest``: each file's first copy (GridKa's fix: the originals sit together);
* ``minimum``: a greedy set cover: the volumes of single-copy files are needed anyway,
  then the volume holding copies of the most files still uncovered is added, until every
  file is covered (ties by volume name). Greedy set cover is not always optimal, so this
  is the smallest of the three counts, an upper bound on the true minimum.

``extra_mounts`` = newest - minimum: the mounts the duplicates cost a newest-copy policy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from tssd.backends.base import CopyPlacement


def group_copies(placements: Iterable[CopyPlacement]) -> dict[str, list[CopyPlacement]]:
    """Copies per pnfsid, oldest first (then by restore order, for a stable answer)."""
    grouped: dict[str, list[CopyPlacement]] = {}
    for p in placements:
        grouped.setdefault(p.pnfsid, []).append(p)
    for copies in grouped.values():
        copies.sort(key=lambda c: (c.written_at, c.volume, c.position))
    return grouped


def greedy_cover(files: Iterable[Sequence[CopyPlacement]]) -> set[str]:
    """Volumes covering every file: forced single-copy volumes, then greedy."""
    chosen: set[str] = set()
    open_files: list[set[str]] = []
    for copies in files:
        volumes = {c.volume for c in copies}
        if len(volumes) == 1:
            chosen |= volumes
        else:
            open_files.append(volumes)
    uncovered = [v for v in open_files if not v & chosen]
    while uncovered:
        counts = Counter(vol for volumes in uncovered for vol in volumes)
        best = min(counts, key=lambda vol: (-counts[vol], vol))
        chosen.add(best)
        uncovered = [v for v in uncovered if best not in v]
    return chosen


def duplicates_report(placements: Iterable[CopyPlacement], limit: int) -> dict[str, Any]:
    """The ``GET /v1/catalog/duplicates`` answer; *limit* bounds the files listed."""
    grouped = group_copies(placements)
    newest = {copies[-1].volume for copies in grouped.values()}
    oldest = {copies[0].volume for copies in grouped.values()}
    minimum = min(len(newest), len(oldest), len(greedy_cover(grouped.values())))
    duplicated = sorted(
        ((pnfsid, copies) for pnfsid, copies in grouped.items() if len(copies) > 1),
        key=lambda item: (-len(item[1]), item[0]),
    )
    return {
        "files": len(grouped),
        "copies": sum(len(c) for c in grouped.values()),
        "duplicated_files": len(duplicated),
        "extra_copies": sum(len(c) - 1 for _, c in duplicated),
        "mounts": {"newest": len(newest), "oldest": len(oldest), "minimum": minimum},
        "extra_mounts": len(newest) - minimum,
        "duplicates": [_entry(pnfsid, copies) for pnfsid, copies in duplicated[:limit]],
        "truncated": len(duplicated) > limit,
    }


def _entry(pnfsid: str, copies: Sequence[CopyPlacement]) -> dict[str, Any]:
    return {
        "pnfsid": pnfsid,
        "copies": len(copies),
        "volumes": sorted({c.volume for c in copies}),
        "oldest": copy_json(copies[0]),
        "newest": copy_json(copies[-1]),
    }


def copy_json(copy: CopyPlacement) -> dict[str, Any]:
    return {
        "volume": copy.volume,
        "seq": copy.position,
        "size": copy.size,
        "written_at": copy.written_at.isoformat(),
    }
