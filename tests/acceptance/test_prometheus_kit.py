"""The Prometheus kit (deploy/prometheus) and the Grafana dashboard (deploy/grafana):
promtool checks the exposition, the configuration and the rules, runs the rule unit
tests, and every metric the rules and the dashboard use is one tssd exports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.core import Metric

from tssd.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "tssd-dashboard.json"
METRIC_RE = re.compile(r"\btssd_[a-z0-9_]+")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        message = "promtool not installed (Debian package prometheus; .ci/run installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: the promtool checks must run)", pytrace=False)
        pytest.skip(message)
    return found


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [promtool(), *args],
        input=stdin,
        capture_output=True,
        cwd=PROMETHEUS,
        timeout=60,
        check=False,
    )


def populated() -> Metrics:
    """Metrics with a sample in every family, as after a short campaign."""
    m = Metrics()
    m.requests_total.labels("recall", "default", "done").inc()
    m.requests_pending.labels("recall", "default").set(3)
    m.request_duration.labels("recall", "default").observe(12.5)
    m.mounts_total.inc()
    for hist, value in ((m.mount_seconds, 42.0), (m.mount_session_seconds, 600.0),
                        (m.mount_files, 10), (m.mount_bytes, 1e10), (m.mount_efficiency, 0.6),
                        (m.locate_seconds, 20.0)):  # fmt: skip
        hist.observe(value)
    m.transfer_bytes_total.labels("recall").inc(1e10)
    m.backend_errors_total.labels("true").inc()
    m.backend_retries_total.inc()
    m.drives.labels("empty").set(2)
    m.queue_paused.labels("default").set(0)
    m.queue_oldest_seconds.labels("default").set(30)
    return m


def exported_names() -> set[str]:
    names: set[str] = set()
    family: Metric
    for family in Metrics().registry.collect():
        suffixes = {
            "counter": ("_total",),
            "histogram": ("_bucket", "_sum", "_count"),
            "gauge": ("",),
        }[family.type]
        names.update(family.name + s for s in suffixes)
    return names


def test_exposition_passes_promtool_check_metrics() -> None:
    result = run("check", "metrics", stdin=populated().exposition())
    assert result.returncode == 0, result.stdout + result.stderr


def test_contract_metrics_have_their_types() -> None:
    types = {f.name: f.type for f in Metrics().registry.collect()}
    histograms = ("tssd_request_duration_seconds", "tssd_mount_seconds",
                  "tssd_mount_session_seconds", "tssd_mount_files", "tssd_mount_bytes",
                  "tssd_mount_efficiency", "tssd_locate_seconds")  # fmt: skip
    counters = ("tssd_requests", "tssd_mounts", "tssd_transfer_bytes", "tssd_backend_errors",
                "tssd_backend_retries")  # fmt: skip
    assert all(types[h] == "histogram" for h in histograms)
    assert all(types[c] == "counter" for c in counters)
    assert types["tssd_requests_pending"] == types["tssd_drives"] == "gauge"
    assert all(f.documentation for f in Metrics().registry.collect())


def test_scrape_config_and_rules_pass_promtool() -> None:
    for args in (("check", "config", "prometheus.yml"), ("check", "rules", "tssd-alerts.yml")):
        result = run(*args)
        assert result.returncode == 0, result.stdout + result.stderr


def test_alert_rules_unit_tests() -> None:
    result = run("test", "rules", "tssd-alerts.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert b"SUCCESS" in result.stdout


def test_rules_use_only_exported_metrics() -> None:
    used = set(METRIC_RE.findall((PROMETHEUS / "tssd-alerts.yml").read_text()))
    assert used and used <= exported_names(), used - exported_names()


def test_dashboard_parses_and_uses_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    titles = " ".join(p["title"].lower() for p in dashboard["panels"])
    for topic in ("queue depth", "throughput", "mounts per hour", "mount time", "efficiency",
                  "errors", "drive states"):  # fmt: skip
        assert topic in titles
    used = {name for e in exprs for name in METRIC_RE.findall(e)}
    assert used <= exported_names(), used - exported_names()
    assert {"tssd_mounts_total", "tssd_mount_efficiency_sum", "tssd_drives"} <= used
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
