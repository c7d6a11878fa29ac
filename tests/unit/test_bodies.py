"""The API's request bodies are declared once (tssd/bodies.py): the OpenAPI document names
them, and what the validation accepts is what the document's schema accepts.

The schema side is checked by an independent validator, jsonschema-rs (Rust; ECMA-262
regular expressions, where ``$`` matches only at the end, so ``"BB01\\n"`` fails a name's
pattern there as it fails tssd's whole-name check). One known difference is kept out of the
draw: JSON Schema counts 1.0 as an integer, tssd refuses a float where it counts things.
"""

from __future__ import annotations

import math
from typing import Any

import jsonschema_rs
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tssd.api.body_schemas import REF, body_schemas
from tssd.api.openapi import openapi_document
from tssd.bodies import (
    BODIES,
    BULK_SLICE,
    Bulk,
    Obtain,
    Query,
    QueuePatch,
    Submit,
    convert,
    convert_bulk,
)
from tssd.errors import InvalidRequest


def _validator(name: str) -> Any:
    root = {"$ref": REF.format(name=name), "components": {"schemas": body_schemas()}}
    return jsonschema_rs.validator_for(root)


def test_every_request_body_in_the_document_is_a_declared_one() -> None:
    doc = openapi_document()
    declared = {body.__name__ for body in BODIES}
    assert declared <= set(doc["components"]["schemas"])
    seen = set()
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            body = operation.get("requestBody")
            if body is None:
                continue
            schema = body["content"]["application/json"]["schema"]
            assert set(schema) == {"$ref"}, f"{method} {path}: an inline body schema"
            seen.add(schema["$ref"].rsplit("/", 1)[1])
    assert seen == declared


def test_the_document_holds_what_msgspec_derives() -> None:
    _, components = msgspec.json.schema_components(BODIES, ref_template=REF)
    schemas = openapi_document()["components"]["schemas"]
    for name, schema in components.items():
        assert schemas[name] == schema, name


@pytest.mark.parametrize("field", ["pnfsid", "queue", "bfid", "hsm_type", "checksum"])
def test_a_name_with_a_final_newline_is_refused(field: str) -> None:
    value = "BB01\n"
    body = {"kind": "recall", "pnfsid": "BB01", "path": "/p", field: value}
    with pytest.raises(InvalidRequest, match=field):
        convert(body, Submit)
    assert not _validator("Submit").is_valid(body)


_TEXT = st.text(alphabet="aZ09_.:-/+@<>\n\0 ", max_size=6) | st.sampled_from(
    [
        "",
        "BB01",
        "bb01",
        "/pool/f",
        "osm://osm/?bfid=B1",
        "<Unknown>",
        "a" * 65,
        "/" * 4097,
        "recall",
        "migrate",
        "remove",
        "claim",
        "direct",
        "open",
        "finished",
        "/x\0",
    ]
)
_NUMBER = (
    st.integers(min_value=-(2**64), max_value=2**64)
    | st.sampled_from([0, 1, 10_000, 10_001, 1_000_000, 1_000_001, 2**63 - 1, 2**63, 31_536_001])
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
    | st.sampled_from([0.5, 1.5, 3600.5, math.pi])
)
_ATOM = st.none() | st.booleans() | _NUMBER | _TEXT
_VALUE = _ATOM | st.lists(_ATOM, max_size=3)
#: Values some field takes, so that drawn bodies fall on both sides of the schema.
_LIKELY = st.sampled_from(
    [None, "BB01", "/pool/f", "atlas:tape", "", 0, 7, 3600, True, [], ["osm://osm/?bfid=B1"]]
)


def _bodies(struct: type[msgspec.Struct], valid: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A valid body with up to three fields set to drawn values, or any JSON value."""
    keys = st.sampled_from([*struct.__struct_fields__, "unknown"])
    value = st.booleans().flatmap(lambda likely: _LIKELY if likely else _VALUE)
    changes = st.dictionaries(keys, value, max_size=3)
    mutated = changes.map(lambda c: {**valid, **c})
    # Not one_of, here and above: it flattens the branches of the strategies it joins,
    # and would draw mostly from _ATOM's many.
    return st.integers(0, 3).flatmap(lambda i: _ATOM if i == 0 else mutated)


_SUBMIT = {"kind": "recall", "pnfsid": "BB01", "path": "/pool/f"}
_CASES: dict[str, st.SearchStrategy[Any]] = {
    "Submit": _bodies(Submit, _SUBMIT),
    "Obtain": _bodies(Obtain, {**_SUBMIT, "adopt": "open"}),
    "QueuePatch": _bodies(QueuePatch, {"priority": 1}),
    "Bulk": _bodies(Bulk, {"requests": [_SUBMIT]})
    | st.lists(_bodies(Submit, _SUBMIT), max_size=2).map(lambda r: {"requests": r}),
    "Query": _bodies(Query, {"ids": [1, 2]}),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_the_validation_accepts_exactly_what_the_schema_accepts(name: str) -> None:
    struct = next(body for body in BODIES if body.__name__ == name)
    validator = _validator(name)

    @settings(max_examples=400, deadline=None)
    @given(_CASES[name])
    def agree(value: Any) -> None:
        try:
            convert(value, struct)
            accepted = True
        except InvalidRequest:
            accepted = False
        assert accepted == validator.is_valid(value), value

    agree()


def test_a_bulk_entry_error_names_its_place() -> None:
    entry = {"kind": "recall", "pnfsid": "BB01", "path": "/p"}
    body = {"requests": [entry] * (BULK_SLICE + 7) + [{**entry, "priority": "high"}]}
    with pytest.raises(InvalidRequest, match=rf"\$\.requests\[{BULK_SLICE + 7}\]\.priority"):
        convert_bulk(body)
    assert len(convert_bulk({"requests": [entry] * (2 * BULK_SLICE + 1)})) == 2 * BULK_SLICE + 1
    for refused in ({"requests": []}, {"requests": None}, [], {}):
        with pytest.raises(InvalidRequest):
            convert_bulk(refused)


@given(st.lists(_bodies(Submit, _SUBMIT), max_size=3))
@settings(max_examples=100, deadline=None)
def test_bulk_in_slices_is_bulk_whole(entries: list[Any]) -> None:
    body = {"requests": entries}
    try:
        whole: Any = convert(body, Bulk).requests
    except InvalidRequest:
        whole = InvalidRequest
    try:
        sliced: Any = convert_bulk(body)
    except InvalidRequest:
        sliced = InvalidRequest
    assert sliced == whole
