"""Grafana dashboards as code (components/dashboards.py): valid ConfigMaps the sidecar loads, the panels issue 19 names,
queries over listed metrics only, and nothing a site's config names written into a dashboard."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from helpers import render_small
from schemas import builtin_errors
from small_site import add_profile_schedule, full_site, small_site

from components import monitors
from components.alerts import alert_rules
from components.config import AlertsConfig, parse_site
from components.dashboards import (
    DASHBOARDS,
    DCGM_WORKLOAD_NAMESPACE,
    GPU_RESOURCE,
    KSM_LABELS,
    METRICS,
    SIDECAR_LABEL,
    SIDECAR_LABEL_VALUE,
    dashboards,
    ksm_metric_labels_allowlist,
)
from components.gpu import INFERENCE_NAMESPACE
from components.monitors import metrics_scopes
from components.profiles import SWITCH_NAMESPACE

NAMESPACE = "monitoring"
GRAFANA_BUILTINS = {"__rate_interval": "5m", "__range": "1h", "__interval": "1m"}
"""Grafana's own variables the queries use, with a value that makes the query parse as PromQL."""
FIXED_MATCHERS = {
    ("namespace", SWITCH_NAMESPACE),
    ("resource", GPU_RESOURCE),
    ("envoy_cluster_name", f"httproute/{INFERENCE_NAMESPACE}/.*"),
    ("source", "reserved:.*"),
    ("exported_namespace", ""),
    ("namespace", ""),
    ("replica_role", "follower"),
}
"""The only label values a query may write out: the program's own constants, never a team, model or cluster."""
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def _models() -> list[dict[str, Any]]:
    return [json.loads(next(iter(cm["data"].values()))) for cm in dashboards(NAMESPACE)]


def _model(uid: str) -> dict[str, Any]:
    return next(model for model in _models() if model["uid"] == uid)


def _queries(model: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard: its panels' targets and its annotations."""
    exprs = [target["expr"] for panel in model["panels"] for target in panel.get("targets", [])]
    exprs += [annotation["expr"] for annotation in model.get("annotations", {}).get("list", [])]
    assert exprs
    return exprs


def _all_queries() -> list[str]:
    return [expr for model in _models() for expr in _queries(model)]


def _parse(expr: str) -> promql_parser.Expr:
    for name, value in GRAFANA_BUILTINS.items():
        expr = expr.replace(f"${name}", value)
    return promql_parser.parse(expr)


def _selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []
    promql_parser.walk(_parse(expr), lambda node: found.append(node) if isinstance(node, promql_parser.VectorSelector) else None)
    return found


def _variables_used(model: dict[str, Any]) -> set[str]:
    text = json.dumps({"panels": model["panels"], "annotations": model.get("annotations"),
                       "variables": [v.get("query") for v in model["templating"]["list"] if v["type"] == "query"]})
    used = {next(filter(None, match.groups())) for match in VARIABLE.finditer(text)}
    return {name for name in used if not name.isdigit() and name not in GRAFANA_BUILTINS}


def _unlisted_metrics(model: dict[str, Any]) -> set[str]:
    """Series a dashboard queries that METRICS does not list."""
    return {selector.name for expr in _queries(model) for selector in _selectors(expr)} - set(METRICS)


def _undefined_variables(model: dict[str, Any]) -> set[str]:
    return _variables_used(model) - {variable["name"] for variable in model["templating"]["list"]}


def _written_out_values(model: dict[str, Any]) -> set[tuple[str, str]]:
    """Label matchers of a dashboard's queries whose value is neither a variable nor one of the program's constants."""
    matchers = {(m.name, m.value) for expr in _queries(model) for selector in _selectors(expr) for m in selector.matchers.matchers}
    return {(name, value) for name, value in matchers if not VARIABLE.fullmatch(value)} - FIXED_MATCHERS


def _with_first_query(model: dict[str, Any], expr: str) -> dict[str, Any]:
    """A copy of `model` whose first panel query is `expr`."""
    changed = json.loads(json.dumps(model))
    next(panel for panel in changed["panels"] if panel.get("targets"))["targets"][0]["expr"] = expr
    return changed


def test_every_config_map_is_a_valid_config_map():
    config_maps = dashboards(NAMESPACE)
    assert config_maps
    assert {cm["metadata"]["name"]: builtin_errors(cm) for cm in config_maps} == {cm["metadata"]["name"]: [] for cm in config_maps}


def test_every_config_map_is_labelled_for_the_grafana_sidecar_in_the_namespace_given():
    config_maps = dashboards(NAMESPACE)
    assert config_maps
    assert {(cm["metadata"]["namespace"], cm["metadata"]["labels"][SIDECAR_LABEL]) for cm in config_maps} == {
        (NAMESPACE, SIDECAR_LABEL_VALUE)}


def test_the_sidecar_label_is_the_one_the_pinned_kube_prometheus_stack_watches(chart_dir: Path, helm: Path):
    (package,) = chart_dir.glob("kube-prometheus-stack-*.tgz")
    values = yaml.safe_load(subprocess.run([str(helm), "show", "values", str(package)], check=True, capture_output=True,
                                           text=True).stdout)
    sidecar = values["grafana"]["sidecar"]["dashboards"]
    assert (sidecar["enabled"], sidecar["label"], sidecar["labelValue"], sidecar["searchNamespace"]) == (
        True, SIDECAR_LABEL, SIDECAR_LABEL_VALUE, "ALL")


def test_each_config_map_holds_its_dashboard_under_its_uid():
    config_maps = dashboards(NAMESPACE)
    assert config_maps
    for cm, spec in zip(config_maps, DASHBOARDS, strict=True):
        assert list(cm["data"]) == [f"{spec.uid}.json"]
        model = json.loads(cm["data"][f"{spec.uid}.json"])
        assert (model["uid"], model["title"], cm["metadata"]["name"]) == (spec.uid, spec.title, f"dashboard-{spec.uid}")


def test_uids_and_titles_are_unique():
    models = _models()
    assert models
    assert len({m["uid"] for m in models}) == len({m["title"] for m in models}) == len(models)


def test_uids_fit_grafana_and_configmap_keys():
    # Grafana refuses a uid over 40 characters; a ConfigMap key is [-._a-zA-Z0-9]+.
    assert DASHBOARDS
    assert all(len(spec.uid) <= 40 and re.fullmatch(r"[-._a-zA-Z0-9]+", spec.uid) for spec in DASHBOARDS)


def test_the_dashboards_are_the_ones_issue_19_names():
    assert {m["uid"]: m["title"] for m in _models()} == {
        "fab-gpu-use": "GPU use per team, pool and profile",
        "fab-kueue-queues": "Queue wait and admitted workloads per ClusterQueue",
        "fab-inference": "Inference latency, throughput and tokens per model and team",
        "fab-s3-throughput": "S3 throughput between GPU clusters and AIStor",
        "fab-flow-drops": "Cross-cluster flow drops",
    }


@pytest.mark.parametrize(("uid", "titles"), [
    ("fab-gpu-use", {"GPU utilization per pool", "GPUs allocated per team", "GPU utilization per team", "Active profile",
                     "GPU utilization per pool and profile", "InfiniBand port congestion per node"}),
    ("fab-kueue-queues", {"Admitted workloads per ClusterQueue", "Pending workloads per ClusterQueue",
                          "Queue wait per ClusterQueue (p50, p90)"}),
    ("fab-inference", {"Request latency per model (p50, p95)", "Time to first token per model (p50, p95)",
                       "Requests per model", "Tokens per model", "Rate-limit decisions per route and rule"}),
    ("fab-s3-throughput", {"Read from AIStor per bucket", "Written to AIStor per bucket", "Received by GPU pods per namespace",
                           "Sent by GPU pods per namespace"}),
    ("fab-flow-drops", {"Drops per cluster and reason", "Top dropped flows over the range"}),
])
def test_each_dashboard_has_the_panels_the_issue_asks_for(uid: str, titles: set[str]):
    assert titles <= {panel["title"] for panel in _model(uid)["panels"]}


def test_panel_ids_are_unique_within_each_dashboard():
    for model in _models():
        ids = [panel["id"] for panel in model["panels"]]
        assert ids and len(set(ids)) == len(ids)


def test_every_query_parses_as_promql():
    exprs = _all_queries()
    assert all(_parse(expr) is not None for expr in exprs)


def test_every_queried_metric_is_listed_with_its_exporter():
    models = _models()
    assert models
    assert {model["uid"]: _unlisted_metrics(model) for model in models} == {model["uid"]: set() for model in models}


def test_fails_when_a_query_reads_a_metric_nobody_listed():
    model = _with_first_query(_model("fab-inference"), 'sum(rate(vllm:request_tokens_total{cluster=~"$cluster"}[5m]))')
    assert _unlisted_metrics(model) == {"vllm:request_tokens_total"}


def test_every_listed_metric_is_read_by_a_dashboard_or_an_alert_rule():
    read = {selector.name for expr in _all_queries() for selector in _selectors(expr)}
    for scope in metrics_scopes(parse_site(full_site())).values():
        for rule in (rule for obj in alert_rules(scope, AlertsConfig()) for group in obj["spec"]["groups"] for rule in group["rules"]):
            read |= {selector.name for selector in _selectors(rule["expr"])}
    assert set(METRICS) - read == set()


def test_every_variable_a_dashboard_uses_is_defined_in_it():
    for model in _models():
        assert {"datasource", "cluster"} <= _variables_used(model)
        assert _undefined_variables(model) == set(), model["uid"]


def test_fails_when_a_query_uses_a_variable_the_dashboard_does_not_define():
    model = _with_first_query(_model("fab-kueue-queues"), 'kueue_pending_workloads{cluster=~"$cluster", cohort=~"$cohort"}')
    assert _undefined_variables(model) == {"cohort"}


def test_every_query_reads_the_dashboards_data_source_variable():
    for model in _models():
        targets = [target for panel in model["panels"] for target in panel.get("targets", [])]
        assert targets
        assert {json.dumps(t["datasource"], sort_keys=True) for t in targets} == {'{"type": "prometheus", "uid": "${datasource}"}'}


def test_no_query_writes_out_a_team_model_cluster_or_other_site_value():
    models = _models()
    assert models
    assert {model["uid"]: _written_out_values(model) for model in models} == {model["uid"]: set() for model in models}


def test_fails_when_a_query_names_a_model():
    model = _with_first_query(_model("fab-inference"), 'vllm:num_requests_running{cluster=~"$cluster", model_name="qwen3-8b"}')
    assert _written_out_values(model) == {("model_name", "qwen3-8b")}


def test_fails_when_a_query_names_a_team():
    model = _with_first_query(_model("fab-gpu-use"), 'kube_namespace_labels{cluster=~"$cluster", label_fab_internal_team="yield"}')
    assert _written_out_values(model) == {("label_fab_internal_team", "yield")}


def test_fails_when_a_query_names_a_cluster():
    model = _with_first_query(_model("fab-gpu-use"), 'DCGM_FI_DEV_GPU_UTIL{cluster="gpu"}')
    assert _written_out_values(model) == {("cluster", "gpu")}


def test_every_selector_is_scoped_to_the_chosen_clusters():
    # The one data source holds every cluster's series: a selector without the cluster variable mixes clusters.
    unscoped = {str(s) for expr in _all_queries() for s in _selectors(expr)
                if not any(m.name == "cluster" and m.value in ("$cluster", "$gpu_cluster") for m in s.matchers.matchers)}
    assert unscoped == set()


def test_the_kube_state_metrics_labels_the_queries_join_on_are_allow_listed():
    allowed = {"label_" + re.sub(r"[^a-zA-Z0-9]", "_", key) for keys in KSM_LABELS.values() for key in keys}
    used = {label for expr in _all_queries() for label in re.findall(r"\blabel_[a-z_]+\b", expr) if label != "label_replace"}
    assert used
    assert used == allowed


def test_the_allowlist_is_written_as_the_kube_state_metrics_chart_takes_it():
    assert ksm_metric_labels_allowlist() == [
        "nodes=[fab.internal/gpu-pool,fab.internal/gpu-type]", "namespaces=[fab.internal/team]", "cronjobs=[fab.internal/profile]"]


def test_team_namespaces_carry_the_team_label_the_dashboards_read(small_plan):
    namespaces = {r["inputs"]["metadata"]["name"]: r["inputs"]["metadata"].get("labels", {})
                  for r in small_plan.of_type("kubernetes:core/v1:Namespace")}
    assert namespaces["team-yield"][KSM_LABELS["namespaces"][0]] == "yield"


def test_gpu_node_rules_set_the_pool_and_type_labels_the_dashboards_read(small_plan):
    rules = [rule for r in small_plan.of_type("kubernetes:nfd.k8s-sigs.io/v1alpha1:NodeFeatureRule")
             for rule in r["inputs"]["spec"]["rules"]]
    assert rules
    assert all(set(KSM_LABELS["nodes"]) <= set(rule["labels"]) for rule in rules)


def test_profile_switches_carry_the_profile_label_the_dashboards_read():
    site = small_site()
    add_profile_schedule(site)
    switches = {r["inputs"]["metadata"]["name"]: r["inputs"]["metadata"]["labels"]
                for r in render_small(site).of_type("kubernetes:batch/v1:CronJob")
                if r["inputs"]["metadata"]["namespace"] == SWITCH_NAMESPACE}
    assert switches
    assert {labels[KSM_LABELS["cronjobs"][0]] for labels in switches.values()} == {"day", "night"}


def test_the_gpu_workload_namespace_label_matches_how_the_dcgm_service_monitor_treats_exported_labels():
    # Honouring the exporter's labels keeps its `namespace` (the GPU's pod); otherwise Prometheus renames it.
    scope = monitors.MetricsScope(site="site-t", cluster="gpu", role="gpu", gpu_nodes={"gpu-1": 8})
    (monitor,) = [m for m in monitors.scrape_targets(scope) if m["metadata"]["name"] == "dcgm-exporter"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert DCGM_WORKLOAD_NAMESPACE == ("namespace" if endpoint["honorLabels"] else "exported_namespace")