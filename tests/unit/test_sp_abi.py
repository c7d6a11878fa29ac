"""The SP client API's structures, declared twice and compared: tssd's ctypes module
(tssd/backends/sp/abi.py) against the stand-in library's own C declarations
(tssd/backends/sp/standin/dsm_types.h), each printed as JSON by its own side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tssd.backends.sp import abi
from tssd.backends.sp import abi_consts as c
from tssd.backends.sp.standin import ABI_DUMP_NAME

pytestmark = pytest.mark.sp


def _python_side() -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "tssd.backends.sp.abi"], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def test_every_structure_has_the_same_size_and_offsets_on_both_sides(sp_build: Path) -> None:
    c_side = json.loads(
        subprocess.run([sp_build / ABI_DUMP_NAME], check=True, capture_output=True).stdout
    )
    py_side = _python_side()
    assert sorted(py_side["structs"]) == sorted(c_side["structs"])
    for name, layout in py_side["structs"].items():
        assert layout == c_side["structs"][name], name


def test_every_constant_of_the_stand_in_has_the_same_value_in_tssd(sp_build: Path) -> None:
    c_side = json.loads(
        subprocess.run([sp_build / ABI_DUMP_NAME], check=True, capture_output=True).stdout
    )
    constants = _python_side()["constants"]
    assert {name: constants.get(name) for name in c_side["constants"]} == c_side["constants"]


def test_the_documented_layout_facts_hold() -> None:
    """The facts both declarations rest on (IBM's API book, 8.x; Linux x86_64)."""
    assert abi.layout()["structs"]["dsStruct64_t"]["fields"] == {
        "hi": {"offset": 0, "size": 4},
        "lo": {"offset": 4, "size": 4},
    }
    assert [name for name, _ in abi.dsUint160_t._fields_] == [
        "top",
        "hi_hi",
        "hi_lo",
        "lo_hi",
        "lo_lo",
    ]
    assert abi.dsmApiVersionEx.unicode.size == 4  # dsmBool_t is an enum
    # dsmDeleteObj takes the union by value: the union's size, not delArch's.
    assert abi.PROTOTYPES["dsmDeleteObj"][1][2] is abi.dsmDelInfo
    assert abi.layout()["structs"]["dsmDelInfo"]["size"] == 24
    assert abi.PROTOTYPES["dsmGetObj"][0] is abi.dsInt16_t
    assert c.DSM_MAX_GET_OBJ == 4080
    assert c.DSM_RC_ABORT_EXCEED_MAX_MP in c.TRANSIENT_RCS
    assert c.DSM_RC_ABORT_NO_MATCH not in c.TRANSIENT_RCS
