"""What a client may ask for: validation of submitted requests, independent of transport."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tssd.domain import Kind
from tssd.errors import InvalidRequest
from tssd.shim.names import ADLER32, NAME, QUEUE, pnfsid_or_none

MAX_PATH = 4096
MAX_URIS = 64


@dataclass(frozen=True)
class SubmitSpec:
    """A validated request as submitted; ``key`` makes resubmission idempotent."""

    kind: Kind
    key: str
    pnfsid: str | None = None
    path: str | None = None
    size: int | None = None
    storage_class: str | None = None
    checksum: str | None = None
    hsm_type: str = "osm"
    hsm_instance: str = "osm"
    store: str | None = None
    group: str | None = None
    bfid: str | None = None
    uris: tuple[str, ...] = field(default=())
    queue: str = "default"
    priority: int = 0
    #: "claim": a recall the pool renames into place itself (tss-hsm); None: tssd does.
    delivery: str | None = None

    #: The submitting Unix socket peer's uid (set by the API, not by the client).
    owner_uid: int | None = None


def bfid_from_uri(uri: str) -> str:
    """The ``bfid`` of a URI printed by ``tss-hsm put``."""
    if len(uri) > MAX_PATH or "://" not in uri:
        raise InvalidRequest(f"not a tape URI: {uri[:200]!r}")
    values = parse_qs(urlsplit(uri).query).get("bfid")
    if not values or not NAME.fullmatch(values[0]):
        raise InvalidRequest(f"URI has no valid bfid: {uri[:200]!r}")
    return values[0]


#: dCache prints a missing OSM tag as ``<Unknown>`` (``OSMStorageInfo``: a directory without
#: ``OSMTemplate`` tags gives ``store=<Unknown>;group=<Unknown>``). tssd files such a file
#: under the name ``unknown`` instead: ``<Unknown>:<Unknown>`` becomes ``unknown:unknown``.
UNKNOWN_TAG = "<Unknown>"
UNKNOWN_NAME = "unknown"


def untagged(value: Any) -> Any:
    """*value* with dCache's ``<Unknown>`` tag placeholder replaced by ``unknown``."""
    if isinstance(value, str) and UNKNOWN_TAG in value:
        return value.replace(UNKNOWN_TAG, UNKNOWN_NAME)
    return value


def parse_submit(body: Any, default_queue: str = "default") -> SubmitSpec:
    """Validate one submitted request (a decoded JSON object)."""
    if not isinstance(body, dict):
        raise InvalidRequest("a request must be a JSON object")
    try:
        kind = Kind(str(body.get("kind")))
    except ValueError:
        raise InvalidRequest("kind must be one of recall, migrate, remove") from None
    common = _common_fields(body, default_queue)
    if kind is Kind.REMOVE:
        return _parse_remove(body, common)
    pnfsid = _pnfsid(body.get("pnfsid"))
    path = _path(body.get("path"))
    size = _size(body.get("size"), required=kind is Kind.MIGRATE)
    storage_class = _name(
        untagged(body.get("storage_class")), "storage_class", required=kind is Kind.MIGRATE
    )
    uris = _uris(body.get("uris"))
    for uri in uris:
        bfid_from_uri(uri)
    return SubmitSpec(
        kind=kind,
        key=pnfsid,
        pnfsid=pnfsid,
        path=path,
        size=size,
        storage_class=storage_class,
        uris=uris,
        delivery=_delivery(body.get("delivery"), kind),
        **common,
    )


def _parse_remove(body: dict[str, Any], common: dict[str, Any]) -> SubmitSpec:
    uris = _uris(body.get("uris"))
    bfid = body.get("bfid")
    if bfid is None:
        if not uris:
            raise InvalidRequest("remove needs a uri or a bfid")
        bfid = bfid_from_uri(uris[0])
    if not NAME.fullmatch(bfid):
        raise InvalidRequest("bfid must be 1-255 characters of [A-Za-z0-9_.:@/+-]")
    pnfsid = body.get("pnfsid")
    return SubmitSpec(
        kind=Kind.REMOVE,
        key=bfid,
        bfid=bfid,
        uris=uris,
        pnfsid=_pnfsid(pnfsid) if pnfsid is not None else None,
        **common,
    )


def _common_fields(body: dict[str, Any], default_queue: str) -> dict[str, Any]:
    queue = body.get("queue") or default_queue
    if not QUEUE.fullmatch(queue):
        raise InvalidRequest("queue must be 1-64 characters of [A-Za-z0-9_.:-]")
    priority = body.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) > 10**6:
        raise InvalidRequest("priority must be an integer between -1000000 and 1000000")
    checksum = body.get("checksum")
    if checksum is not None:
        if not ADLER32.fullmatch(checksum):
            raise InvalidRequest("checksum must be an adler32 of up to 8 hex digits")
        checksum = checksum.lower().zfill(8)
    return {
        "queue": queue,
        "priority": priority,
        "checksum": checksum,
        "hsm_type": _name(body.get("hsm_type"), "hsm_type") or "osm",
        "hsm_instance": _name(body.get("hsm_instance"), "hsm_instance") or "osm",
        "store": _name(untagged(body.get("store")), "store"),
        "group": _name(untagged(body.get("group")), "group"),
    }


def _pnfsid(value: Any) -> str:
    pnfsid = pnfsid_or_none(value)
    if pnfsid is None:
        raise InvalidRequest("pnfsid must be 1-64 hex digits")
    return pnfsid


def _path(value: Any) -> str:
    if not isinstance(value, str) or not value.startswith("/") or len(value) > MAX_PATH:
        raise InvalidRequest("path must be an absolute path")
    if "\0" in value:
        raise InvalidRequest("path must not contain NUL")
    return value


def _size(value: Any, *, required: bool) -> int | None:
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >= 2**63:
        raise InvalidRequest("size must be a non-negative integer")
    return value


def _name(value: Any, what: str, *, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise InvalidRequest(f"{what} is required")
        return None
    if not NAME.fullmatch(value):
        raise InvalidRequest(f"{what} must be 1-255 characters of [A-Za-z0-9_.:@/+-]")
    return value


def _uris(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_URIS:
        raise InvalidRequest(f"uris must be a list of at most {MAX_URIS} strings")
    if not all(isinstance(u, str) and 0 < len(u) <= MAX_PATH for u in value):
        raise InvalidRequest("every uri must be a non-empty string")
    return tuple(value)


def make_uri(
    hsm_type: str, hsm_instance: str, store: str | None, group: str | None, bfid: str
) -> str:
    """The URI ``tss-hsm put`` prints: dCache keeps it and hands it back on get/remove."""
    return f"{hsm_type}://{hsm_instance}/?store={store or ''}&group={group or ''}&bfid={bfid}"


DELIVERIES = ("claim", "direct")


def _delivery(value: Any, kind: Kind) -> str | None:
    if value is None:
        return None
    if value not in DELIVERIES:
        raise InvalidRequest('delivery must be "claim" or "direct"')
    if kind is not Kind.RECALL:
        raise InvalidRequest("delivery applies to recalls only")
    return "claim" if value == "claim" else None
