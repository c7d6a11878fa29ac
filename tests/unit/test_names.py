"""Names are checked whole (tssd/shim/names.py): the same answer as ``re.fullmatch``, never the
trailing-newline slack of ``re.match(...$)`` that let ``"BB01\\n"`` write a second tape
copy (issue 17 point 6)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tssd.errors import InvalidRequest
from tssd.shim.args import UsageError, parse_args
from tssd.shim.names import (
    ADLER32,
    NAME,
    PNFSID,
    QUEUE,
    VOLUME,
    Name,
    is_hex,
    is_int,
    pnfsid_or_none,
)
from tssd.submit import parse_submit

ALL = [PNFSID, QUEUE, VOLUME, NAME, ADLER32]
# Text near the alphabets (and their look-alikes) finds the edges faster than any text.
NEAR = st.text(
    alphabet=st.one_of(
        st.sampled_from("0123456789abcdefABCDEFxyzXYZ_.:@/+-\n\r\t \x00\u0660\uff10é"),
        st.characters(),
    ),
    max_size=300,
)


@pytest.mark.parametrize("name", ALL, ids=lambda n: n.what)
@given(text=NEAR)
@example(text="BB01\n")
@example(text="")
def test_fullmatch_is_re_fullmatch(name: Name, text: str) -> None:
    expected = re.fullmatch(name.pattern[1:-1], text) is not None
    assert name.fullmatch(text) is expected


@pytest.mark.parametrize("name", ALL, ids=lambda n: n.what)
@given(text=NEAR, tail=st.sampled_from(["\n", "\r\n", " ", "\x00", "\u0660"]))
def test_no_trailing_slack(name: Name, text: str, tail: str) -> None:
    assert not name.fullmatch(text + tail)
    assert not name.fullmatch(tail + text)


@pytest.mark.parametrize("value", [None, 1, b"BB01", ["BB01"], 1.5])
def test_non_strings_are_no_names(value: Any) -> None:
    assert not any(name.fullmatch(value) for name in ALL)
    assert pnfsid_or_none(value) is None


@given(text=NEAR)
@example(text="0000a1b2c3d4e5f60718293a4b5c6d7e8f90")
def test_pnfsid_is_normalised_to_upper_case(text: str) -> None:
    normal = pnfsid_or_none(text)
    if re.fullmatch(r"[0-9A-Fa-f]{1,64}", text):
        assert normal == text.upper()
        assert pnfsid_or_none(normal) == normal  # idempotent
    else:
        assert normal is None


@given(text=NEAR)
@example(text=" 5")
@example(text="1_000")
@example(text="\u0665")
@example(text="12\n")
def test_is_int_and_is_hex_are_exact(text: str) -> None:
    assert is_int(text) is (re.fullmatch(r"[+-]?[0-9]{1,19}", text) is not None)
    assert is_hex(text, 8) is (re.fullmatch(r"[0-9A-Fa-f]{1,8}", text) is not None)


def migrate(**fields: Any) -> dict[str, Any]:
    body = {"kind": "migrate", "pnfsid": "BB01", "path": "/p/f", "size": 3,
            "storage_class": "a:b"}  # fmt: skip
    return body | fields


@pytest.mark.parametrize(
    "field,value",
    [("pnfsid", "BB01\n"), ("queue", "q\n"), ("storage_class", "a:b\n"),
     ("checksum", "00ff\n"), ("store", "s\n"), ("hsm_instance", "osm\n")],
)  # fmt: skip
def test_submit_refuses_a_trailing_newline(field: str, value: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_submit(migrate(**{field: value}))


def test_submit_normalises_pnfsid_once() -> None:
    lower, upper = parse_submit(migrate(pnfsid="bb01")), parse_submit(migrate())
    assert lower.pnfsid == lower.key == upper.key == "BB01"
    with pytest.raises(InvalidRequest):
        parse_submit({"kind": "remove", "bfid": "f00d\n"})


def test_shim_refuses_a_trailing_newline() -> None:
    si = "-si=size=3;sClass=a:b;"
    with pytest.raises(UsageError):
        parse_args(["put", "BB01\n", "/p/f", si])
    with pytest.raises(UsageError):
        parse_args(["remove", "-uri=osm://osm/?store=a&group=b&bfid=f00d%0A"])
