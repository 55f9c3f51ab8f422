"""Alert rules of the metrics stack (issue 19, "Alerts"): one PrometheusRule per cluster with the rules whose series
exist there, thresholds from `observability.alerts`, each linked to its runbook in docs/operations.md ("Alerts").

Every selector matches the cluster's `cluster` label (`<site>-<key>`, which each Prometheus gives its own series) and
every aggregation keeps it, so a rule reads one cluster's series wherever it is evaluated: on compute's Prometheus,
which holds the whole site's series while metrics is in-cluster (components.observability.cluster_manifests puts every
cluster's rule there), or on the cluster's own. Pure builders; series names are those of `components.monitors.METRICS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.constants import GPU_RESOURCE, MONITORING_NAMESPACE
from components.monitors import MONITOR_LABELS, MONITORING_API, MetricsScope

if TYPE_CHECKING:
    from components.config.schema.observability import AlertsConfig

RULE_NAME = "fab-platform-alerts"
"""Prefix of each cluster's PrometheusRule, `fab-platform-alerts-<cluster key>`."""
RUNBOOKS = "docs/operations.md"
"""The page of the runbooks; each rule links to its section (`runbook_url`), relative to the platform repository."""
ENVOY_OWN_LISTENERS = "eg-.*"
"""Stat prefixes of Envoy Gateway's own listeners on every proxy (eg-stats-http: the /stats endpoint Prometheus reads),
which are not the gateway's traffic."""
QUOTA_EXHAUSTED_FOR = "30m"
"""How long a team's queue sits at its GPU quota with work waiting before it alerts (not a config key: it is about
the quota's size, which the config sets, not about how fast to page)."""


INFINIBAND_CONGESTED_FOR = "15m"
"""How long an HCA port stays above the congestion threshold before it alerts: NCCL's collectives and checkpoint
bursts stall ports for seconds to minutes; a quarter of an hour is contention that lasts (storage beside NCCL, a bad
link or route)."""
XID_WINDOW = "10m"
"""How long an XID alert fires after DCGM reports it: DCGM_FI_DEV_XID_ERRORS holds the last XID and never resets
(NVIDIA/DCGM#277), so the rules look for a change of it, not for a value above 0."""
HARDWARE_XIDS = (48, 63, 64, 74, 79, 94, 95)
"""XIDs of the GPU itself (double-bit ECC, row remapping, NVLink, fallen off the bus, contained and uncontained ECC):
the node goes out of service. Any other XID is most often one application's fault."""


def _rule(scope: MetricsScope, alert: str, expr: str, severity: str, summary: str, description: str, anchor: str,
          for_: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": alert, "expr": expr}
    if for_:
        rule["for"] = for_
    # The cluster also where the expression's result has no `cluster` label (FabGpusLost compares with config).
    rule["labels"] = {"severity": severity, "cluster": scope.name}
    rule["annotations"] = {"summary": summary, "description": description, "runbook_url": f"{RUNBOOKS}#{anchor}"}
    return rule


def expected_gpus(gpu_nodes: dict[str, int]) -> str:
    """A vector of the GPUs each node has per config, labelled like DCGM's series (`Hostname` is the node's name)."""
    return " or ".join(f'label_replace(vector({gpus}), "Hostname", "{node}", "", "")' for node, gpus in sorted(gpu_nodes.items()))


def _in(scope: MetricsScope, *matchers: str) -> str:
    """A selector's matchers: the cluster's, then the others."""
    return ", ".join((f'cluster="{scope.name}"', *matchers))


def gpu_rules(scope: MetricsScope) -> list[dict[str, Any]]:
    expected = expected_gpus(scope.gpu_nodes)
    # One series per physical GPU, also under MIG (DCGM reports instances with the same UUID).
    seen = f"count by (cluster, Hostname) (count by (cluster, Hostname, UUID) (DCGM_FI_DEV_GPU_TEMP{{{_in(scope)}}}))"
    xid = f"DCGM_FI_DEV_XID_ERRORS{{{_in(scope)}}}"
    hardware = " or ".join(f"{xid} == {code}" for code in HARDWARE_XIDS)
    reported = f"changes({xid}[{XID_WINDOW}]) > 0"
    by_gpu = "max by (cluster, Hostname, gpu, UUID)"
    where = (f"GPU {{{{ $labels.gpu }}}} ({{{{ $labels.UUID }}}}) of node {{{{ $labels.Hostname }}}} on cluster {scope.name} "
             f"reported XID {{{{ $value }}}} in the last {XID_WINDOW}")
    return [
        _rule(
            scope, "FabGpuXidHardware",
            f"{by_gpu} (({hardware}) and {reported})",
            "critical",
            "GPU {{ $labels.gpu }} on node {{ $labels.Hostname }} reported hardware XID {{ $value }}",
            f"{where}, a hardware XID ({', '.join(map(str, HARDWARE_XIDS))}): take the node out of service. Allowed: none.",
            "gpu-xid-errors",
        ),
        _rule(
            scope, "FabGpuXidError",
            f"{by_gpu} (({xid} unless ({hardware})) and {reported})",
            "warning",
            "GPU {{ $labels.gpu }} on node {{ $labels.Hostname }} reported XID {{ $value }}",
            f"{where}, most often the fault of the job using it. Allowed: none.",
            "gpu-xid-errors",
        ),
        _rule(
            scope, "FabGpusLost",
            # `or on (Hostname)`: a node DCGM reports keeps its count alone; the configured 0 stands in only for a node
            # it does not report (a plain `or` keeps both, the `cluster` label telling them apart, and `- on (Hostname)`
            # then fails on every evaluation: many-to-many matching).
            f"({expected}) - on (Hostname) ({seen} or on (Hostname) 0 * ({expected})) > 0",
            "critical",
            "Node {{ $labels.Hostname }} is missing {{ $value }} GPUs",
            f"Cluster {scope.name}: DCGM sees {{{{ $value }}}} fewer GPUs on node {{{{ $labels.Hostname }}}} "
            "than the site config gives it (gpu.<cluster>.nodes.<node>.gpus).",
            "gpus-lost",
            for_="10m",
        ),
    ]


def infiniband_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    ticks = alerts.infiniband_xmit_wait_per_second
    return [
        _rule(
            scope, "FabInfinibandPortCongested",
            f"sum by (cluster, instance, device, port) (rate(node_infiniband_port_transmit_wait_total{{{_in(scope)}}}[5m])) > {ticks}",
            "warning",
            "InfiniBand port {{ $labels.device }}/{{ $labels.port }} of {{ $labels.instance }} is congested",
            f"Cluster {scope.name}: HCA port {{{{ $labels.device }}}}/{{{{ $labels.port }}}} of {{{{ $labels.instance }}}} "
            f"waited {{{{ $value | humanize }}}} ticks a second for flow-control credit (PortXmitWait, over 5 minutes) for "
            f"{INFINIBAND_CONGESTED_FOR}; allowed: "
            f"{ticks} (observability.alerts.infiniband_xmit_wait_per_second).",
            "infiniband-port-congestion",
            for_=INFINIBAND_CONGESTED_FOR,
        ),
    ]


def queue_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    minutes = alerts.queue_starvation_minutes
    here = _in(scope)
    gpu = _in(scope, f'resource="{GPU_RESOURCE}"')
    by_queue = "by (cluster, cluster_queue)"
    admitted = f"kueue_admitted_workloads_total{{{here}}}"
    # Admitted in the window: the counter grew, or one of its series (per priority class) appeared, which Kueue creates
    # at its first admission and increase() does not count.
    admissions = (f"(sum {by_queue} (increase({admitted}[{minutes}m])) > 0 "
                  f"or count {by_queue} ({admitted} unless {admitted} offset {minutes}m))")
    return [
        _rule(
            scope, "FabQueueStarved",
            # Pending at every evaluation for the whole window (`for`), none admitted within it: a queue whose series
            # has just appeared waits the window out like any other.
            f"sum {by_queue} (kueue_pending_workloads{{{here}}}) > 0 unless on (cluster, cluster_queue) {admissions}",
            "warning",
            "ClusterQueue {{ $labels.cluster_queue }} admitted nothing for " + f"{minutes} minutes",
            f"Cluster {scope.name}: ClusterQueue {{{{ $labels.cluster_queue }}}} has had pending workloads "
            f"and admitted none for {minutes} minutes (observability.alerts.queue_starvation_minutes = {minutes}).",
            "queue-starvation",
            for_=f"{minutes}m",
        ),
        _rule(
            scope, "FabQuotaExhausted",
            f"(sum {by_queue} (kueue_cluster_queue_resource_usage{{{gpu}}}) "
            f">= sum {by_queue} (kueue_cluster_queue_nominal_quota{{{gpu}}})) "
            f"and on (cluster, cluster_queue) (sum {by_queue} (kueue_cluster_queue_nominal_quota{{{gpu}}}) > 0) "
            f"and on (cluster, cluster_queue) (sum {by_queue} (kueue_pending_workloads{{{here}}}) > 0)",
            "warning",
            "ClusterQueue {{ $labels.cluster_queue }} uses all its GPU quota with work waiting",
            f"Cluster {scope.name}: ClusterQueue {{{{ $labels.cluster_queue }}}} has used its whole nominal "
            f"{GPU_RESOURCE} quota for {QUOTA_EXHAUSTED_FOR} while workloads wait (training.quotas).",
            "quota-exhaustion",
            for_=QUOTA_EXHAUSTED_FOR,
        ),
    ]


def gateway_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    percent = f"{alerts.gateway_5xx_percent:g}"
    days = alerts.certificate_expiry_days
    traffic = _in(scope, f'envoy_http_conn_manager_prefix!~"{ENVOY_OWN_LISTENERS}"')
    return [
        _rule(
            scope, "FabGateway5xx",
            f'100 * sum by (cluster, gateway) (rate(envoy_http_downstream_rq_xx{{{traffic}, envoy_response_code_class="5"}}[5m])) '
            f"/ sum by (cluster, gateway) (rate(envoy_http_downstream_rq_total{{{traffic}}}[5m])) > {percent}",
            "critical",
            "Gateway {{ $labels.gateway }} answers {{ $value | printf \"%.1f\" }}% of requests with 5xx",
            f"Cluster {scope.name}: gateway {{{{ $labels.gateway }}}} answered {{{{ $value }}}}% of its "
            f"requests with 5xx over 5 minutes; allowed: {percent}% (observability.alerts.gateway_5xx_percent).",
            "gateway-5xx",
            for_="5m",
        ),
        _rule(
            scope, "FabCertificateExpiring",
            f"min by (cluster, gateway) (envoy_server_days_until_first_cert_expiring{{{_in(scope)}}}) < {days}",
            "warning",
            "A certificate of gateway {{ $labels.gateway }} expires in {{ $value }} days",
            f"Cluster {scope.name}: the soonest-expiring certificate served by gateway {{{{ $labels.gateway }}}} "
            f"expires in {{{{ $value }}}} days; allowed: at least {days} (observability.alerts.certificate_expiry_days).",
            "certificate-expiry",
        ),
    ]


def rate_limit_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    percent = alerts.rate_limit_saturation_percent
    return [
        _rule(
            scope, "FabRateLimitSaturated",
            f"sum by (cluster, domain, key1, key2) (increase(ratelimit_service_rate_limit_near_limit{{{_in(scope)}}}[5m])) > 0",
            "warning",
            f"A team is above {percent}% of its requests per minute on route {{{{ $labels.domain }}}}",
            f"Cluster {scope.name}: requests of a team to a model passed {percent}% of its rate "
            f"(inference.requests_per_minute {scope.requests_per_minute.get('*', '')}, inference.team_requests_per_minute) in "
            f"the last 5 minutes; the rate limit service counts them from NEAR_LIMIT_RATIO {percent / 100:g} "
            "(observability.alerts.rate_limit_saturation_percent).",
            "rate-limit-saturation",
        ),
    ]


def storage_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    from components.federation import REPLICATION_NAMESPACE
    from components.polaris import POLARIS_DB

    rules = []
    if scope.replicates_to:
        minutes = alerts.replication_lag_minutes
        where = _in(scope, f'namespace="{REPLICATION_NAMESPACE}"')
        rules.append(_rule(
            scope, "FabReplicationLag",
            f"time() - (max by (cluster, namespace, cronjob) (kube_cronjob_status_last_successful_time{{{where}}}) "
            f"or max by (cluster, namespace, cronjob) (kube_cronjob_created{{{where}}})) > {minutes * 60}",
            "warning",
            "Replication {{ $labels.cronjob }} has not completed for {{ $value | humanizeDuration }}",
            f"Cluster {scope.name}: copy job {{{{ $labels.cronjob }}}} (to {', '.join(scope.replicates_to)}) last "
            f"succeeded {{{{ $value | humanizeDuration }}}} ago; allowed: {minutes} minutes (observability.alerts.replication_lag_minutes).",
            "replication-lag",
        ))
    if scope.polaris:
        hours = alerts.backup_age_hours
        db = _in(scope, f'namespace="{scope.polaris_namespace}"', f'pg_cluster="{POLARIS_DB}"')
        rules.append(_rule(
            scope, "FabPostgresBackupTooOld",
            f"time() - max by (cluster, namespace, pg_cluster) (cnpg_collector_last_available_backup_timestamp{{{db}}}) > {hours * 3600}",
            "critical",
            "The newest backup of Postgres {{ $labels.pg_cluster }} is {{ $value | humanizeDuration }} old",
            f"Cluster {scope.name}: the newest base backup of Postgres cluster {{{{ $labels.pg_cluster }}}} "
            f"(namespace {{{{ $labels.namespace }}}}) is {{{{ $value | humanizeDuration }}}} old; allowed: {hours} hours "
            "(observability.alerts.backup_age_hours).",
            "postgres-backup-age",
        ))
    return rules


def alert_rules(scope: MetricsScope, alerts: AlertsConfig) -> list[dict[str, Any]]:
    """The cluster's PrometheusRule, `fab-platform-alerts-<key>` (none when nothing it alerts on runs there)."""
    groups = []

    def group(name: str, rules: list[dict[str, Any]]) -> None:
        if rules:
            groups.append({"name": f"fab-{scope.cluster}-{name}", "rules": rules})

    if scope.gpu_nodes:
        group("gpu", gpu_rules(scope))
        group("infiniband", infiniband_rules(scope, alerts))
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
        "metadata": {"name": f"{RULE_NAME}-{scope.cluster}", "namespace": MONITORING_NAMESPACE, "labels": dict(MONITOR_LABELS)},
        "spec": {"groups": groups},
    }]
