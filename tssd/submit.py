"""What a client may ask for: validation of submitted requests, independent of transport."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tssd.bodies import Submit, convert
from tssd.domain import Kind
from tssd.errors import InvalidRequest
from tssd.shim.names import MAX_PATH, NAME

__all__ = ["MAX_PATH", "SubmitSpec", "make_uri", "parse_submit", "submit_spec"]


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
    return submit_spec(convert(body, Submit), default_queue)


def submit_spec(body: Submit, default_queue: str = "default") -> SubmitSpec:
    """The request *body* asks for: what its schema (:class:`tssd.bodies.Submit`) cannot
    say, which fields each kind needs and what dCache's tags mean, checked here."""
    common = _common_fields(body, default_queue)
    uris = tuple(body.uris or ())
    if body.kind is Kind.REMOVE:
        return _remove_spec(body, uris, common)
    if body.pnfsid is None:
        raise InvalidRequest("pnfsid must be 1-64 hex digits")
    if body.path is None:
        raise InvalidRequest("path must be an absolute path")
    if body.size is None and body.kind is Kind.MIGRATE:
        raise InvalidRequest("size must be a non-negative integer")
    storage_class = _tag(body.storage_class, "storage_class", required=body.kind is Kind.MIGRATE)
    for uri in uris:
        bfid_from_uri(uri)
    if body.delivery is not None and body.kind is not Kind.RECALL:
        raise InvalidRequest("delivery applies to recalls only")
    pnfsid = body.pnfsid
    return SubmitSpec(
        kind=body.kind,
        key=pnfsid,
        pnfsid=pnfsid,
        path=body.path,
        size=body.size,
        storage_class=storage_class,
        uris=uris,
        delivery="claim" if body.delivery == "claim" else None,
        **common,
    )


def _remove_spec(body: Submit, uris: tuple[str, ...], common: dict[str, Any]) -> SubmitSpec:
    bfid = body.bfid
    if bfid is None:
        if not uris:
            raise InvalidRequest("remove needs a uri or a bfid")
        bfid = bfid_from_uri(uris[0])
    return SubmitSpec(
        kind=Kind.REMOVE,
        key=bfid,
        bfid=bfid,
        uris=uris,
        pnfsid=body.pnfsid,
        **common,
    )


def _common_fields(body: Submit, default_queue: str) -> dict[str, Any]:
    checksum = body.checksum.lower().zfill(8) if body.checksum is not None else None
    return {
        "queue": body.queue or default_queue,
        "priority": body.priority,
        "checksum": checksum,
        "hsm_type": body.hsm_type or "osm",
        "hsm_instance": body.hsm_instance or "osm",
        "store": _tag(body.store, "store"),
        "group": _tag(body.group, "group"),
    }


def _tag(value: str | None, what: str, *, required: bool = False) -> str | None:
    """A storage class, store or group as dCache hands it, ``<Unknown>`` tags named."""
    value = untagged(value)
    if not value:
        if required:
            raise InvalidRequest(f"{what} is required")
        return None
    if not NAME.fullmatch(value):
        raise InvalidRequest(f"{what} must be 1-255 characters of [A-Za-z0-9_.:@/+-]")
    return value


def make_uri(
    hsm_type: str, hsm_instance: str, store: str | None, group: str | None, bfid: str
) -> str:
    """The URI ``tss-hsm put`` prints: dCache keeps it and hands it back on get/remove."""
    return f"{hsm_type}://{hsm_instance}/?store={store or ''}&group={group or ''}&bfid={bfid}"
