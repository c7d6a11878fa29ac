"""Fuzzing tss-hsm's argument parser: whatever dCache (or anyone) passes, the parser either
returns a well-formed call or raises UsageError (exit 32): never another exception, never
a half-valid call that the daemon would then have to reject."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tssd.shim.args import EXIT_INVALID, UsageError, parse_args
from tssd.shim.names import NAME
from tssd.shim.names import PNFSID as PNFSID_NAME

PNFSID = "0000A1B2C3D4E5F60718293A4B5C6D7E8F90"
SI = "size=42;sClass=atlas:tape;hsm=osm;store=atlas;group=tape;flag-c=1:00ff;"
URI = "osm://osm/?store=atlas&group=tape&bfid=f00d01"

# Pieces dCache really passes, mangled and recombined: the search finds edge cases in
# the real grammar faster than from random text alone.
ATOMS = st.sampled_from(
    ["put", "get", "remove", PNFSID, "/pool/data/f", f"-si={SI}", f"-uri={URI}", "-si=",
     "-uri=", "-uri=osm://", "-queue=atlas", "-priority=7", "-priority=x", "-mode=poll",
     "-mode=bogus", "-reconnectTimeout=5", "-reconnectTimeout=-1", "-hsmInstance=osm",
     "-", "--", "=", "-=", "size=-1;", "size=99999999999999999999999;", "flag-c=1:zz;",
     "\x00", "é", "../../etc/passwd", "sClass=a:b;"]
)  # fmt: skip
ARG = st.one_of(ATOMS, st.text(max_size=40), ATOMS.flatmap(lambda a: st.just(a + "x")))
ARGV = st.lists(ARG, max_size=8)
#: Examples run in CI per strategy below (the full budget is in docs/reliability.md).
FUZZ = settings(
    max_examples=int(os.environ.get("TSSD_FUZZ_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def check(argv: list[str]) -> None:
    try:
        call = parse_args(argv)
    except UsageError as exc:
        assert exc.code == EXIT_INVALID
        assert exc.message and "\n" not in exc.message  # one diagnostic line
        return
    assert call.verb in ("put", "get", "remove")
    if call.verb == "remove":
        assert call.uris and call.transfer is None
        return
    transfer = call.transfer
    assert transfer is not None
    assert PNFSID_NAME.fullmatch(transfer.pnfsid), transfer.pnfsid
    assert transfer.si.size >= 0
    if transfer.si.storage_class is not None:
        assert transfer.si.storage_class
    for location in call.uris:
        assert NAME.fullmatch(location.bfid), location.bfid


@FUZZ
@given(ARGV)
@example(["put", PNFSID, "/p", f"-si={SI}"])
@example(["get", PNFSID, "/p", f"-si={SI}", f"-uri={URI}"])
@example(["remove", f"-uri={URI}"])
@example(["put", PNFSID, "/p", "-si=size=-1;sClass=a:b;"])
def test_parse_args_never_crashes(argv: list[str]) -> None:
    check(argv)


@FUZZ
@given(
    st.sampled_from(["put", "get"]),
    st.text(max_size=70),
    st.text(min_size=1, max_size=60),
    st.text(max_size=200),
)
def test_storage_info_fuzz(verb: str, pnfsid: str, path: str, si: str) -> None:
    check([verb, pnfsid, path, f"-si={si}", f"-uri={URI}"])


@FUZZ
@given(st.text(max_size=200))
def test_uri_fuzz(uri: str) -> None:
    check(["remove", f"-uri={uri}"])
    check(["get", PNFSID, "/p", f"-si={SI}", f"-uri={uri}"])
