"""Unit tests of every alert the platform ships, for Prometheus' own engine (`promtool test rules`).

`CASES` maps each alert to a function that, given the scope of the cluster whose rule file ships it and the thresholds
the render used (`observability.alerts`), returns promtool test groups: input series named and labelled as the real
exporters write them (DCGM exporter, Kueue, Envoy, envoyproxy/ratelimit, kube-state-metrics, CloudNativePG), each with
the `cluster` label the cluster's Prometheus gives its series, and the alerts expected at several times: silent while
healthy (or before its `for`), firing with the labels and annotations Alertmanager routes and shows, silent again after
recovery. tests/components/test_alert_engines.py runs them on the rule files of the stacks' renders; an alert the render
ships without a case here fails `test_every_shipped_alert_has_a_unit_test`.

Annotations are expected as the rule's own templates with `{{ $labels.X }}` taken from the expected labels (a template
that reads a label the expression drops fails here) and `{{ $value ... }}` from the case.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from components.config import AlertsConfig
from components.constants import GPU_RESOURCE
from components.monitors import MetricsScope

Group = dict[str, Any]


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    """One input series in promtool's notation (`a+bxN`, `_` no sample, `stale` a staleness marker)."""
    inner = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def humanize_duration(seconds: float) -> str:
    """Prometheus' `humanizeDuration` template function (template/template.go) for whole seconds >= 1."""
    whole = int(seconds)
    days, hours, minutes, secs = whole // 86400, whole // 3600 % 24, whole // 60 % 60, whole % 60
    if days:
        return f"{days}d {hours}h {minutes}m {secs}s"
    if hours:
        return f"{hours}h {minutes}m {secs}s"
    return f"{minutes}m {secs}s"


class Expect:
    """An expected alert: its labels from the expression, and what `$value` reads as in each template form."""

    def __init__(self, labels: dict[str, str], value: str, humanized: str = "", printf: str = "", si: str = ""):
        self.labels, self.value, self.humanized, self.printf, self.si = labels, value, humanized, printf, si


def expand(template: str, labels: dict[str, str], expect: Expect) -> str:
    def one(match: re.Match[str]) -> str:
        body = match.group(1).strip()
        if body.startswith("$labels."):
            return labels[body.removeprefix("$labels.")]
        if body == "$value":
            return expect.value
        if body == "$value | humanizeDuration":
            return expect.humanized
        if body == '$value | printf "%.1f"':
            return expect.printf
        if body == "$value | humanize":
            return expect.si
        raise ValueError(f"template {body!r}: not expanded by the cases (add it to alert_cases.expand)")
    return re.sub(r"{{(.*?)}}", one, template)


def expected(rule: dict[str, Any], expect: Expect) -> dict[str, Any]:
    """The alert promtool should report: the expression's labels with the rule's, and the expanded annotations."""
    labels = {**expect.labels, **rule.get("labels", {})}
    return {"exp_labels": labels,
            "exp_annotations": {key: expand(text, labels, expect) for key, text in rule["annotations"].items()}}


class Case:
    """One promtool test group for an alert: input series and, per evaluation time, the alerts expected (none: silent)."""

    def __init__(self, series_: list[dict[str, str]], at: dict[str, list[Expect]], also_silent: tuple[str, ...] = ()):
        self.series, self.at, self.also_silent = series_, at, also_silent

    def group(self, alert: str, rule: dict[str, Any]) -> Group:
        tests = [{"eval_time": time, "alertname": alert, "exp_alerts": [expected(rule, e) for e in alerts]}
                 for time, alerts in self.at.items()]
        # Another alert that must stay silent on these series at every time (the other XID rule).
        tests += [{"eval_time": time, "alertname": other, "exp_alerts": []} for other in self.also_silent for time in self.at]
        return {"interval": INTERVALS.get(alert, "1m"), "input_series": self.series, "alert_rule_test": tests}


CaseBuilder = Callable[[MetricsScope, AlertsConfig], list[Case]]


def minutes(n: int) -> str:
    return f"{n}m"


# --- GPUs: dcgm-exporter (GPU Operator), default counters; target labels of the GPU Operator's ServiceMonitor.

def _dcgm(scope: MetricsScope, node: str, gpu: int, **more: str) -> dict[str, str]:
    return {"cluster": scope.name, "Hostname": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu:04d}",
            "device": f"nvidia{gpu}", "modelName": "NVIDIA H100 80GB HBM3", "pci_bus_id": f"00000000:{gpu + 0x18:02X}:00.0",
            "DCGM_FI_DRIVER_VERSION": "570.172.08", "instance": f"10.0.0.{gpu + 10}:9400", "job": "nvidia-dcgm-exporter",
            "namespace": "gpu-operator", "pod": f"nvidia-dcgm-exporter-{node}", "service": "nvidia-dcgm-exporter",
            "endpoint": "gpu-metrics", **more}


def _xid_case(scope: MetricsScope, code: int, other: str) -> list[Case]:
    node = next(iter(scope.gpu_nodes))
    # The pod using the GPU, as DCGM labels it, arrives as exported_* (the exporter's own pod holds namespace/pod).
    gpu = _dcgm(scope, node, 1, exported_namespace="team-a", exported_pod="train-0", exported_container="trainer")
    fired = Expect({"cluster": scope.name, "Hostname": node, "gpu": "1", "UUID": gpu["UUID"]}, str(code))
    return [Case(
        # XID 0 until minute 10, then DCGM holds the XID for good (it never resets).
        [series("DCGM_FI_DEV_XID_ERRORS", gpu, f"0x10 {code}x40"),
         series("DCGM_FI_DEV_XID_ERRORS", _dcgm(scope, node, 2), "0x50")],
        {"5m": [], "15m": [fired], "25m": []},
        also_silent=(other,),
    )]


def xid_hardware(scope: MetricsScope, _: AlertsConfig) -> list[Case]:
    return _xid_case(scope, 79, "FabGpuXidError")


def xid_error(scope: MetricsScope, _: AlertsConfig) -> list[Case]:
    return _xid_case(scope, 13, "FabGpuXidHardware")


def gpus_lost(scope: MetricsScope, _: AlertsConfig) -> list[Case]:
    nodes = list(scope.gpu_nodes.items())
    first, count = nodes[0]
    temps = []
    for node, gpus in nodes:
        for gpu in range(gpus):
            # Two GPUs of the first node fall off the bus at minute 5 and are back at minute 30.
            lost = node == first and gpu >= count - 2
            temps.append(series("DCGM_FI_DEV_GPU_TEMP", _dcgm(scope, node, gpu), "40x5 stale _x23 40x30" if lost else "40x60"))
    # Under MIG DCGM reports each instance with its GPU's UUID: still one GPU.
    temps.append(series("DCGM_FI_DEV_GPU_TEMP", _dcgm(scope, first, 0, GPU_I_ID="1", GPU_I_PROFILE="1g.10gb"), "40x60"))
    silent_nodes = [series("DCGM_FI_DEV_GPU_TEMP", _dcgm(scope, "not-in-config", 0), "40x60")]
    every_node_gone = Case(silent_nodes, {
        "5m": [],
        "15m": [Expect({"Hostname": node}, str(gpus)) for node, gpus in sorted(nodes)],
    })
    return [
        Case(temps, {"3m": [], "12m": [], "20m": [Expect({"Hostname": first}, "2")], "45m": []}),
        # No DCGM series of any configured node (the exporter or the nodes are gone): each is missing all its GPUs.
        every_node_gone,
    ]


# --- InfiniBand: node-exporter's infiniband collector (the kube-prometheus-stack chart's node-exporter).

def infiniband_port_congested(scope: MetricsScope, alerts: AlertsConfig) -> list[Case]:
    ticks = alerts.infiniband_xmit_wait_per_second
    node = next(iter(scope.gpu_nodes))

    def port(device: str) -> dict[str, str]:
        return {"cluster": scope.name, "instance": f"{node}:9100", "device": device, "port": "1", "job": "node-exporter",
                "namespace": "monitoring", "pod": f"metrics-prometheus-node-exporter-{node}", "container": "node-exporter",
                "service": "metrics-prometheus-node-exporter", "endpoint": "http-metrics"}

    # mlx5_0: a quiet port (a tenth of the threshold) until minute 10, then twice the threshold until minute 40, then
    # quiet again; mlx5_1 stays just under the threshold throughout.
    quiet, busy = ticks * 6, ticks * 120
    congested = quiet * 10 + busy * 30
    values = f"0+{quiet}x10 {quiet * 10 + busy}+{busy}x29 {congested + quiet}+{quiet}x29"
    fired = Expect({"cluster": scope.name, "instance": f"{node}:9100", "device": "mlx5_0", "port": "1"}, str(ticks * 2),
                   si=humanize(ticks * 2))
    return [Case([series("node_infiniband_port_transmit_wait_total", port("mlx5_0"), values),
                  series("node_infiniband_port_transmit_wait_total", port("mlx5_1"), f"0+{ticks * 60 - 60}x70")],
                 {"8m": [], "20m": [], "35m": [fired], "55m": []})]


def humanize(value: float) -> str:
    """Prometheus' `humanize` template function (template/template.go) for values >= 1: %.4g and an SI prefix."""
    prefixes = ["", "k", "M", "G", "T", "P", "E", "Z", "Y"]
    index = 0
    while value >= 1000 and index < len(prefixes) - 1:
        value, index = value / 1000, index + 1
    return f"{value:.4g}{prefixes[index]}"


# --- Queues: Kueue 0.19 (pkg/metrics); target labels of the program's ServiceMonitor.

def _kueue(scope: MetricsScope, queue: str, **more: str) -> dict[str, str]:
    return {"cluster": scope.name, "cluster_queue": queue, "instance": "10.0.1.5:8443", "job": "kueue-controller-manager-metrics-service",
            "namespace": "kueue-system", "pod": "kueue-controller-manager-0", "service": "kueue-controller-manager-metrics-service",
            "endpoint": "https", **more}


def queue_starved(scope: MetricsScope, alerts: AlertsConfig) -> list[Case]:
    window = alerts.queue_starvation_minutes
    start = window + 5
    # When the queue's workloads start waiting: its admission counters have a history of a whole window before.
    admitted = start + window + 10
    first = start + window // 2
    steps = first + window + 10
    starved = Expect({"cluster": scope.name, "cluster_queue": "team-a"}, "3")

    def counter(queue: str, values: str, priority: str = "") -> dict[str, str]:
        return series("kueue_admitted_workloads_total", _kueue(scope, queue, priority_class=priority, replica_role="standalone"),
                      values)

    def pending(queue: str, status: str, count: int) -> dict[str, str]:
        return series("kueue_pending_workloads", _kueue(scope, queue, status=status), f"_x{start} {count}x{steps - start}")

    # One test group (promtool evaluates every rule at every minute of a group: each group costs), one queue per story.
    return [Case([
        # team-a: 3 workloads wait from `start` on and none is admitted: silent for the window, then it fires; one
        # admission (priority class `high`: 5 -> 6) clears it.
        pending("team-a", "active", 2), pending("team-a", "inadmissible", 1),
        counter("team-a", f"5x{admitted - 1} 6x{steps - admitted}", "high"), counter("team-a", f"7x{steps}", "low"),
        # team-b: workloads waiting and admitted all along (one a minute): never starved.
        pending("team-b", "active", 4), counter("team-b", f"0+1x{steps}"),
        # team-c: its first admission creates its counter's series (at 1), which increase() does not see: not starved.
        pending("team-c", "active", 1), counter("team-c", f"_x{first} 1x{steps - first}"),
        # team-d: nothing waiting.
        pending("team-d", "active", 0), counter("team-d", f"3x{steps}"),
    ], {minutes(start + 1): [], minutes(start + window // 2): [], minutes(start + window - 5): [],
        minutes(start + window + 5): [starved], minutes(admitted + 2): [], minutes(first + window + 5): []})]


def quota_exhausted(scope: MetricsScope, _: AlertsConfig) -> list[Case]:
    def quota(metric: str, queue: str, values: str, flavor: str = "h100") -> dict[str, str]:
        return series(metric, _kueue(scope, queue, cohort="gpus", flavor=flavor, resource=GPU_RESOURCE), values)

    full = Expect({"cluster": scope.name, "cluster_queue": "team-a"}, "8")
    return [Case([
        # team-a uses its 8 GPUs (6 + 2 over two flavors) with 2 workloads waiting until minute 45.
        quota("kueue_cluster_queue_resource_usage", "team-a", "6x60"),
        quota("kueue_cluster_queue_resource_usage", "team-a", "2x60", flavor="a100"),
        quota("kueue_cluster_queue_nominal_quota", "team-a", "6x60"),
        quota("kueue_cluster_queue_nominal_quota", "team-a", "2x60", flavor="a100"),
        series("kueue_cluster_queue_resource_usage", _kueue(scope, "team-a", cohort="gpus", flavor="h100", resource="cpu"), "1x60"),
        series("kueue_cluster_queue_nominal_quota", _kueue(scope, "team-a", cohort="gpus", flavor="h100", resource="cpu"), "0x60"),
        series("kueue_pending_workloads", _kueue(scope, "team-a", status="inadmissible"), "2x45 0x15"),
        # team-b uses half its quota with work waiting: not exhausted; team-c has no GPU quota at all.
        quota("kueue_cluster_queue_resource_usage", "team-b", "4x60"),
        quota("kueue_cluster_queue_nominal_quota", "team-b", "8x60"),
        series("kueue_pending_workloads", _kueue(scope, "team-b", status="active"), "3x60"),
        quota("kueue_cluster_queue_resource_usage", "team-c", "0x60"),
        quota("kueue_cluster_queue_nominal_quota", "team-c", "0x60"),
        series("kueue_pending_workloads", _kueue(scope, "team-c", status="inadmissible"), "1x60"),
    ], {"10m": [], "40m": [full], "50m": []})]


# --- Gateways: Envoy Gateway's proxies (/stats/prometheus), `gateway` from the pod's owning-Gateway label.

def _envoy(scope: MetricsScope, gateway: str, **more: str) -> dict[str, str]:
    return {"cluster": scope.name, "gateway": gateway, "instance": "10.0.2.7:19001", "job": "envoy-gateway-system/envoy-proxies",
            "namespace": "envoy-gateway-system", "pod": f"envoy-{gateway}-5d8f7", "container": "envoy", **more}


def gateway_5xx(scope: MetricsScope, _: AlertsConfig) -> list[Case]:
    gateway = scope.gateways[0]
    traffic = "https-443"
    # Minutes 0-10: 60 requests a minute, all 2xx; 10-40: three in four 5xx; then healthy again. The stats listener's own
    # requests (eg-stats-http, Prometheus scraping) never count.
    ok, bad = "0+60x10 615+15x29 1110+60x29", "0x10 45+45x29 1350x29"
    series_ = [
        series("envoy_http_downstream_rq_xx", _envoy(scope, gateway, envoy_http_conn_manager_prefix=traffic,
                                                     envoy_response_code_class="2"), ok),
        series("envoy_http_downstream_rq_xx", _envoy(scope, gateway, envoy_http_conn_manager_prefix=traffic,
                                                     envoy_response_code_class="5"), bad),
        series("envoy_http_downstream_rq_total", _envoy(scope, gateway, envoy_http_conn_manager_prefix=traffic),
               "0+60x70"),
        series("envoy_http_downstream_rq_xx", _envoy(scope, gateway, envoy_http_conn_manager_prefix="eg-stats-http",
                                                     envoy_response_code_class="2"), "0+1000x70"),
        series("envoy_http_downstream_rq_total", _envoy(scope, gateway, envoy_http_conn_manager_prefix="eg-stats-http"),
               "0+1000x70"),
    ]
    # 75% exactly: both rates come from samples at the same instants, so the ratio is 225/300.
    share = Expect({"cluster": scope.name, "gateway": gateway}, "75", printf="75.0")
    return [Case(series_, {"8m": [], "13m": [], "30m": [share], "60m": []})]


def certificate_expiring(scope: MetricsScope, alerts: AlertsConfig) -> list[Case]:
    gateway = scope.gateways[0]
    days = alerts.certificate_expiry_days
    soon = days - 1
    # Two proxy pods of the gateway; one serves a certificate expiring in `soon` days until it is renewed at minute 20.
    return [Case([
        series("envoy_server_days_until_first_cert_expiring", _envoy(scope, gateway), f"{days + 30}x40"),
        series("envoy_server_days_until_first_cert_expiring", {**_envoy(scope, gateway), "pod": f"envoy-{gateway}-9c2e1"},
               f"{days + 1}x5 {soon}x15 {days + 40}x20"),
    ], {"3m": [], "10m": [Expect({"cluster": scope.name, "gateway": gateway}, str(soon))], "30m": []})]


def rate_limit_saturated(scope: MetricsScope, _: AlertsConfig) -> list[Case]:
    labels = {"cluster": scope.name, "domain": "default/llm/ratelimit", "key1": "team-a", "key2": "llama",
              "instance": "10.0.3.4:19001", "job": "envoy-gateway-system/envoy-ratelimit", "namespace": "envoy-gateway-system",
              "pod": "envoy-ratelimit-6b9d4"}
    near = Expect({key: labels[key] for key in ("cluster", "domain", "key1", "key2")}, "")
    # Hits near the limit from minute 10 to 20 (the counter grows), none before or after.
    return [Case([series("ratelimit_service_rate_limit_near_limit", labels, "0x10 0+5x10 50x30")],
                 {"8m": [], "15m": [near], "40m": []})]


# --- Storage: kube-state-metrics (the chart's), CloudNativePG's instance exporter (`pg_cluster` from the pod label).

def _ksm(scope: MetricsScope, **more: str) -> dict[str, str]:
    return {"cluster": scope.name, "namespace": "fab-replication", "cronjob": "replicate-site-b", "instance": "10.0.4.2:8080",
            "job": "kube-state-metrics", "service": "metrics-kube-state-metrics", "endpoint": "http", **more}


def replication_lag(scope: MetricsScope, alerts: AlertsConfig) -> list[Case]:
    limit = alerts.replication_lag_minutes
    late = limit + 10
    # Timestamps are seconds since the epoch; promtool's evaluations start at 0.
    lag = Expect({"cluster": scope.name, "namespace": "fab-replication", "cronjob": "replicate-site-b"}, str(late * 60),
                 humanized=humanize_duration(late * 60))
    total = late + 30
    return [
        # Created at 0, last success at 0 until the copy succeeds again at minute `late` + 5.
        Case([series("kube_cronjob_created", _ksm(scope), f"0x{total}"),
              series("kube_cronjob_status_last_successful_time", _ksm(scope), f"0x{late + 5} {(late + 5) * 60}x{total - late - 5}")],
             {minutes(limit - 1): [], minutes(late): [lag], minutes(late + 10): []}),
        # Never succeeded: its age counts from its creation.
        Case([series("kube_cronjob_created", _ksm(scope), f"0x{total}")], {minutes(limit - 1): [], minutes(late): [lag]}),
    ]


def backup_too_old(scope: MetricsScope, alerts: AlertsConfig) -> list[Case]:
    from components.polaris import POLARIS_DB

    hours = alerts.backup_age_hours
    labels = {"cluster": scope.name, "namespace": scope.polaris_namespace, "pg_cluster": POLARIS_DB,
              "pod": f"{POLARIS_DB}-1", "instance": "10.0.5.3:9187", "job": f"{scope.polaris_namespace}/{POLARIS_DB}",
              "container": "postgres"}
    late = hours * 60 + 30
    old = Expect({key: labels[key] for key in ("cluster", "namespace", "pg_cluster")}, str(late * 60),
                 humanized=humanize_duration(late * 60))
    # A backup at 0, the next one at minute `late` + 10; samples and evaluations every 10 minutes (INTERVALS).
    values = f"0x{late // 10} {(late + 10) * 60}x3"
    return [Case([series("cnpg_collector_last_available_backup_timestamp", labels, values)],
                 {minutes(hours * 60 - 10): [], minutes(late): [old], minutes(late + 20): []})]


CASES: dict[str, CaseBuilder] = {
    "FabGpuXidHardware": xid_hardware,
    "FabGpuXidError": xid_error,
    "FabGpusLost": gpus_lost,
    "FabInfinibandPortCongested": infiniband_port_congested,
    "FabQueueStarved": queue_starved,
    "FabQuotaExhausted": quota_exhausted,
    "FabGateway5xx": gateway_5xx,
    "FabCertificateExpiring": certificate_expiring,
    "FabRateLimitSaturated": rate_limit_saturated,
    "FabReplicationLag": replication_lag,
    "FabPostgresBackupTooOld": backup_too_old,
}
"""Every alert the platform ships, and its unit tests."""

INTERVALS = {"FabPostgresBackupTooOld": "10m"}
"""Sample and evaluation intervals other than a minute: a backup's age is counted in hours, and promtool evaluates every
rule of the file at every interval up to the last evaluation time."""
