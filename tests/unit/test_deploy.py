"""The deploy kit: the systemd unit, the sample configuration, the dCache pool lines."""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tssd.config import Settings, load_settings, sample_toml
from tssd.config.render import SAMPLE_PRODUCTION
from tssd.shim.args import parse_args

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BIN = Path(sys.executable).parent
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "CapabilityBoundingSet": "",
    "RestrictSUIDSGID": "yes",
    "SystemCallFilter": "@system-service",
    "ProtectKernelTunables": "yes",
    "ProtectControlGroups": "yes",
    "RestrictNamespaces": "yes",
}


def unit_settings() -> dict[str, str]:
    text = (DEPLOY / "tssd.service").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and line[0] != "#")


def test_unit_is_hardened() -> None:
    settings = unit_settings()
    assert {key: settings.get(key) for key in HARDENING} == HARDENING


def installed_unit(tmp_path: Path) -> Path:
    # The unit names /opt/tssd; verify needs an executable there, so point it at this one.
    text = (DEPLOY / "tssd.service").read_text()
    text = text.replace("ExecStart=/opt/tssd/bin/tssd", f"ExecStart={BIN / 'tssd'}")
    unit = tmp_path / "tssd.service"
    unit.write_text(text)
    return unit


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_systemd_analyze_verify_is_clean(tmp_path: Path) -> None:
    result = subprocess.run(
        ["systemd-analyze", "verify", str(installed_unit(tmp_path))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_systemd_security_exposure_is_low(tmp_path: Path) -> None:
    result = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(installed_unit(tmp_path))],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Overall exposure level for tssd.service: (\d+\.\d+)", result.stdout)
    assert found, result.stdout + result.stderr
    # 0 = fully locked down, 10 = unprotected; systemd calls below 2.0 "OK".
    assert float(found.group(1)) < 2.0


def test_sample_config_is_sp_while_the_embedded_default_is_the_sim_demo(tmp_path: Path) -> None:
    settings, _ = load_settings(DEPLOY / "tssd.toml", environ={})
    assert settings.backend.type == "sp"
    assert Settings().backend.type == "sim"


def test_sample_config_is_the_generated_one() -> None:
    current = (DEPLOY / "tssd.toml").read_text()
    assert current == sample_toml(), "regenerate: tssd config --sample > deploy/tssd.toml"


def production_defaults() -> Settings:
    """The embedded defaults with the sample's production settings (SAMPLE_PRODUCTION)."""
    defaults = Settings()
    return dataclasses.replace(defaults, backend=dataclasses.replace(defaults.backend, type="sp"))


def test_sample_config_documents_every_setting_at_its_default(tmp_path: Path) -> None:
    text = (DEPLOY / "tssd.toml").read_text()
    commented = set(re.findall(r"^# ([a-z_]+) = ", text, re.MULTILINE))
    _, origin = load_settings(None, environ={})
    production = {key.rpartition(".")[2] for key in SAMPLE_PRODUCTION}
    assert {key.rpartition(".")[2] for key in origin} <= commented | production
    # Uncommenting nothing changes nothing but the production settings.
    config = tmp_path / "tssd.toml"
    config.write_text(text)
    settings, origin = load_settings(config, environ={})
    assert settings == production_defaults()
    assert {k for k, v in origin.items() if v == "file"} == set(SAMPLE_PRODUCTION)
    uncommented = re.sub(r"^# ([a-z_]+ = )", r"\1", text, flags=re.MULTILINE)
    config.write_text(uncommented)
    settings, origin = load_settings(config, environ={})
    assert settings == production_defaults()
    assert set(origin.values()) == {"file"}


def test_tssd_config_sample_prints_it() -> None:
    result = subprocess.run(
        [str(BIN / "tssd"), "config", "--sample"], capture_output=True, text=True, check=True
    )
    assert result.stdout == sample_toml()


def pool_lines() -> list[list[str]]:
    lines = (DEPLOY / "dcache-pool.conf").read_text().splitlines()
    return [shlex.split(line.lstrip("#")) for line in lines if "hsm create" in line]


@pytest.mark.parametrize("mode", ["poll", "block"])
def test_pool_setup_lines_give_the_script_what_it_understands(mode: str) -> None:
    [words] = [w for w in pool_lines() if f"-mode={mode}" in w]
    assert words[:5] == ["hsm", "create", "osm", "osm", "script"]
    options = dict(w[1:].split("=", 1) for w in words[5:])
    assert options["command"].endswith("/tss-hsm-fast")
    assert ("p:delay" in options) == (mode == "poll")
    assert int(options["c:gets"]) >= 200
    # dCache keeps command, c:* and p:* and passes the rest after the call's own arguments.
    passed = [w for w in words[5:] if not w.startswith(("-command=", "-c:", "-p:"))]
    call = parse_args(["remove", "-uri=osm://osm/?store=s&group=g&bfid=b1", *passed])
    assert (call.options.mode, call.options.tssd) == (mode, "/run/tssd/tssd.sock")
    assert call.options.hsm_instance == words[3]


# -- dCache admin syntax of deploy/dcache-pool.conf ---------------------------------------
# Shapes read in dCache's source: modules/dcache/src/main/java/org/dcache/pool/nearline/
# HsmSet.java ("hsm create": type, then optional instance and provider, then any options;
# "hsm set" / "hsm unset": exactly one argument, the instance), NearlineStorageHandler.java
# ("rh|st|rm set timeout <seconds>", a long; "rh|st|rm unset timeout"), ScriptNearlineStorage
# .java (command required; c:puts, c:gets, c:removes, p:delay parsed as integers) and
# ScriptNearlineStorageProvider.java ("script"); neicnordic/dcache-endit-provider
# src/main/java/org/ndgf/endit/ (providers "endit", "endit-polling", "endit-watching";
# AbstractEnditNearlineStorage: -directory=; PollingEnditNearlineStorage: -threads=,
# -period= integers). Flush queues: StorageClassContainer.java ("queue define class": the
# HSM and the storage class, then -expire=<seconds>, -pending=<files>, -total=<bytes>,
# -open) and HsmFlushController.java ("flush set max active|interval|retry delay" <int>).

ADMIN_VERBS = ("hsm create ", "hsm set ", "hsm unset ", "rh ", "st ", "rm ", "save",
               "queue define class ", "flush set ")  # fmt: skip
FLUSH_SETTINGS = (["max", "active"], ["interval"], ["retry", "delay"])
PROVIDERS = {"script", "endit", "endit-polling", "endit-watching"}
INTEGER_OPTIONS = {
    "script": ("c:puts", "c:gets", "c:removes", "p:delay"),
    "endit-polling": ("threads", "period"),
}


def admin_lines() -> list[list[str]]:
    """Every admin command of the file, commented-out alternatives included."""
    found = []
    for line in (DEPLOY / "dcache-pool.conf").read_text().splitlines():
        command = line.lstrip("#").strip()
        if command == "save" or command.startswith(ADMIN_VERBS):
            found.append(shlex.split(command))
    return found


def split_admin(words: list[str]) -> tuple[list[str], dict[str, str]]:
    """dCache's Args: ``-key=value`` / ``-key`` options, the rest positional."""
    positional = [w for w in words if not w.startswith("-")]
    options = {}
    for word in (w for w in words if w.startswith("-")):
        key, _, value = word[1:].partition("=")
        options[key] = value
    return positional, options


def test_pool_setup_commands_have_dcache_admin_shapes() -> None:
    lines = admin_lines()
    assert lines[-1] == ["save"]
    instances: dict[str, str] = {}
    for words in lines:
        positional, options = split_admin(words)
        if words[:2] == ["hsm", "create"]:
            # The poll and block lines are alternatives of one instance.
            assert len(positional) == 5, words
            _, _, hsm_type, instance, provider = positional
            assert hsm_type == "osm"
            assert provider in PROVIDERS, words
            assert instances.get(instance, provider) == provider
            instances[instance] = provider
            for key in INTEGER_OPTIONS.get(provider, ()):
                if key in options:
                    assert options[key].isdigit(), (key, words)
            if provider == "script":
                assert options["command"].startswith("/")
            else:
                assert Path(options["directory"]).is_absolute()
        elif words[:2] in (["hsm", "set"], ["hsm", "unset"]):
            # One positional argument: the instance, which a create line made.
            assert len(positional) == 3 and positional[2] in instances, words
            assert options, words
        elif words[0] in ("rh", "st", "rm"):
            assert words[1:3] in (["set", "timeout"], ["unset", "timeout"]), words
            rest = words[3:]
            assert (
                (rest and rest[0].isdigit() and len(rest) == 1) if words[1] == "set" else not rest
            )
        elif words[:3] == ["queue", "define", "class"]:
            assert len(positional) == 5 and positional[3] == "osm", words
            assert set(options) <= {"expire", "pending", "total", "open"}, words
            assert all(options[k].isdigit() for k in options if k != "open"), words
            assert options.get("open", "") in ("", "true", "false"), words
        elif words[:2] == ["flush", "set"]:
            assert words[2:-1] in FLUSH_SETTINGS and words[-1].isdigit(), words
        else:
            assert words == ["save"]
    assert set(instances.values()) == {"script", "endit-polling"}
    # Flushes are handed over in batches, joining a running flush (docs/dcache.md).
    defined = [w for w in lines if w[:3] == ["queue", "define", "class"]]
    assert defined and all("-open" in w for w in defined)
    assert ["flush", "set", "max", "active"] in [w[:4] for w in lines]


def test_pool_timeouts_cover_a_tape_queue() -> None:
    """NearlineStorageHandler.getDeadline: activation plus the timeout, across every
    exit-72 re-call; a stage's timeout below a day would cancel recalls of a campaign."""
    for words in admin_lines():
        if words[0] in ("rh", "st") and words[1] == "set":
            assert int(words[3]) >= 86400, words


def test_endit_lines_match_an_endit_directory_setting() -> None:
    [words] = [w for w in admin_lines() if "endit-polling" in w]
    positional, options = split_admin(words)
    directory = {"path": options["directory"], "hsm_name": positional[3]}
    settings, _ = load_settings(None, environ={"TSSD_ENDIT_DIRECTORIES": json_toml([directory])})
    [configured] = settings.endit.directories
    assert (configured.path, configured.hsm_name) == (options["directory"], "pool1-endit")


def json_toml(tables: list[dict[str, str]]) -> str:
    inner = ", ".join("{" + ", ".join(f'{k} = "{v}"' for k, v in t.items()) + "}" for t in tables)
    return f"[{inner}]"


def test_unit_runs_as_the_pool_user() -> None:
    """dCache's file metadata store sets times on the replica, which needs its owner; ENDIT's
    ``startup/systemd/endit-retriever.service`` runs as ``User=dcache`` for the same reason."""
    settings = unit_settings()
    assert (settings["User"], settings["Group"]) == ("dcache", "dcache")
    assert "pool's user" in (DEPLOY / "tssd.service").read_text()


def test_docs_show_the_deploy_lines() -> None:
    """docs/dcache.md has the endit section, and its pool lines are the deploy file's."""
    docs = (DEPLOY.parent / "docs" / "dcache.md").read_text()
    assert "## The endit provider" in docs and "[[endit.directories]]" in docs
    for words in admin_lines():
        if words[:2] == ["hsm", "create"]:
            assert shlex.join(words) in docs, words
    assert "rh set timeout 600\n" not in docs


def test_the_docs_run_tssctl_as_the_units_user() -> None:
    """An operator who copies `sudo -u USER tssctl` from the docs gets the admin role only
    as the daemon's own user: the unit's User=."""
    user = unit_settings()["User"]
    docs = [DEPLOY.parent / "README.md", *sorted((DEPLOY.parent / "docs").glob("*.md"))]
    named = {m for path in docs for m in re.findall(r"sudo -u (\S+) tssctl", path.read_text())}
    assert named == {user}


def test_the_units_documentation_is_installed_with_tssd() -> None:
    """Every Documentation= file is a document of docs/ that the wheel installs there."""
    import tomllib

    project = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())
    shared = project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    prefix = Path(shlex.split(unit_settings()["ExecStart"])[0]).parents[1]
    links = unit_settings()["Documentation"].split()
    assert links
    for link in links:
        assert link.startswith(f"file://{prefix}/"), link
        installed = link.removeprefix(f"file://{prefix}/")
        [source] = [src for src, dest in shared.items() if dest == installed]
        assert (DEPLOY.parent / source).is_file(), source
