"""Metrics, dashboards and alerts of the site (roadmap phase 04, "performance metrics verified"): a Prometheus on every
cluster, their series brought together in one store, one Grafana on compute, and alert thresholds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.fields import Address, Flag, HttpsUrl, _Model


class RemoteWriteConfig(_Model):
    """The site's own metrics store (Prometheus, Thanos Receive, Mimir) that every cluster's Prometheus writes to."""

    url: HttpsUrl = Field(description="Its remote-write (push) endpoint, for example https://mimir.site-a.fab.internal/api/v1/push.")
    query_url: HttpsUrl = Field(
        description="Its Prometheus-compatible query endpoint, Grafana's data source, for example "
        "https://mimir.site-a.fab.internal/prometheus.",
    )
    username: str | None = Field(
        None, min_length=1, max_length=255,
        description="User for basic authentication on both endpoints, with the secret `metricsRemoteWritePassword`. "
        "Defaults to none (the store authenticates by network).",
    )


class AlertsConfig(_Model):
    """Thresholds of the alert rules (PrometheusRule) the platform ships; where alerts go is the secret `alertWebhookUrl`."""
    queue_starvation_minutes: int = Field(
        60, ge=5, le=1440, strict=True,
        description="A ClusterQueue with pending workloads and none admitted for this long alerts. Defaults to 60.",
    )
    gateway_5xx_percent: float = Field(
        5.0, gt=0, le=50, strict=True,
        description="Share of the gateway's responses that are 5xx, over 5 minutes, above which it alerts. Defaults to 5.",
    )
    rate_limit_saturation_percent: int = Field(
        90, ge=50, le=100, strict=True,
        description="A team using this share of its requests per minute alerts (it is about to be limited). Defaults to 90.",
    )
    certificate_expiry_days: int = Field(
        21, ge=1, le=90, strict=True,
        description="A serving certificate (gateway, ingress) expiring within this many days alerts. Defaults to 21.",
    )
    replication_lag_minutes: int = Field(
        30, ge=1, le=1440, strict=True,
        description="Bucket replication to another site behind by this long alerts. Defaults to 30.",
    )
    backup_age_hours: int = Field(
        26, ge=1, le=168, strict=True,
        description="The Polaris Postgres cluster's newest backup older than this alerts (a daily schedule plus margin). "
        "Defaults to 26.",
    )
    infiniband_xmit_wait_per_second: int = Field(
        50_000_000, ge=1, le=10_000_000_000, strict=True,
        description="PortXmitWait ticks per second of an HCA port (node-exporter's infiniband collector, the dashboard's "
        "InfiniBand port congestion), over 5 minutes and for 15, above which it alerts. A tick is the hardware's "
        "(`perfquery -c` shows it; 8 bytes' time on NVIDIA's current ones, so 6.25e9 ticks a second is a 400 Gb/s port "
        "that sends nothing): set it from the port's quiet baseline. Defaults to 50000000 (under 1 % of a 400 Gb/s port).",
    )


class ObservabilityConfig(_Model):
    """Prometheus (operator, node and state exporters, Alertmanager) on every cluster; one Grafana on compute."""

    metrics: Literal["in-cluster", "remote-write"] = Field(
        "in-cluster",
        description="Where the site's series are kept. `in-cluster`: the compute cluster's Prometheus receives every "
        "other cluster's series (over the flow `metrics`, to `receiver_vip`). `remote-write`: every cluster's Prometheus "
        "writes to the site's own store (`remote_write`). Defaults to in-cluster.",
    )
    retention_days: int = Field(
        15, ge=1, le=365, strict=True,
        description="How long each cluster's Prometheus keeps series (the compute one keeps the site's while metrics is "
        "in-cluster). Defaults to 15.",
    )
    storage_gib: int = Field(
        50, ge=10, le=10_000, strict=True,
        description="Volume of each cluster's Prometheus (kept when the stack is destroyed). Defaults to 50.",
    )
    receiver_vip: Address | None = Field(
        None,
        description="While metrics is in-cluster: the compute Prometheus's address for the other clusters, from one of "
        "compute's internal LB-IPAM pools. Required then.",
    )
    remote_write: RemoteWriteConfig | None = Field(
        None, description="The site's metrics store. Required while metrics is remote-write.",
    )
    grafana: Flag = Field(
        True,
        description="Grafana on the compute cluster, behind its ingress and the site's sign-in, with the platform's "
        "dashboards. Defaults to true.",
    )
    alerts: AlertsConfig = Field(
        default_factory=AlertsConfig,
        description="Alert thresholds (the receiver is the secret config `alertWebhookUrl`).",
    )
