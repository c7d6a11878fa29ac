"""The stand-in server's settings: timings from a `tssd simulate` profile, scaled, and the
server.conf / dsm.opt pair that `python -m tssd.backends.sp.standin server` writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tssd.backends.sp.standin import ServerSettings, read_settings, volume_name
from tssd.tape.geometry import get_profile

pytestmark = pytest.mark.sp


def test_timings_come_from_the_profile_times_the_scale() -> None:
    lto9 = get_profile("lto9")
    settings = ServerSettings.from_profile("lto9", 0.5, max_mount_points=3)
    assert settings.mount_s == pytest.approx((lto9.robot_s + lto9.load_s) * 0.5)
    assert settings.locate_full_s == pytest.approx(lto9.locate_full_s * 0.5)
    assert settings.per_file_s == pytest.approx(lto9.per_file_s * 0.5)
    assert settings.max_mount_points == 3
    assert volume_name(settings, 7) == "SP0007L9"


def test_the_command_writes_the_options_file_and_the_settings(tmp_path: Path) -> None:
    server = tmp_path / "srv"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tssd.backends.sp.standin",
            "server",
            str(server),
            "--profile",
            "lto8",
            "--scale",
            "0.001",
            "--max-mount-points",
            "4",
            "--transient-rate",
            "0.25",
            "--transient-codes",
            "12,41",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    options = Path(out.stdout.strip())
    assert options.read_text() == f"SERVERDIR {server.resolve()}\n"
    settings = read_settings(server)
    assert settings == ServerSettings.from_profile(
        "lto8", 0.001, max_mount_points=4, transient_rate=0.25, transient_codes=(12, 41)
    )
