"""Every JSON body a client sends tssd, declared once.

Each body is a msgspec Struct: its field types and ``Meta`` constraints are the validation
(:func:`convert`, a 400 naming the field for anything outside them) and the OpenAPI
schema (``tssd/api/openapi.py`` derives its components from these classes), so the two
cannot drift apart. What a schema cannot say is checked after conversion, where it is
used: which fields a kind of request needs, dCache's ``<Unknown>`` tags, a URI's bfid
(``tssd/submit.py``); the bulk limit, which is a setting (``tssd/api/requests.py``).

A name's ``pattern`` is checked by msgspec with ``re.search``, whose ``$`` also matches
before a final newline; each Struct therefore checks its names whole again with the
names' own test (:mod:`tssd.shim.names`), so ``"BB01\\n"`` is refused as before.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import UNSET, Meta, UnsetType

from tssd.config.queues import TARGET_MAX_S, TARGET_MIN_S
from tssd.domain import Kind
from tssd.errors import InvalidRequest
from tssd.shim.names import ADLER32, MAX_PATH, NAME, PNFSID, QUEUE, Name, pnfsid_or_none

__all__ = ["UNSET", "UnsetType"]

MAX_URIS = 64
MAX_QUERY_IDS = 100_000
PRIORITY_LIMIT = 1_000_000
INT64_MAX = 2**63 - 1


def _optional(name: Name) -> str:
    """*name*'s pattern, or empty (a client's way of not giving it)."""
    return f"^(?:{name.pattern[1:-1]})?$"


Pnfsid = Annotated[str, Meta(pattern=PNFSID.pattern, description="dCache pnfsid, 1-64 hex digits")]
#: No NUL: no file system takes one, and ``open`` raises on it.
AbsolutePath = Annotated[
    str,
    Meta(pattern="^/[^\\x00]*$", max_length=MAX_PATH, description="an absolute path"),
]
Size = Annotated[int, Meta(ge=0, le=INT64_MAX)]
Adler32 = Annotated[str, Meta(pattern=ADLER32.pattern, description="adler32, up to 8 hex digits")]
Bfid = Annotated[str, Meta(pattern=NAME.pattern)]
#: Empty means the default.
OptionalName = Annotated[str, Meta(pattern=_optional(NAME))]
OptionalQueue = Annotated[
    str, Meta(pattern=_optional(QUEUE), description="queue name; empty or absent: the default")
]
#: Checked after dCache's ``<Unknown>`` placeholder is replaced (tssd/submit.py).
Tagged = Annotated[
    str,
    Meta(
        description="1-255 characters of [A-Za-z0-9_.:@/+-]; dCache's <Unknown> stands for "
        "unknown; empty or absent: not given"
    ),
]
Uri = Annotated[str, Meta(min_length=1, max_length=MAX_PATH)]
Priority = Annotated[int, Meta(ge=-PRIORITY_LIMIT, le=PRIORITY_LIMIT)]
QueueDrives = Annotated[int, Meta(ge=1, le=10_000)]
TargetSeconds = Annotated[float, Meta(ge=TARGET_MIN_S, le=TARGET_MAX_S)]
RequestId = Annotated[int, Meta(ge=0, le=INT64_MAX)]


def check_whole(struct: msgspec.Struct, *checks: tuple[str, Name]) -> None:
    """Each named field, when given, is a name of its kind whole (see the module doc)."""
    for field, name in checks:
        value = getattr(struct, field)
        if value and not name.fullmatch(value):
            raise ValueError(f"{field} must be {name.pattern[1:-1]}, whole")


def normal_pnfsid(value: str) -> str:
    """*value* checked whole and normalised as every pnfsid entering tssd is
    (:func:`tssd.shim.names.pnfsid_or_none`); for a Struct's ``__post_init__``."""
    pnfsid = pnfsid_or_none(value)
    if pnfsid is None:
        raise ValueError(f"pnfsid must be {PNFSID.pattern[1:-1]}, whole")
    return pnfsid


class Submit(msgspec.Struct, kw_only=True, gc=False):
    """One request: a recall or migration (pnfsid and path; a migration also size and
    storage_class) or a removal (bfid, or uris to take it from)."""

    kind: Kind
    pnfsid: Pnfsid | None = None
    path: AbsolutePath | None = None
    size: Size | None = None
    storage_class: Tagged | None = None
    checksum: Adler32 | None = None
    hsm_type: OptionalName | None = None
    hsm_instance: OptionalName | None = None
    store: Tagged | None = None
    group: Tagged | None = None
    bfid: Bfid | None = None
    uris: Annotated[list[Uri], Meta(max_length=MAX_URIS)] | None = None
    queue: OptionalQueue | None = None
    priority: Priority = 0
    delivery: (
        Annotated[
            Literal["claim", "direct"],
            Meta(
                description="Recalls only. claim: the file is left as .<name>.tssd-part for "
                "the caller to rename into place (tss-hsm); direct (default): tssd renames it."
            ),
        ]
        | None
    ) = None

    def __post_init__(self) -> None:
        if self.pnfsid is not None:
            self.pnfsid = normal_pnfsid(self.pnfsid)
        check_whole(
            self,
            ("checksum", ADLER32),
            ("hsm_type", NAME),
            ("hsm_instance", NAME),
            ("bfid", NAME),
            ("queue", QUEUE),
        )


class Obtain(Submit, kw_only=True):
    """A recall or migration as for submit, for tss-hsm: adopt the open request of the
    same file (``open``), or also a finished one not yet reported (``finished``)."""

    adopt: Literal["finished", "open"] = "finished"


class Bulk(msgspec.Struct):
    """Many requests at once; all or nothing."""

    requests: Annotated[list[Submit], Meta(min_length=1)]


class Query(msgspec.Struct):
    """The progress of a batch of requests, by id."""

    ids: Annotated[list[RequestId], Meta(max_length=MAX_QUERY_IDS)]


class CatalogImport(msgspec.Struct):
    """A catalog CSV, inline (``csv``) or as a path on the daemon's host (``path``); one
    of the two is needed (tssd/api/catalog.py says so: a schema of msgspec's cannot)."""

    csv: str | None = None
    path: AbsolutePath | None = None
    replace: bool = False
    force: bool = False


class QueuePatch(msgspec.Struct, forbid_unknown_fields=True):
    """The settings of a queue to change; an absent field stays as it is."""

    priority: Priority | UnsetType = UNSET
    max_drives: QueueDrives | UnsetType | None = UNSET
    paused: bool | UnsetType = UNSET
    latency_target_s: TargetSeconds | UnsetType | None = UNSET


BODIES: tuple[type[msgspec.Struct], ...] = (Submit, Obtain, Bulk, Query, CatalogImport, QueuePatch)

T = TypeVar("T", bound=msgspec.Struct)


def convert(value: Any, body: type[T], *, strict: bool = True) -> T:
    """*value* (decoded JSON) as a *body*; :class:`InvalidRequest` naming what is wrong.
    Not *strict*: text converts to the declared numbers and booleans (query strings)."""
    try:
        return msgspec.convert(value, body, strict=strict)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(str(exc)) from exc


#: Bulk entries converted per msgspec call. One call holds the interpreter lock until it
#: returns: a whole bulk body of 100,000 requests is 0.4 s of it, the event loop's too,
#: though it runs in a worker thread; a slice is a few milliseconds.
BULK_SLICE = 500
_ENTRY = re.compile(r"`\$\.requests\[(\d+)\]")


def convert_bulk(value: Any) -> list[Submit]:
    """The entries of a :class:`Bulk` body, converted a slice at a time."""
    entries = value.get("requests") if isinstance(value, dict) else None
    if not isinstance(entries, list) or not entries:
        return convert(value, Bulk).requests  # refused, with msgspec's message
    out: list[Submit] = []
    for start in range(0, len(entries), BULK_SLICE):
        part = {"requests": entries[start : start + BULK_SLICE]}
        try:
            out += msgspec.convert(part, Bulk, strict=True).requests
        except msgspec.ValidationError as exc:
            raise InvalidRequest(_shifted(str(exc), start)) from exc
    return out


def _shifted(message: str, offset: int) -> str:
    """*message* with the entry index it names counted from the whole body's start."""
    return _ENTRY.sub(lambda m: f"`$.requests[{int(m[1]) + offset}]", message)
