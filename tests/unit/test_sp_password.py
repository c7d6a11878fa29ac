"""sp.password_file: read only when no one but its owner may read or write it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tssd.backends.sp.sessions import sign_on_of
from tssd.config import SpSettings
from tssd.errors import ConfigError

pytestmark = pytest.mark.sp


def test_a_private_password_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text("s3cret\nignored\n")
    path.chmod(0o600)
    who = sign_on_of(SpSettings(node="TSSD", password_file=str(path)))
    assert (who.node, who.password) == ("TSSD", "s3cret")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_a_password_file_open_to_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "pw"
    path.write_text("s3cret\n")
    path.chmod(mode)
    with pytest.raises(ConfigError, match="chmod 0600"):
        sign_on_of(SpSettings(password_file=str(path)))


def test_a_symlink_or_empty_password_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "pw"
    target.write_text("s3cret\n")
    target.chmod(0o600)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(ConfigError, match="cannot read"):
        sign_on_of(SpSettings(password_file=str(tmp_path / "link")))
    target.write_text("\n")
    with pytest.raises(ConfigError, match="no password"):
        sign_on_of(SpSettings(password_file=str(target)))
