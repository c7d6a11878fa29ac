"""The SP backend's pure parts: names, bfids, objInfo, restore order, management classes,
return codes and the admin client's SELECT (tssd/backends/sp)."""

from __future__ import annotations

import pytest

from tssd.backends.sp import abi_consts as c
from tssd.backends.sp.naming import (
    bfid_of,
    decode_objinfo,
    encode_objinfo,
    management_classes,
    object_id_of,
    object_name,
    position_of,
    volume_key,
)
from tssd.backends.sp.rc import SpCallFailed, translate
from tssd.backends.sp.volumes import contents_select, first_volume
from tssd.errors import (
    ConfigError,
    InvalidRequest,
    ObjectNotFound,
    PermanentBackendError,
    TransientBackendError,
)

pytestmark = pytest.mark.sp


def test_object_names_and_bfids() -> None:
    name = object_name("/tssd", "atlas:tape", "0000ABCD")
    assert (name.filespace, name.high, name.low) == ("/tssd", "/atlas:tape", "/0000ABCD")
    assert object_id_of(bfid_of((7 << 32) | 9)) == (7 << 32) | 9
    for other in ("c0ffee", "sp.", "sp.-1", f"sp.{1 << 64}", "sp.1a"):
        with pytest.raises(InvalidRequest):
            object_id_of(other)


def test_objinfo_round_trip() -> None:
    assert decode_objinfo(encode_objinfo(12345, "0badcafe")) == (12345, "0badcafe")
    assert decode_objinfo(encode_objinfo(0, None)) == (0, None)
    # Objects another client archived carry their own objInfo, or none.
    assert decode_objinfo(b"100:0badcafe") == (None, None)
    assert decode_objinfo(b"") == (None, None)


def test_restore_order_gives_volume_and_a_monotone_position() -> None:
    assert volume_key(1, 0) != volume_key(2, 0) != volume_key(1, 1)
    keys = [(0, 0, 5), (0, 0, 6), (0, 1, 0), (1, 0, 0), (1, 0xFFFF, 0xFFFFFFFF), (2, 0, 0)]
    positions = [position_of(*key) for key in keys]
    assert positions == sorted(positions) and len(set(positions)) == len(keys)
    assert max(positions) < 1 << 63


def test_management_classes_setting() -> None:
    assert management_classes("") == {}
    assert management_classes("atlas:tape=ATLAS, cms:tape = CMS") == {
        "atlas:tape": "ATLAS",
        "cms:tape": "CMS",
    }
    for bad in ("atlas:tape", "=X", "atlas:tape="):
        with pytest.raises(ConfigError):
            management_classes(bad)


@pytest.mark.parametrize(
    ("rc", "error"),
    [
        (c.DSM_RC_ABORT_MOUNT_NOT_POSSIBLE, TransientBackendError),
        (c.DSM_RC_ABORT_EXCEED_MAX_MP, TransientBackendError),
        (c.DSM_RC_TCPIP_FAILURE, TransientBackendError),
        (c.DSM_RC_ABORT_NO_MATCH, ObjectNotFound),
        (c.DSM_RC_OBJID_NOTFOUND, ObjectNotFound),
        (c.DSM_RC_REJECT_ID_UNKNOWN, PermanentBackendError),
        (c.DSM_RC_REJECT_VERIFIER_EXPIRED, PermanentBackendError),
    ],
)
def test_return_codes_become_tssds_errors(rc: int, error: type[Exception]) -> None:
    translated = translate(SpCallFailed("dsmBeginGetData", rc, "the library's text"), "recall")
    assert type(translated) is error
    assert translated.code == rc
    assert "the library's text" in str(translated) and str(translated).startswith("recall: ")


def test_the_admin_select_and_its_answer() -> None:
    select = contents_select("tssd", "/tssd", "/atlas:tape", "/0000'X")
    assert select == (
        "select volume_name from contents where node_name='TSSD' and "
        "filespace_name='/tssd' and file_name='/atlas:tape /0000''X'"
    )
    assert first_volume("SP0001L9\n") == "SP0001L9"
    assert first_volume("ANR2034E SELECT: No match found using this criteria.\n") is None
