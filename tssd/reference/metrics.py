"""docs/reference/metrics.md: every metric tssd exports, from its registry."""

from __future__ import annotations

from prometheus_client.metrics import MetricWrapperBase

from tssd.metrics import Metrics
from tssd.reference.table import table


def _metrics() -> list[MetricWrapperBase]:
    found = [m for m in vars(Metrics()).values() if isinstance(m, MetricWrapperBase)]
    return sorted(found, key=lambda m: m._name)


def _exported(metric: MetricWrapperBase) -> str:
    name = str(metric._name)
    return name + ("_total" if metric._type == "counter" else "")


def render() -> str:
    rows = [
        (
            f"`{_exported(m)}`",
            m._type,
            ", ".join(f"`{label}`" for label in m._labelnames),
            m._documentation,
        )
        for m in _metrics()
    ]
    return (
        "# Metrics\n\n"
        "Every metric of `GET /metrics` (on the API and on the metrics listener, "
        "`api.metrics_tcp`), in Prometheus' text format. Histograms also export "
        "`_bucket`, `_sum` and `_count` series; counters are exported with `_total`. How to "
        'alert on them: docs/operations.md, "Metrics", and `deploy/prometheus/`.\n\n'
        + table(("metric", "type", "labels", "meaning"), rows)
    )
