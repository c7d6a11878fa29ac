"""Query parameters declared once (tssd/api/params.py): what a route takes, what it
refuses, and the OpenAPI parameters derived from the same declaration."""

from __future__ import annotations

from urllib.parse import urlencode

import msgspec
import pytest
from aiohttp.test_utils import make_mocked_request

from tssd.api import params as P
from tssd.api.openapi import openapi_document
from tssd.domain import State
from tssd.errors import InvalidRequest


def _query(params: type[msgspec.Struct], pairs: list[tuple[str, str]]) -> msgspec.Struct:
    return P.query_params(make_mocked_request("GET", "/x?" + urlencode(pairs)), params)


def test_text_becomes_the_declared_types_and_empty_is_absent() -> None:
    q = _query(P.ListParams, [("state", "queued"), ("limit", "7"), ("after", "3"), ("queue", "")])
    assert q == P.ListParams(state=State.QUEUED, limit=7, after=3)
    assert _query(P.ListParams, []) == P.ListParams()
    assert _query(P.MountsParams, [("newest", "true")]).newest is True  # type: ignore[attr-defined]
    assert _query(P.MountsParams, [("newest", "1")]).newest is True  # type: ignore[attr-defined]
    # The first of a repeated key.
    assert _query(P.WaitParams, [("timeout", "5"), ("timeout", "9")]) == P.WaitParams(timeout=5)


@pytest.mark.parametrize(
    ("params", "pairs", "named"),
    [
        (P.ListParams, [("limit", "0")], "limit"),
        (P.ListParams, [("limit", "1001")], "limit"),
        (P.ListParams, [("limit", "ten")], "limit"),
        (P.ListParams, [("after", "-1")], "after"),
        (P.ListParams, [("state", "lost")], "state"),
        (P.ListParams, [("queue", "a b")], "queue"),
        (P.ListParams, [("queue", "atlas\n")], "queue"),
        (P.ListParams, [("pnfsid", "BB01\n")], "pnfsid"),
        (P.WaitParams, [("timeout", "86401")], "timeout"),
        (P.LatestParams, [("kind", "remove"), ("pnfsid", "BB01")], "kind"),
        (P.LatestParams, [("kind", "recall")], "pnfsid"),
        (P.MountsParams, [("newest", "perhaps")], "newest"),
        (P.ReportParams, [("bins", "1001")], "bins"),
        (P.DuplicatesParams, [("limit", "1000001")], "limit"),
    ],
)
def test_what_is_refused_is_named(
    params: type[msgspec.Struct], pairs: list[tuple[str, str]], named: str
) -> None:
    with pytest.raises(InvalidRequest, match=named):
        _query(params, pairs)


@pytest.mark.parametrize(
    ("path", "method", "params"),
    [
        ("/v1/requests", "get", P.ListParams),
        ("/v1/requests/latest", "get", P.LatestParams),
        ("/v1/catalog/duplicates", "get", P.DuplicatesParams),
        ("/v1/tapes", "get", P.TapesParams),
        ("/v1/mounts", "get", P.MountsParams),
        ("/v1/report/efficiency", "get", P.ReportParams),
    ],
)
def test_the_document_gives_the_declared_parameters(
    path: str, method: str, params: type[msgspec.Struct]
) -> None:
    documented = openapi_document()["paths"][path][method]["parameters"]
    assert documented == P.query_parameters(params)
    assert [p["name"] for p in documented] == list(params.__struct_fields__)
    limits = {p["name"]: p["schema"] for p in documented}
    if "limit" in limits:
        assert {"minimum", "maximum"} <= set(limits["limit"])


def test_wait_documents_its_timeout_beside_the_id() -> None:
    documented = openapi_document()["paths"]["/v1/requests/{id}/wait"]["get"]["parameters"]
    assert [p["name"] for p in documented] == ["id", "timeout"]
    assert documented[1]["schema"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 86400,
        "default": 30,
    }


@pytest.mark.parametrize("raw", ["0", "-3", "abc", "9" * 30, str(2**62 + 1)])
def test_a_path_id_outside_its_declaration_is_refused(raw: str) -> None:
    request = make_mocked_request("GET", f"/v1/requests/{raw}", match_info={"id": raw})
    with pytest.raises(InvalidRequest, match="id"):
        P.path_id(request)


def test_a_path_id_is_what_the_document_says() -> None:
    request = make_mocked_request("GET", "/v1/requests/17", match_info={"id": "17"})
    assert P.path_id(request) == 17
    documented = openapi_document()["paths"]["/v1/requests/{id}"]["get"]["parameters"]
    assert documented == [P.REQUEST_ID.document()]
    assert documented[0]["schema"] == {"type": "integer", "minimum": 1, "maximum": 2**62}


def _path(param: P.PathParam, raw: str) -> object:
    request = make_mocked_request("GET", "/x", match_info={param.name: raw})
    return param.value(request)


@pytest.mark.parametrize(
    ("route", "method", "param"),
    [
        ("/v1/queues/{name}", "patch", P.QUEUE_PATH),
        ("/v1/drives/{name}/enable", "post", P.DRIVE_PATH),
        ("/v1/tapes/{volume}", "get", P.VOLUME_PATH),
        ("/v1/catalog/copies/{pnfsid}", "get", P.PNFSID_PATH),
    ],
)
def test_each_path_name_is_documented_as_declared(
    route: str, method: str, param: P.PathParam
) -> None:
    documented = openapi_document()["paths"][route][method]["parameters"]
    assert documented == [param.document()]
    assert documented[0]["name"] == param.name and documented[0]["in"] == "path"


@pytest.mark.parametrize(
    ("param", "raw"),
    [
        (P.QUEUE_PATH, "a b"),
        (P.QUEUE_PATH, "urgent\n"),
        (P.QUEUE_PATH, "q" * 65),
        (P.VOLUME_PATH, "BB01\n"),
        (P.VOLUME_PATH, "V" * 33),
        (P.PNFSID_PATH, "00XY"),
        (P.PNFSID_PATH, "00AB\n"),
        (P.DRIVE_PATH, ""),
        (P.DRIVE_PATH, "d" * 65),
    ],
)
def test_a_path_name_outside_its_declaration_is_refused(param: P.PathParam, raw: str) -> None:
    with pytest.raises(InvalidRequest, match=param.name):
        _path(param, raw)


def test_path_names_pass_whole_and_a_pnfsid_is_normalised() -> None:
    assert _path(P.QUEUE_PATH, "urgent.tape-1") == "urgent.tape-1"
    assert _path(P.VOLUME_PATH, "BB0123") == "BB0123"
    assert _path(P.DRIVE_PATH, "sim0") == "sim0"
    # As every pnfsid entering tssd (tssd/shim/names.py).
    assert _path(P.PNFSID_PATH, "00ab") == _path(P.PNFSID_PATH, "00AB")
