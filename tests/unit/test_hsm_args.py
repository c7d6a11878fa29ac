"""Parsing of the argument lists dCache hands to ``tss-hsm``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tssd.shim.args import (
    DEFAULT_RECONNECT_S,
    Call,
    UsageError,
    parse_args,
    parse_storage_info,
)

PNFSID = "0000A1B2C3D4E5F60718293A4B5C6D7E8F90"
PATH = f"/pool/data/{PNFSID}"
URI1 = "osm://osm/?store=atlas&group=tape&bfid=f00d01"
URI2 = "osm://osm/?store=atlas&group=tape&bfid=f00d02"
SI_PUT = (
    "size=1048576000;new=true;stored=false;sClass=atlas:tape;cClass=-;hsm=osm;"
    "accessLatency=NEARLINE;retentionPolicy=CUSTODIAL;path=/pnfs/example.org/data/atlas/f1;"
    "uid=1000;gid=2000;flag-c=1:0A1B2C3D;store=atlas;group=tape;"
)
SI_GET = (
    "size=42;new=false;stored=true;sClass=atlas:tape;cClass=-;hsm=osm;"
    "accessLatency=NEARLINE;retentionPolicy=CUSTODIAL;flag-c=1:00ff;"
    f"store=atlas;group=tape;{URI1};{URI2};"
)


def test_put_as_dcache_calls_it() -> None:
    call = parse_args(
        ["put", PNFSID, PATH, f"-si={SI_PUT}", "-tssd=/run/tssd/tssd.sock", "-queue=atlas",
         "-priority=-5", "-hsmBase=/hsm", "-debug"]
    )  # fmt: skip
    assert call.verb == "put"
    assert call.transfer is not None
    assert (call.transfer.pnfsid, call.transfer.path) == (PNFSID, PATH)
    si = call.transfer.si
    assert si.size == 1048576000
    assert si.storage_class == "atlas:tape"
    assert (si.hsm, si.store, si.group) == ("osm", "atlas", "tape")
    assert si.adler32 == "0a1b2c3d"
    assert si.locations == ()
    options = call.options
    assert options.tssd == "/run/tssd/tssd.sock"
    assert (options.queue, options.priority, options.mode) == ("atlas", -5, "block")
    assert options.reconnect_timeout == DEFAULT_RECONNECT_S


def test_get_with_several_uris_and_locations_in_storage_info() -> None:
    call = parse_args(
        ["get", PNFSID, PATH, f"-si={SI_GET}", f"-uri={URI1}", f"-uri={URI2}", "-mode=poll",
         "-hsmInstance=tape1", "-reconnect-timeout=2.5"]
    )  # fmt: skip
    assert [location.uri for location in call.uris] == [URI1, URI2]
    assert [location.bfid for location in call.uris] == ["f00d01", "f00d02"]
    assert call.uris[0].instance == "osm"
    assert call.transfer is not None
    assert call.transfer.si.locations == (URI1, URI2)
    assert call.transfer.si.adler32 == "000000ff"
    assert call.options.mode == "poll"
    assert call.options.hsm_instance == "tape1"
    assert call.options.reconnect_timeout == 2.5


def test_remove_has_no_pnfsid() -> None:
    call = parse_args(["remove", f"-uri={URI1}", "-tssd=http://tss.example.org:8080"])
    assert (call.verb, call.transfer) == ("remove", None)
    assert call.uris[0].bfid == "f00d01"
    assert call.options.tssd == "http://tss.example.org:8080"


def test_options_may_precede_positionals_and_bare_options_are_unset() -> None:
    call = parse_args(["-queue", "put", "-priority", PNFSID, PATH, "-si=size=0;"])
    assert call.options.queue is None
    assert call.options.priority is None
    assert call.transfer is not None
    assert call.transfer.si.size == 0


def test_values_keep_equals_and_colons() -> None:
    si = parse_storage_info("size=1;path=/pnfs/a=b:c;x=http://h/?a=b;sClass=-;store=s;group=g;")
    assert si.storage_class == "s:g"
    assert si.locations == ()


def test_storage_class_dash_without_store_and_group_is_none() -> None:
    si = parse_storage_info("size=1;sClass=-;cClass=-;hsm=-;")
    assert (si.storage_class, si.hsm, si.adler32) == (None, None, None)


def test_other_checksum_types_are_ignored() -> None:
    assert parse_storage_info("size=1;flag-c=2:d41d8cd98f00b204e9800998ecf8427e;").adler32 is None
    assert parse_storage_info("size=1;flag-c=2:abcd,1:ABCD1234;").adler32 == "abcd1234"


def test_uri_entries_in_storage_info() -> None:
    si = parse_storage_info(f"size=5;{URI1};enstore://en/?bfid=9;")
    assert si.locations == (URI1, "enstore://en/?bfid=9")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([], "missing command"),
        (["-si=size=1;"], "missing command"),
        (["copy", PNFSID, PATH], "unknown command"),
        (["put", PNFSID, "-si=size=1;"], "needs <pnfsid> <path>"),
        (["get", "-si=size=1;"], "needs <pnfsid> <path>"),
        (["put", PNFSID, PATH, "extra", "-si=size=1;"], "unexpected argument"),
        (["put", PNFSID, PATH], "needs -si="),
        (["put", PNFSID, PATH, "-si=new=true;sClass=a:b;"], "no size"),
        (["put", PNFSID, PATH, "-si="], "no size"),
        (["put", PNFSID, PATH, "-si=size=12kB;"], "not an integer"),
        (["put", PNFSID, PATH, "-si=size=;"], "not an integer"),
        (["put", PNFSID, PATH, "-si=size=-1;"], "negative"),
        (["put", "00XYZ", PATH, "-si=size=1;"], "not 1 to 64 hex"),
        (["put", "A" * 65, PATH, "-si=size=1;"], "not 1 to 64 hex"),
        (["put", PNFSID, "", "-si=size=1;"], "path is empty"),
        (["put", PNFSID, PATH, "-si=size=1;flag-c=1:xyz;"], "flag-c"),
        (["put", PNFSID, PATH, "-si=size=1;", "-priority=high"], "-priority"),
        (["put", PNFSID, PATH, "-si=size=1;", "-priority=1.5"], "-priority"),
        (["put", PNFSID, PATH, "-si=size=1;", "-mode=async"], "-mode"),
        (["put", PNFSID, PATH, "-si=size=1;", "-reconnect-timeout=-3"], "-reconnect-timeout"),
        (["put", PNFSID, PATH, "-si=size=1;", "-reconnect-timeout=nan"], "-reconnect-timeout"),
        (["remove"], "at least one -uri="),
        (["remove", "-tssd=/x.sock"], "at least one -uri="),
        (["remove", PNFSID, f"-uri={URI1}"], "unexpected argument"),
        (["remove", "-uri=osm://osm/?store=a&group=b"], "no bfid"),
        (["remove", "-uri=osm://osm/?bfid="], "no bfid"),
        (["remove", "-uri"], "no bfid"),
        (["remove", "-uri=osm://[::1/?bfid=1"], "malformed -uri"),
        (["get", PNFSID, PATH, f"-si={SI_GET}", "-uri=osm://osm/"], "no bfid"),
    ],
)
def test_invalid_calls_are_usage_errors(argv: list[str], fragment: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_args(argv)
    assert info.value.code == 32
    assert fragment in info.value.message
    assert "\n" not in info.value.message


_TOKENS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["put", "get", "remove", PNFSID, PATH, "-", "--", "-si", "-uri", "-h"]),
    st.builds(
        lambda key, value: f"-{key}={value}",
        st.sampled_from(["si", "uri", "tssd", "mode", "queue", "priority", "hsmType",
                         "hsmInstance", "reconnect-timeout", "c:puts", "x"]),
        st.one_of(st.text(max_size=60), st.sampled_from([SI_PUT, SI_GET, URI1, "poll", "7"])),
    ),
)  # fmt: skip


@given(st.lists(_TOKENS, max_size=8))
def test_parser_returns_a_call_or_raises_usage_error(argv: list[str]) -> None:
    try:
        call = parse_args(argv)
    except UsageError as exc:
        assert exc.code == 32
    else:
        assert isinstance(call, Call)
        assert call.verb in ("put", "get", "remove")
        assert (call.transfer is None) == (call.verb == "remove")
