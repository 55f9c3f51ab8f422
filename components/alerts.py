"""Alert rules of the metrics stack (issue 19, "Alerts"): one PrometheusRule per cluster with the rules whose series
exist there, thresholds from `observability.alerts`, each linked to its runbook in docs/operations.md ("Alerts").

Pure builders: the metrics component registers the manifest on the cluster's Prometheus (kube-prometheus-stack, which
selects rules in any namespace). Series names are those of `components.monitors.METRICS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.constants import MONITORING_NAMESPACE
from components.monitors import MONITOR_LABELS, MONITORING_API, MetricsScope

if TYPE_CHECKING:
    from components.config.schema.observability import AlertsConfig

RULE_NAME = "fab-platform-alerts"
RUNBOOKS = "docs/operations.md"
"""The page of the runbooks; each rule links to its section (`runbook_url`), relative to the platform repository."""
GPU_RESOURCE = "nvidia.com/gpu"
ENVOY_OWN_LISTENERS = "eg-.*"
"""Stat prefixes of Envoy Gateway's own listeners on every proxy (eg-stats-http: the /stats endpoint Prometheus reads),
which are not the gateway's traffic."""
QUOTA_EXHAUSTED_FOR = "30m"
"""How long a team's queue sits at its GPU quota with work waiting before it alerts (not a config key: it is about
the quota's size, which the config sets, not about how fast to page)."""


def _rule(alert: str, expr: str, severity: str, summary: str, description: str, anchor: str, for_: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": alert, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description, "runbook_url": f"{RUNBOOKS}#{anchor}"}
    return rule


def expected_gpus(gpu_nodes: dict[str, int]) -> str:
    """A vector of the GPUs each node has per config, labelled like DCGM's series (`Hostname` is the node's name)."""
    return " or ".join(f'label_replace(vector({gpus}), "Hostname", "{node}", "", "")' for node, gpus in sorted(gpu_nodes.items()))


def gpu_rules(scope: MetricsScope) -> list[dict[str, Any]]:
    expected = expected_gpus(scope.gpu_nodes)
    # One series per physical GPU, also under MIG (DCGM reports instances with the same UUID).
    seen = "count by (Hostname) (count by (Hostname, UUID) (DCGM_FI_DEV_GPU_TEMP))"
    return [
        _rule(
            "FabGpuXidError",
            "max by (Hostname, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS) > 0",
            "critical",
            "GPU {{ $labels.gpu }} on node {{ $labels.Hostname }} reported XID {{ $value }}",
            f"DCGM on cluster {scope.site}-{scope.cluster} reports XID error {{{{ $value }}}} on GPU {{{{ $labels.gpu }}}} "
            "({{ $labels.UUID }}) of node {{ $labels.Hostname }}. Allowed: none.",
            "gpu-xid-errors",
        ),
        _rule(
            "FabGpusLost",
            f"({expected}) - on (Hostname) ({seen} or 0 * ({expected})) > 0",
            "critical",
            "Node {{ $labels.Hostname }} is missing {{ $value }} GPUs",
            f"Cluster {scope.site}-{scope.cluster}: DCGM sees {{{{ $value }}}} fewer GPUs on node {{{{ $labels.Hostname }}}} "
            "than the site config gives it (gpu.<cluster>.nodes.<node>.gpus).",
            "gpus-lost",
            for_="10m",
        ),
    ]


def queue_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    minutes = alerts.queue_starvation_minutes
    gpu = f'resource="{GPU_RESOURCE}"'
    return [
        _rule(
            "FabQueueStarved",
            f"min_over_time((sum by (cluster_queue) (kueue_pending_workloads))[{minutes}m:1m]) > 0 "
            f"unless on (cluster_queue) sum by (cluster_queue) (increase(kueue_admitted_workloads_total[{minutes}m])) > 0",
            "warning",
            "ClusterQueue {{ $labels.cluster_queue }} admitted nothing for " + f"{minutes} minutes",
            f"Cluster {scope.site}-{scope.cluster}: ClusterQueue {{{{ $labels.cluster_queue }}}} has had pending workloads "
            f"and admitted none for {minutes} minutes (observability.alerts.queue_starvation_minutes = {minutes}).",
            "queue-starvation",
        ),
        _rule(
            "FabQuotaExhausted",
            f"(sum by (cluster_queue) (kueue_cluster_queue_resource_usage{{{gpu}}}) "
            f">= sum by (cluster_queue) (kueue_cluster_queue_nominal_quota{{{gpu}}})) "
            f"and on (cluster_queue) (sum by (cluster_queue) (kueue_cluster_queue_nominal_quota{{{gpu}}}) > 0) "
            "and on (cluster_queue) (sum by (cluster_queue) (kueue_pending_workloads) > 0)",
            "warning",
            "ClusterQueue {{ $labels.cluster_queue }} uses all its GPU quota with work waiting",
            f"Cluster {scope.site}-{scope.cluster}: ClusterQueue {{{{ $labels.cluster_queue }}}} has used its whole nominal "
            f"{GPU_RESOURCE} quota for {QUOTA_EXHAUSTED_FOR} while workloads wait (training.quotas).",
            "quota-exhaustion",
            for_=QUOTA_EXHAUSTED_FOR,
        ),
    ]


def gateway_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    percent = f"{alerts.gateway_5xx_percent:g}"
    days = alerts.certificate_expiry_days
    traffic = f'envoy_http_conn_manager_prefix!~"{ENVOY_OWN_LISTENERS}"'
    return [
        _rule(
            "FabGateway5xx",
            f'100 * sum by (gateway) (rate(envoy_http_downstream_rq_xx{{envoy_response_code_class="5", {traffic}}}[5m])) '
            f"/ sum by (gateway) (rate(envoy_http_downstream_rq_total{{{traffic}}}[5m])) > {percent}",
            "critical",
            "Gateway {{ $labels.gateway }} answers {{ $value | printf \"%.1f\" }}% of requests with 5xx",
            f"Cluster {scope.site}-{scope.cluster}: gateway {{{{ $labels.gateway }}}} answered {{{{ $value }}}}% of its "
            f"requests with 5xx over 5 minutes; allowed: {percent}% (observability.alerts.gateway_5xx_percent).",
            "gateway-5xx",
            for_="5m",
        ),
        _rule(
            "FabCertificateExpiring",
            f"min by (gateway) (envoy_server_days_until_first_cert_expiring) < {days}",
            "warning",
            "A certificate of gateway {{ $labels.gateway }} expires in {{ $value }} days",
            f"Cluster {scope.site}-{scope.cluster}: the soonest-expiring certificate served by gateway {{{{ $labels.gateway }}}} "
            f"expires in {{{{ $value }}}} days; allowed: at least {days} (observability.alerts.certificate_expiry_days).",
            "certificate-expiry",
        ),
    ]


def rate_limit_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    percent = alerts.rate_limit_saturation_percent
    return [
        _rule(
            "FabRateLimitSaturated",
            "sum by (domain, key1, key2) (increase(ratelimit_service_rate_limit_near_limit[5m])) > 0",
            "warning",
            f"A team is above {percent}% of its requests per minute on route {{{{ $labels.domain }}}}",
            f"Cluster {scope.site}-{scope.cluster}: requests of a team to a model passed {percent}% of its rate "
            f"(inference.requests_per_minute {scope.requests_per_minute.get('*', '')}, inference.team_requests_per_minute) in "
            f"the last 5 minutes; the rate limit service counts them from NEAR_LIMIT_RATIO {percent / 100:g} "
            "(observability.alerts.rate_limit_saturation_percent).",
            "rate-limit-saturation",
        ),
    ]


def storage_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    from components.federation import REPLICATION_NAMESPACE
    from components.storage import POLARIS_DB

    rules = []
    if scope.replicates_to:
        minutes = alerts.replication_lag_minutes
        where = f'namespace="{REPLICATION_NAMESPACE}"'
        rules.append(_rule(
            "FabReplicationLag",
            f"time() - (max by (namespace, cronjob) (kube_cronjob_status_last_successful_time{{{where}}}) "
            f"or max by (namespace, cronjob) (kube_cronjob_created{{{where}}})) > {minutes * 60}",
            "warning",
            "Replication {{ $labels.cronjob }} has not completed for {{ $value | humanizeDuration }}",
            f"Cluster {scope.site}-{scope.cluster}: copy job {{{{ $labels.cronjob }}}} (to {', '.join(scope.replicates_to)}) last "
            f"succeeded {{{{ $value | humanizeDuration }}}} ago; allowed: {minutes} minutes (observability.alerts.replication_lag_minutes).",
            "replication-lag",
        ))
    if scope.polaris:
        hours = alerts.backup_age_hours
        rules.append(_rule(
            "FabPostgresBackupTooOld",
            f'time() - max by (namespace, pg_cluster) (cnpg_collector_last_available_backup_timestamp{{namespace="{scope.polaris_namespace}", '
            f'pg_cluster="{POLARIS_DB}"}}) > {hours * 3600}',
            "critical",
            "The newest backup of Postgres {{ $labels.pg_cluster }} is {{ $value | humanizeDuration }} old",
            f"Cluster {scope.site}-{scope.cluster}: the newest base backup of Postgres cluster {{{{ $labels.pg_cluster }}}} "
            f"(namespace {{{{ $labels.namespace }}}}) is {{{{ $value | humanizeDuration }}}} old; allowed: {hours} hours "
            "(observability.alerts.backup_age_hours).",
            "postgres-backup-age",
        ))
    return rules


def alert_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    """The cluster's PrometheusRule (none when nothing it alerts on runs there)."""
    groups = []

    def group(name: str, rules: list[dict[str, Any]]) -> None:
        if rules:
            groups.append({"name": f"fab-{name}", "rules": rules})

    if scope.gpu_nodes:
        group("gpu", gpu_rules(scope))
    if scope.kueue:
        group("queues", queue_rules(scope, alerts))
    if scope.gateways:
        group("gateways", gateway_rules(scope, alerts))
    if scope.global_rate_limits:
        group("rate-limits", rate_limit_rules(scope, alerts))
    group("storage", storage_rules(scope, alerts))
    if not groups:
        return []
    return [{
        "apiVersion": MONITORING_API, "kind": "PrometheusRule",
        "metadata": {"name": RULE_NAME, "namespace": MONITORING_NAMESPACE, "labels": dict(MONITOR_LABELS)},
        "spec": {"groups": groups},
    }]
