"""The query parameters of the API's routes, declared once, as the bodies are
(:mod:`tssd.bodies`): a msgspec Struct per route gives the validation (:func:`query_params`,
a 400 naming the parameter) and the OpenAPI ``parameters`` (:func:`query_parameters`).

A query string carries text: :func:`query_params` converts it to the declared types
(msgspec's lax mode: ``"5"`` is 5, ``"true"`` is true), and an empty value counts as
absent. Times stay text in the Struct (declared ``date-time``) and are parsed where used
(``tssd/api/admin.py``): ISO 8601 dates without a time are taken too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from aiohttp import web
from msgspec import Meta

from tssd.bodies import Pnfsid, check_whole, convert, normal_pnfsid
from tssd.domain import Kind, State
from tssd.errors import InvalidRequest
from tssd.shim.names import QUEUE, VOLUME, Name, pnfsid_or_none

#: Page positions are request or mount ids: database integers.
After = Annotated[int, Meta(ge=0, le=2**62)]
Time = Annotated[str, Meta(extra_json_schema={"format": "date-time"})]
QueueName = Annotated[str, Meta(pattern=QUEUE.pattern)]
VolumeName = Annotated[str, Meta(pattern=VOLUME.pattern)]


class ListParams(msgspec.Struct):
    state: State | None = None
    kind: Kind | None = None
    queue: QueueName | None = None
    volume: VolumeName | None = None
    pnfsid: Pnfsid | None = None
    limit: Annotated[int, Meta(ge=1, le=1000)] = 100
    after: After | None = None

    def __post_init__(self) -> None:
        check_whole(self, ("queue", QUEUE), ("volume", VOLUME))
        if self.pnfsid is not None:
            self.pnfsid = normal_pnfsid(self.pnfsid)


class WaitParams(msgspec.Struct):
    timeout: Annotated[int, Meta(ge=0, le=86400)] = 30


class LatestParams(msgspec.Struct):
    kind: Literal["recall", "migrate"]
    pnfsid: Pnfsid

    def __post_init__(self) -> None:
        self.pnfsid = normal_pnfsid(self.pnfsid)


class DuplicatesParams(msgspec.Struct):
    limit: Annotated[int, Meta(ge=0, le=1_000_000)] = 100


class TapesParams(msgspec.Struct):
    limit: Annotated[int, Meta(ge=1, le=100_000)] = 1000
    after: str | None = None


class MountsParams(msgspec.Struct):
    since: Time | None = None
    until: Time | None = None
    drive: str | None = None
    volume: str | None = None
    limit: Annotated[int, Meta(ge=1, le=100_000)] = 1000
    after: After | None = None
    newest: bool = False


class ReportParams(msgspec.Struct):
    since: Time | None = None
    until: Time | None = None
    bins: Annotated[int, Meta(ge=0, le=1000)] = 0


#: A request id in a path (``/v1/requests/{id}``): a database integer.
RequestId = Annotated[int, Meta(ge=1, le=2**62)]
#: A drive's name, as the ``drives`` table holds it.
DriveName = Annotated[str, Meta(min_length=1, max_length=64)]


@dataclasses.dataclass(frozen=True)
class PathParam:
    """One path parameter declared once: its type gives the OpenAPI entry
    (:meth:`document`) and the check (:meth:`value`). *whole* checks (and normalises) a
    name whole, which msgspec's ``re.search`` patterns do not (``tssd/bodies.py``)."""

    name: str
    type: Any
    whole: Callable[[str], str | None] | None = None
    #: What an error calls it, where the name alone would not say (``name``).
    label: str = ""

    def document(self) -> dict[str, Any]:
        schema = msgspec.json.schema(self.type)
        return {"name": self.name, "in": "path", "required": True, "schema": schema}

    def value(self, request: web.Request) -> Any:
        """The parameter of *request*'s path; :class:`InvalidRequest` naming it."""
        try:
            value = msgspec.convert(request.match_info[self.name], self.type, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidRequest(f"{self.label or self.name}: {exc}") from exc
        if self.whole is not None:
            value = self.whole(value)
            if value is None:
                pattern = self.document()["schema"].get("pattern")
                raise InvalidRequest(f"{self.label or self.name} must match {pattern} whole")
        return value


def _fullmatch(name: Name) -> Callable[[str], str | None]:
    return lambda value: value if name.fullmatch(value) else None


REQUEST_ID = PathParam("id", RequestId)
QUEUE_PATH = PathParam("name", QueueName, _fullmatch(QUEUE), "queue name")
VOLUME_PATH = PathParam("volume", VolumeName, _fullmatch(VOLUME))
PNFSID_PATH = PathParam("pnfsid", Pnfsid, pnfsid_or_none)
DRIVE_PATH = PathParam("name", DriveName, label="drive name")

T = TypeVar("T", bound=msgspec.Struct)


def path_id(request: web.Request) -> int:
    """The request id of *request*'s path, as :data:`REQUEST_ID` documents it."""
    value: int = REQUEST_ID.value(request)
    return value


def query_params(request: web.Request, params: type[T]) -> T:
    """The query of *request* as *params*; :class:`InvalidRequest` naming what is wrong."""
    # The first of a repeated key, as aiohttp's ``query.get`` gives it.
    values = {key: request.query[key] for key in request.query if request.query[key] != ""}
    return convert(values, params, strict=False)


def query_parameters(params: type[msgspec.Struct]) -> list[dict[str, Any]]:
    """The OpenAPI ``parameters`` of *params*' fields, in declaration order."""
    (ref,), components = msgspec.json.schema_components([params], ref_template="{name}")
    schema = components[ref["$ref"]]
    required = set(schema.get("required", ()))
    out = []
    for name, prop in schema["properties"].items():
        out.append(
            {
                "name": name,
                "in": "query",
                "required": name in required,
                "schema": _inline(prop, components),
            }
        )
    return out


def _inline(prop: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """*prop* without its null alternative (absent is how a query says none: no default
    then), with named types (``State``, ``Kind``) inlined."""
    alternatives = [p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
    (one,) = alternatives
    one = dict(one)
    if "$ref" in one:
        one = {k: v for k, v in components[one["$ref"]].items() if k != "title"}
    if prop.get("default") is not None:
        one["default"] = prop["default"]
    return one
