"""Grafana dashboards as code (issue 19, item 1; roadmap phase 04, "performance metrics verified"): GPU use per
team, pool and profile; queue wait and admitted workloads per ClusterQueue; inference latency, throughput and tokens per
model, with the per-team rate-limit counters; S3 throughput between the GPU clusters and AIStor; cross-cluster flow
drops.

Each dashboard is built with the Grafana Foundation SDK and shipped as one ConfigMap that Grafana's dashboard sidecar
loads (kube-prometheus-stack 88.5.3, grafana subchart 12.11.1: `sidecar.dashboards.label: grafana_dashboard`,
`labelValue: "1"`, `searchNamespace: ALL`). Every query goes to one Prometheus data source holding every cluster's series
with the external labels `site` and `cluster`, and chooses its clusters, teams, pools, queues, models and buckets from
label values at view time: adding a cluster, a team or a model changes no dashboard.

Every series the dashboards query is listed in `components.monitors.METRICS` with what exports it; `KSM_LABELS` holds the
kube-state-metrics `metricLabelsAllowlist` entries they join on, which the metrics component sets.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import bargauge, statetimeline, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import prometheus as prometheus_builders
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dashboard_models

from components.constants import GPU_RESOURCE, GRAFANA_DASHBOARD_LABEL, TEAM_LABEL
from components.gpu import GPU_TYPE_LABEL, INFERENCE_NAMESPACE, POOL_LABEL
from components.monitors import METRICS
from components.profiles import PROFILE_ANNOTATION, SWITCH_NAMESPACE

SIDECAR_LABEL, SIDECAR_LABEL_VALUE = GRAFANA_DASHBOARD_LABEL
"""The label (and value) on a ConfigMap that Grafana's dashboard sidecar loads: the kube-prometheus-stack defaults."""
TAG = "fab-platform"
"""Every platform dashboard carries this tag, so Grafana's dashboard list and links find them together."""

"""The GPU resource name Kueue counts quota in (its metrics' `resource` label)."""
DCGM_WORKLOAD_NAMESPACE = "exported_namespace"
"""The label holding the namespace of the pod a GPU is allocated to. DCGM exporter labels its series with the pod's
`namespace` and `pod`, but its ServiceMonitor does not honour exported labels (`honorLabels: false` in
components/monitors.py), so Prometheus keeps the exporter pod's own `namespace` and renames the exported one to this."""
ALLOCATED = f'{DCGM_WORKLOAD_NAMESPACE}!=""'
"""Matches the GPUs a pod is allocated to."""
DCGM_NODE = "Hostname"
"""DCGM exporter 4.4.2-4.7.0's label naming the node: the GPU Operator sets `NODE_NAME` from `spec.nodeName`."""


def _ksm_label(key: str) -> str:
    """The label kube-state-metrics gives an allow-listed Kubernetes label (`fab.internal/gpu-pool` ->
    `label_fab_internal_gpu_pool`)."""
    return "label_" + "".join(c if c.isalnum() else "_" for c in key)


KSM_LABELS: dict[str, tuple[str, ...]] = {
    "nodes": (POOL_LABEL, GPU_TYPE_LABEL),
    "namespaces": (TEAM_LABEL,),
    "cronjobs": (PROFILE_ANNOTATION,),
}
"""kube-state-metrics `metricLabelsAllowlist` the dashboards need, by resource: the GPU pool and type of each node (GPU use
per pool), the team of each team namespace (GPU use per team) and the profile each switch CronJob applies (GPU use per
profile)."""


def ksm_metric_labels_allowlist() -> list[str]:
    """`KSM_LABELS` as the kube-state-metrics chart's `metricLabelsAllowlist` value (`nodes=[a,b]`)."""
    return [f"{resource}=[{','.join(keys)}]" for resource, keys in KSM_LABELS.items()]


POOL = _ksm_label(POOL_LABEL)
GPU_TYPE = _ksm_label(GPU_TYPE_LABEL)
TEAM = _ksm_label(TEAM_LABEL)
PROFILE = _ksm_label(PROFILE_ANNOTATION)



@dataclass(frozen=True)
class Dashboard:
    """One dashboard: its stable uid (also its ConfigMap's name and key), title, and the builder of its JSON model."""

    uid: str
    title: str
    description: str
    build: Callable[[Dashboard], dashboard_builders.Dashboard]

    def model(self) -> dict[str, Any]:
        """The dashboard's JSON model, as Grafana stores it, its panels numbered in order (Grafana keys a panel's links
        and view state by its id)."""
        model: dict[str, Any] = json.loads(json.dumps(self.build(self).build(), cls=JSONEncoder))
        for n, panel in enumerate(model.get("panels", []), start=1):
            panel["id"] = n
        return model

    def config_map(self, namespace: str) -> dict[str, Any]:
        """The ConfigMap Grafana's sidecar loads the dashboard from."""
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"dashboard-{self.uid}",
                "namespace": namespace,
                "labels": {SIDECAR_LABEL: SIDECAR_LABEL_VALUE, "app.kubernetes.io/part-of": TAG},
            },
            "data": {f"{self.uid}.json": json.dumps(self.model(), indent=1, sort_keys=True)},
        }


# --- building blocks -------------------------------------------------------------------------------------------------

DATASOURCE = common.DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"
CLUSTERS = 'cluster=~"$cluster"'


def _base(spec: Dashboard) -> dashboard_builders.Dashboard:
    """A read-only dashboard (its source is this module) with the data source and cluster variables."""
    return (
        dashboard_builders.Dashboard(spec.title)
        .uid(spec.uid)
        .description(spec.description)
        .tags([TAG])
        .readonly()
        .timezone("utc")
        .time("now-6h", "now")
        .refresh("1m")
        .tooltip(dashboard_models.DashboardCursorSync.CROSSHAIR)
        .link(dashboard_builders.DashboardLink("Platform dashboards").type(dashboard_models.DashboardLinkType.DASHBOARDS)
              .tags([TAG]).as_dropdown(True).include_vars(True).keep_time(True))
        .with_variable(dashboard_builders.DatasourceVariable("datasource").label("Data source").type("prometheus"))
        .with_variable(_label_variable("cluster", "Cluster", "up", "cluster"))
    )


def _label_variable(name: str, label: str, metric: str, label_name: str, multi: bool = True) -> dashboard_builders.QueryVariable:
    """A variable offering the values `label_name` takes on `metric` (in the chosen clusters, but for `cluster` itself)."""
    selector = metric if name == "cluster" else f"{metric}{{{CLUSTERS}}}"
    variable = (
        dashboard_builders.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(f"label_values({selector}, {label_name})")
        .refresh(dashboard_models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dashboard_models.VariableSort.ALPHABETICAL_ASC)
    )
    return variable.multi(True).include_all(True) if multi else variable


def _target(expr: str, legend: str, ref: str) -> prometheus_builders.Dataquery:
    return prometheus_builders.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE)


def _with_targets(panel: Any, queries: list[tuple[str, str]], instant: bool = False) -> Any:
    for n, (expr, legend) in enumerate(queries):
        target = _target(expr, legend, chr(ord("A") + n))
        panel = panel.with_target(target.instant() if instant else target)
    return panel


def _legend() -> common_builders.VizLegendOptions:
    return (common_builders.VizLegendOptions().display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.BOTTOM).show_legend(True).as_table(True).calcs(["mean", "max", "lastNotNull"]))


def _timeseries(title: str, description: str, unit: str, *queries: tuple[str, str], span: int = 12,
                stack: bool = False) -> timeseries.Panel:
    panel = (timeseries.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit)
             .span(span).height(8).legend(_legend()).fill_opacity(10 if not stack else 60))
    if stack:
        panel = panel.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    return _with_targets(panel, list(queries))


def _bars(title: str, description: str, unit: str, *queries: tuple[str, str], span: int = 12) -> bargauge.Panel:
    panel = (bargauge.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit).span(span).height(8)
             .orientation(common.VizOrientation.HORIZONTAL).display_mode(common.BarGaugeDisplayMode.GRADIENT)
             .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False)))
    return _with_targets(panel, list(queries), instant=True)


def _row(title: str) -> dashboard_builders.Row:
    return dashboard_builders.Row(title)


def _quantile(q: float, metric: str, selector: str, by: str) -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}{{{selector}}}[{RATE}])))"


# --- GPU use per team, pool and profile ------------------------------------------------------------------------------

_NODES = (f'label_replace(kube_node_labels{{{CLUSTERS}, {POOL}=~"$pool"}}, "{DCGM_NODE}", "$1", "node", "(.*)")')
"""Each GPU node's pool and type, keyed like DCGM exporter's series (cluster and node)."""


def _per_gpu(metric: str, selector: str = "") -> str:
    """`metric` of every GPU of the chosen clusters and pools, with its node's pool and GPU type."""
    matchers = ", ".join(filter(None, [CLUSTERS, selector]))
    return f"{metric}{{{matchers}}} * on (cluster, {DCGM_NODE}) group_left ({POOL}, {GPU_TYPE}) {_NODES}"


_TEAM_NAMESPACES = f'kube_namespace_labels{{{CLUSTERS}, {TEAM}=~"$team"}}'


def _per_team_gpu(metric: str) -> str:
    """`metric` of every GPU allocated to a pod of a chosen team's namespace, with the team."""
    allocated = (f'label_replace({metric}{{{CLUSTERS}, {DCGM_WORKLOAD_NAMESPACE}!=""}}, "namespace", "$1", '
                 f'"{DCGM_WORKLOAD_NAMESPACE}", "(.*)")')
    return f"{allocated} * on (cluster, namespace) group_left ({TEAM}) {_TEAM_NAMESPACES}"


_SWITCHES = f'kube_cronjob_status_last_successful_time{{{CLUSTERS}, namespace="{SWITCH_NAMESPACE}"}}'
ACTIVE_PROFILE = (
    f"max by (cluster, {PROFILE}) ("
    f'kube_cronjob_labels{{{CLUSTERS}, namespace="{SWITCH_NAMESPACE}"}} * on (cluster, namespace, cronjob) group_left () '
    f"(({_SWITCHES} == on (cluster) group_left () max by (cluster) ({_SWITCHES})) > bool 0))"
)
"""1 for each cluster's active profile: the profile label of the switch CronJob that succeeded last (evaluated at each
instant, so over time it gives the profile in force then). Empty on a cluster without a profile schedule, which runs its
stack's `active_profile` all the time."""
_POOL_UTIL = f"avg by (cluster, {POOL}) ({_per_gpu('DCGM_FI_DEV_GPU_UTIL')})"


def _gpu_use(spec: Dashboard) -> dashboard_builders.Dashboard:
    return (
        _base(spec)
        .with_variable(_label_variable("pool", "GPU pool", "kube_node_labels", POOL))
        .with_variable(_label_variable("team", "Team", "kube_namespace_labels", TEAM))
        .annotation(dashboard_builders.AnnotationQuery().name("Profile switches").datasource(DATASOURCE).enable(True)
                    .icon_color("purple").expr(f"changes({_SWITCHES}[5m]) > 0"))
        .with_row(_row("GPU use per pool"))
        .with_panel(_timeseries(
            "GPU utilization per pool", "Mean DCGM_FI_DEV_GPU_UTIL of the pool's GPUs (share of time a kernel ran).",
            "percent", (_POOL_UTIL, f"{{{{cluster}}}} {{{{{POOL}}}}}")))
        .with_panel(_timeseries(
            "Graphics engine active per pool", "Mean DCGM_FI_PROF_GR_ENGINE_ACTIVE of the pool's GPUs: the ratio of time "
            "the graphics/compute engine was active, from DCGM's profiling counters.", "percentunit",
            (f"avg by (cluster, {POOL}) ({_per_gpu('DCGM_FI_PROF_GR_ENGINE_ACTIVE')})", f"{{{{cluster}}}} {{{{{POOL}}}}}")))
        .with_panel(_timeseries(
            "GPUs allocated per pool", "GPUs with a pod on them, against the pool's GPUs.", "short",
            (f'count by (cluster, {POOL}) ({_per_gpu("DCGM_FI_DEV_GPU_UTIL", ALLOCATED)})',
             f"{{{{cluster}}}} {{{{{POOL}}}}} allocated"),
            (f"count by (cluster, {POOL}) ({_per_gpu('DCGM_FI_DEV_GPU_UTIL')})", f"{{{{cluster}}}} {{{{{POOL}}}}} total")))
        .with_panel(_timeseries(
            "GPU memory used per pool and GPU type", "Framebuffer memory in use on the pool's GPUs.", "decmbytes",
            (f"sum by (cluster, {POOL}, {GPU_TYPE}) ({_per_gpu('DCGM_FI_DEV_FB_USED')})",
             f"{{{{cluster}}}} {{{{{POOL}}}}} {{{{{GPU_TYPE}}}}}")))
        .with_row(_row("GPU use per team"))
        .with_panel(_timeseries(
            "GPUs allocated per team", "GPUs with a pod of the team's namespace on them (training, notebooks, batch).",
            "short", (f"count by ({TEAM}) ({_per_team_gpu('DCGM_FI_DEV_GPU_UTIL')})", f"{{{{{TEAM}}}}}"), stack=True))
        .with_panel(_timeseries(
            "GPU utilization per team", "Mean DCGM_FI_DEV_GPU_UTIL of the GPUs allocated to the team's pods: low means "
            "GPUs held but idle.", "percent", (f"avg by ({TEAM}) ({_per_team_gpu('DCGM_FI_DEV_GPU_UTIL')})", f"{{{{{TEAM}}}}}")))
        .with_panel(_timeseries(
            "GPUs allocated per namespace", "Every namespace with GPUs, the inference namespace and peers' teams included.",
            "short", (f"count by (cluster, {DCGM_WORKLOAD_NAMESPACE}) (DCGM_FI_DEV_GPU_UTIL{{{CLUSTERS}, {ALLOCATED}}})",
                      f"{{{{cluster}}}} {{{{{DCGM_WORKLOAD_NAMESPACE}}}}}"), span=24))
        .with_row(_row("GPU use per profile"))
        .with_panel(statetimeline.Panel().title("Active profile").description(
            "The profile each cluster runs: the one whose scheduled switch succeeded last. Empty without a profile "
            "schedule (the stack's active_profile is in force).").datasource(DATASOURCE).span(24).height(5)
            .with_target(_target(ACTIVE_PROFILE, f"{{{{cluster}}}} {{{{{PROFILE}}}}}", "A")))
        .with_panel(_timeseries(
            "GPU utilization per pool and profile", "Each pool's utilization, drawn under the profile in force at the time.",
            "percent", (f"{_POOL_UTIL} * on (cluster) group_left ({PROFILE}) {ACTIVE_PROFILE}",
                        f"{{{{cluster}}}} {{{{{POOL}}}}} {{{{{PROFILE}}}}}")))
        .with_panel(_bars(
            "Mean GPU utilization per pool and profile, over the range", "Each pool's mean utilization over the "
            "hours each profile was in force within the dashboard's range.", "percent",
            (f"avg_over_time(({_POOL_UTIL} * on (cluster) group_left ({PROFILE}) {ACTIVE_PROFILE})[$__range:5m])",
             f"{{{{cluster}}}} {{{{{POOL}}}}} {{{{{PROFILE}}}}}")))
        .with_row(_row("InfiniBand"))
        .with_panel(_timeseries(
            "InfiniBand port congestion per node", "Ticks per second during which an HCA port had data to send and no "
            "flow-control credit (PortXmitWait, node-exporter's infiniband collector): the fabric's congestion signal. "
            "Watch it while NCCL runs beside storage load (docs/acceptance.md, 01-nccl-under-load).", "short",
            (f"sum by (cluster, instance, device, port) (rate(node_infiniband_port_transmit_wait_total{{{CLUSTERS}}}[{RATE}]))",
             "{{cluster}} {{instance}} {{device}}/{{port}}")))
        .with_panel(_timeseries(
            "InfiniBand throughput per node", "Bytes per second each HCA port sends (node-exporter's infiniband collector).",
            "Bps",
            (f"sum by (cluster, instance, device, port) (rate(node_infiniband_port_data_transmitted_bytes_total{{{CLUSTERS}}}[{RATE}]))",
             "{{cluster}} {{instance}} {{device}}/{{port}}")))
    )


# --- Kueue: queue wait and admitted workloads per ClusterQueue -------------------------------------------------------

KUEUE_LEADING = 'replica_role!="follower"'
"""Kueue's standby replicas export the ClusterQueue gauges too (label `replica_role`): count the leader's only."""
_QUEUES = f'{CLUSTERS}, cluster_queue=~"$cluster_queue", {KUEUE_LEADING}'


def _gpu_quota(metric: str) -> str:
    """A Kueue per-resource metric's GPUs per ClusterQueue, over its flavors (GPU types)."""
    return f'sum by (cluster, cluster_queue) ({metric}{{{_QUEUES}, resource="{GPU_RESOURCE}"}})'


def _queues(spec: Dashboard) -> dashboard_builders.Dashboard:
    per_queue = "{{cluster}} {{cluster_queue}}"
    return (
        _base(spec)
        .with_variable(_label_variable("cluster_queue", "ClusterQueue", "kueue_pending_workloads", "cluster_queue"))
        .with_row(_row("Admission"))
        .with_panel(_timeseries(
            "Admitted workloads per ClusterQueue", "Admitted workloads that have not finished.", "short",
            (f"sum by (cluster, cluster_queue) (kueue_admitted_active_workloads{{{_QUEUES}}})", per_queue), stack=True))
        .with_panel(_timeseries(
            "Pending workloads per ClusterQueue", "Waiting for quota (active) or unable to fit (inadmissible).", "short",
            (f"sum by (cluster, cluster_queue, status) (kueue_pending_workloads{{{_QUEUES}}})",
             "{{cluster}} {{cluster_queue}} {{status}}")))
        .with_panel(_timeseries(
            "Queue wait per ClusterQueue (p50, p90)", "Time from a workload's creation or requeue to its admission.", "s",
            (_quantile(0.5, "kueue_admission_wait_time_seconds_bucket", _QUEUES, "cluster, cluster_queue"), f"{per_queue} p50"),
            (_quantile(0.9, "kueue_admission_wait_time_seconds_bucket", _QUEUES, "cluster, cluster_queue"), f"{per_queue} p90")))
        .with_panel(_timeseries(
            "Admissions per ClusterQueue", "Workloads admitted per second.", "ops",
            (f"sum by (cluster, cluster_queue) (rate(kueue_admitted_workloads_total{{{_QUEUES}}}[{RATE}]))", per_queue)))
        .with_row(_row("Quota"))
        .with_panel(_timeseries(
            "GPUs in use per ClusterQueue", "GPU quota the queue's admitted workloads use (borrowed included).", "short",
            (_gpu_quota("kueue_cluster_queue_resource_usage"), per_queue), stack=True))
        .with_panel(_timeseries(
            "GPU quota used per ClusterQueue", "GPUs in use over the queue's nominal GPU quota; above 1 it borrows from "
            "the cohort.", "percentunit",
            (f"{_gpu_quota('kueue_cluster_queue_resource_usage')} / {_gpu_quota('kueue_cluster_queue_nominal_quota')}",
             per_queue)))
        .with_panel(_timeseries(
            "Evictions per ClusterQueue", "Workloads evicted per second, by reason (preemption by a higher priority, "
            "a profile switch shrinking the quota, ...).", "ops",
            (f"sum by (cluster, cluster_queue, reason) (rate(kueue_evicted_workloads_total{{{_QUEUES}}}[{RATE}]))",
             "{{cluster}} {{cluster_queue}} {{reason}}"), span=24))
    )


# --- inference: latency, throughput and tokens per model; rate limits per team ---------------------------------------

_MODELS = f'{CLUSTERS}, model_name=~"$model"'


def _inference(spec: Dashboard) -> dashboard_builders.Dashboard:
    per_model = "{{model_name}}"
    # Envoy Gateway names a route's upstream cluster httproute/<namespace>/<route>/rule/<n>; the routes are vllm-<model>.
    routes = f'envoy_cluster_upstream_rq_xx{{{CLUSTERS}, envoy_cluster_name=~"httproute/{INFERENCE_NAMESPACE}/.*"}}'
    by_route = (f'label_replace(rate({routes}[{RATE}]), "route", "$1", "envoy_cluster_name", '
                f'"httproute/{INFERENCE_NAMESPACE}/([^/]+)/.*")')
    return (
        _base(spec)
        .with_variable(_label_variable("model", "Model", "vllm:num_requests_running", "model_name"))
        .with_row(_row("Latency per model"))
        .with_panel(_timeseries(
            "Request latency per model (p50, p95)", "End-to-end, from the request reaching vLLM to its last token.", "s",
            (_quantile(0.5, "vllm:e2e_request_latency_seconds_bucket", _MODELS, "model_name"), f"{per_model} p50"),
            (_quantile(0.95, "vllm:e2e_request_latency_seconds_bucket", _MODELS, "model_name"), f"{per_model} p95")))
        .with_panel(_timeseries(
            "Time to first token per model (p50, p95)", "Queueing and prefill: what an interactive user waits for.", "s",
            (_quantile(0.5, "vllm:time_to_first_token_seconds_bucket", _MODELS, "model_name"), f"{per_model} p50"),
            (_quantile(0.95, "vllm:time_to_first_token_seconds_bucket", _MODELS, "model_name"), f"{per_model} p95")))
        .with_panel(_timeseries(
            "Time between tokens per model (p50, p95)", "Decode speed as a user sees it.", "s",
            (_quantile(0.5, "vllm:inter_token_latency_seconds_bucket", _MODELS, "model_name"), f"{per_model} p50"),
            (_quantile(0.95, "vllm:inter_token_latency_seconds_bucket", _MODELS, "model_name"), f"{per_model} p95")))
        .with_panel(_timeseries(
            "Requests running and waiting per model", "Running on the engines, and waiting for room (KV cache, batch).",
            "short", (f"sum by (model_name) (vllm:num_requests_running{{{_MODELS}}})", f"{per_model} running"),
            (f"sum by (model_name) (vllm:num_requests_waiting{{{_MODELS}}})", f"{per_model} waiting")))
        .with_row(_row("Throughput and tokens per model"))
        .with_panel(_timeseries(
            "Requests per model", "Finished requests per second, by why they finished (stop, length, abort).", "reqps",
            (f"sum by (model_name, finished_reason) (rate(vllm:request_success_total{{{_MODELS}}}[{RATE}]))",
             f"{per_model} {{{{finished_reason}}}}")))
        .with_panel(_timeseries(
            "Tokens per model", "Prompt tokens processed and tokens generated per second.", "short",
            (f"sum by (model_name) (rate(vllm:prompt_tokens_total{{{_MODELS}}}[{RATE}]))", f"{per_model} prompt"),
            (f"sum by (model_name) (rate(vllm:generation_tokens_total{{{_MODELS}}}[{RATE}]))", f"{per_model} generated")))
        .with_panel(_timeseries(
            "KV cache usage per model", "Highest KV cache usage of the model's engines: near 1, requests wait.",
            "percentunit", (f"max by (model_name) (vllm:kv_cache_usage_perc{{{_MODELS}}})", per_model)))
        .with_panel(_timeseries(
            "Gateway responses per route", "Responses of the inference gateway's routes (one per model) by status class.",
            "reqps", (f"sum by (route, envoy_response_code_class) ({by_route})", "{{route}} {{envoy_response_code_class}}xx")))
        .with_row(_row("Rate limits (per team where a team has its own rate)"))
        .with_panel(_timeseries(
            "Rate-limit decisions per route and rule", "The gateway's global rate limit per route (key1) and rule "
            "(key2): requests counted, allowed near the limit, refused. Envoy Gateway names a rule by its position, "
            "never by the team: rule-0 is every team at the default rate (each with its own bucket, counted together "
            "here), rule-n the n-th team, alphabetically, of inference.team_requests_per_minute.", "reqps",
            (f"sum by (key1, key2) (rate(ratelimit_service_rate_limit_total_hits{{{CLUSTERS}}}[{RATE}]))",
             "{{key1}} {{key2}} counted"),
            (f"sum by (key1, key2) (rate(ratelimit_service_rate_limit_near_limit{{{CLUSTERS}}}[{RATE}]))",
             "{{key1}} {{key2}} near limit"),
            (f"sum by (key1, key2) (rate(ratelimit_service_rate_limit_over_limit{{{CLUSTERS}}}[{RATE}]))",
             "{{key1}} {{key2}} refused"), span=24))
    )


# --- S3 throughput between the GPU clusters and AIStor ----------------------------------------------------------------

_BUCKETS = f'{CLUSTERS}, bucket=~"$bucket"'
_GPU_PODS = 'cluster=~"$gpu_cluster", namespace!=""'


def _s3(spec: Dashboard) -> dashboard_builders.Dashboard:
    return (
        _base(spec)
        .with_variable(_label_variable("bucket", "Bucket", "minio_bucket_api_traffic_sent_bytes", "bucket"))
        .with_variable(dashboard_builders.QueryVariable("gpu_cluster").label("GPU cluster").datasource(DATASOURCE)
                       .query("label_values(DCGM_FI_DEV_GPU_UTIL, cluster)").multi(True).include_all(True)
                       .refresh(dashboard_models.VariableRefresh.ON_TIME_RANGE_CHANGED)
                       .sort(dashboard_models.VariableSort.ALPHABETICAL_ASC))
        .with_row(_row("AIStor, per bucket"))
        .with_panel(_timeseries(
            "Read from AIStor per bucket", "Bytes AIStor sent per second (GETs: datasets, model weights, checkpoints "
            "read back).", "Bps", (f"sum by (bucket) (rate(minio_bucket_api_traffic_sent_bytes{{{_BUCKETS}}}[{RATE}]))",
                                   "{{bucket}}"), stack=True))
        .with_panel(_timeseries(
            "Written to AIStor per bucket", "Bytes AIStor received per second (PUTs: checkpoints, models, results).",
            "Bps", (f"sum by (bucket) (rate(minio_bucket_api_traffic_received_bytes{{{_BUCKETS}}}[{RATE}]))", "{{bucket}}"),
            stack=True))
        .with_panel(_timeseries(
            "S3 requests per bucket", "Requests per second by API (GetObject, PutObject, multipart, ...).", "reqps",
            (f"sum by (bucket, name) (rate(minio_bucket_api_total{{{_BUCKETS}}}[{RATE}]))", "{{bucket}} {{name}}"),
            span=24))
        .with_row(_row("GPU clusters, per namespace"))
        .with_panel(_timeseries(
            "Received by GPU pods per namespace", "Bytes the GPU clusters' pods receive per second on their pod "
            "interfaces: their reads from AIStor and Polaris (NCCL over InfiniBand is not on these).", "Bps",
            (f"sum by (cluster, namespace) (rate(container_network_receive_bytes_total{{{_GPU_PODS}}}[{RATE}]))",
             "{{cluster}} {{namespace}}"), stack=True))
        .with_panel(_timeseries(
            "Sent by GPU pods per namespace", "Bytes the GPU clusters' pods send per second on their pod interfaces: "
            "their writes to AIStor (checkpoints, models).", "Bps",
            (f"sum by (cluster, namespace) (rate(container_network_transmit_bytes_total{{{_GPU_PODS}}}[{RATE}]))",
             "{{cluster}} {{namespace}}"), stack=True))
    )


# --- cross-cluster flow drops ----------------------------------------------------------------------------------------

_DROPS = f'{CLUSTERS}, reason=~"$reason"'


def _drops(spec: Dashboard) -> dashboard_builders.Dashboard:
    return (
        _base(spec)
        .with_variable(_label_variable("reason", "Drop reason", "hubble_drop_total", "reason"))
        .with_row(_row("Drops"))
        .with_panel(_timeseries(
            "Drops per cluster and reason", "Packets Cilium dropped per second, by reason (POLICY_DENIED is the "
            "default-deny between clusters at work).", "pps",
            (f"sum by (cluster, reason) (rate(hubble_drop_total{{{_DROPS}}}[{RATE}]))", "{{cluster}} {{reason}}"),
            stack=True))
        .with_panel(_timeseries(
            "Drops from outside the cluster mesh", "Drops whose source is a reserved identity (world, host, remote-node, "
            "...): an address that is no pod of a meshed cluster, such as another cluster's VIP or an outside user.", "pps",
            (f'sum by (cluster, source, destination, reason) (rate(hubble_drop_total{{{_DROPS}, source=~"reserved:.*"}}[{RATE}]))',
             "{{cluster}} {{source}} -> {{destination}} {{reason}}")))
        .with_panel(_bars(
            "Top dropped flows over the range", "The 20 source and destination pairs with the most drops in the "
            "dashboard's range: a pair that should be allowed is missing from the cross-cluster flows.", "short",
            (f"topk(20, sum by (cluster, source, destination, reason) (increase(hubble_drop_total{{{_DROPS}}}[$__range])))",
             "{{cluster}} {{source}} -> {{destination}} {{reason}}"), span=24))
    )


DASHBOARDS: tuple[Dashboard, ...] = (
    Dashboard("fab-gpu-use", "GPU use per team, pool and profile",
              "GPU utilization and allocation per pool, team and profile (DCGM exporter, kube-state-metrics).", _gpu_use),
    Dashboard("fab-kueue-queues", "Queue wait and admitted workloads per ClusterQueue",
              "Kueue admission, pending work, queue wait and GPU quota per ClusterQueue.", _queues),
    Dashboard("fab-inference", "Inference latency, throughput and tokens per model and team",
              "vLLM latency, requests and tokens per model; the gateway's responses per route and rate limits per team.",
              _inference),
    Dashboard("fab-s3-throughput", "S3 throughput between GPU clusters and AIStor",
              "AIStor traffic per bucket and the GPU clusters' pod traffic per namespace.", _s3),
    Dashboard("fab-flow-drops", "Cross-cluster flow drops",
              "Packets Cilium dropped, per cluster, reason, source and destination (Hubble).", _drops),
)
"""The platform's dashboards. A uid is a contract (links, bookmarks): never change one, add a dashboard instead."""


def dashboards(namespace: str) -> list[dict[str, Any]]:
    """One ConfigMap manifest per dashboard, in `namespace`, labelled for Grafana's dashboard sidecar."""
    return [spec.config_map(namespace) for spec in DASHBOARDS]


__all__ = ["DASHBOARDS", "KSM_LABELS", "METRICS", "SIDECAR_LABEL", "SIDECAR_LABEL_VALUE", "Dashboard",
           "dashboards", "ksm_metric_labels_allowlist"]
