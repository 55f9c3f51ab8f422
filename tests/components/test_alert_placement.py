"""Where alert rules run and what they select (issue 19, "Alerts"): every platform rule reads one cluster's series by its
`cluster` label; while metrics is in-cluster compute's Prometheus, which holds the site's series, evaluates every rule
and alone runs the chart's default rules and an Alertmanager; with the site's store each cluster evaluates its own.
What each alert does (XID alerts fire on a new XID, hardware XIDs as critical...) is run by promtool in
tests/components/test_alert_engines.py."""

from __future__ import annotations

from typing import Any

import promql_parser
import pytest
from helpers import config_errors, render_small
from small_site import METRICS_PASSWORD, STORE, add_observability, full_site, small_site

from components import alerts, monitors
from components.config import AlertsConfig, parse_site
from fabctl.render import HELM_RELEASE_TYPE

DEFAULTS = AlertsConfig()
COMPONENT = "fab:observability:SiteObservability"
DROPPED = [{"sourceLabels": ["__name__"], "regex": "ALERTS|ALERTS_FOR_STATE|prometheus_notifications_alertmanagers_discovered",
            "action": "drop"}]


def scope(role: str = "gpu", **fields: Any) -> monitors.MetricsScope:
    return monitors.MetricsScope(site="site-t", cluster="c", role=role, **fields)


def rules_of(s: monitors.MetricsScope) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for obj in alerts.alert_rules(s, DEFAULTS) for group in obj["spec"]["groups"] for rule in group["rules"]}


def stack_releases(plan) -> dict[str, dict]:
    return {plan.cluster(r): r["inputs"] for r in plan.of_type(HELM_RELEASE_TYPE) if r["inputs"]["chart"] == "kube-prometheus-stack"}


def registered(plan, kind: str) -> set[tuple[str, str]]:
    """(cluster, namespace/name) of the objects of a kind the metrics component registered."""
    return {(plan.cluster(r), f"{r['inputs']['metadata']['namespace']}/{r['inputs']['metadata']['name']}")
            for r in plan.resources if r["type"].endswith(f":{kind}") and r["urn"].count(COMPONENT)}


GPU_SCOPE = scope(gpu_nodes={"n1": 8})


@pytest.fixture(scope="module")
def full_scopes() -> dict[str, monitors.MetricsScope]:
    return monitors.metrics_scopes(parse_site(full_site()))


def every_rule(scopes: dict[str, monitors.MetricsScope]) -> list[tuple[monitors.MetricsScope, dict[str, Any]]]:
    return [(s, rule) for s in scopes.values() for rule in rules_of(s).values()]


def nodes(expr: str, kind: type) -> list[Any]:
    found: list[Any] = []
    promql_parser.walk(promql_parser.parse(expr), lambda node: found.append(node) if isinstance(node, kind) else None)
    return found


def test_every_selector_matches_its_clusters_name(full_scopes):
    selectors = {(s.cluster, rule["alert"], str(node)): node for s, rule in every_rule(full_scopes)
                 for node in nodes(rule["expr"], promql_parser.VectorSelector)}
    assert selectors
    assert {key for key, node in selectors.items()
            if f'cluster="{full_scopes[key[0]].name}"' not in str(node)} == set()


def test_every_aggregation_keeps_the_cluster(full_scopes):
    grouped = {(s.cluster, rule["alert"], str(node)): node for s, rule in every_rule(full_scopes)
               for node in nodes(rule["expr"], promql_parser.AggregateExpr)}
    assert grouped
    assert {key for key, node in grouped.items() if "cluster" not in (node.modifier.labels if node.modifier else [])} == set()


def test_every_alert_is_labelled_with_its_clusters_name(full_scopes):
    labels = {(s.cluster, rule["alert"]): rule["labels"]["cluster"] for s, rule in every_rule(full_scopes)}
    assert labels
    assert {key for key, cluster in labels.items() if cluster != f"site-t-{key[0]}"} == set()


def test_each_clusters_rule_is_named_by_its_key():
    (rule,) = alerts.alert_rules(GPU_SCOPE, DEFAULTS)
    assert (rule["metadata"]["name"], [group["name"] for group in rule["spec"]["groups"]]) == ("fab-platform-alerts-c", ["fab-c-gpu", "fab-c-infiniband"])


@pytest.fixture(scope="module")
def in_cluster():
    site = small_site()
    add_observability(site)
    return render_small(site)


@pytest.fixture(scope="module")
def remote_write():
    site = small_site()
    add_observability(site, "remote-write", remote_write={**STORE, "username": "site-t"})
    return render_small(site, secrets=METRICS_PASSWORD)


def test_in_cluster_compute_evaluates_every_clusters_rules(in_cluster):
    assert set(registered(in_cluster, "PrometheusRule")) == {
        ("site-t-compute", f"monitoring/fab-platform-alerts-{key}") for key in ("compute", "gpu", "storage")}


def test_remote_write_each_cluster_evaluates_its_own_rules(remote_write):
    assert set(registered(remote_write, "PrometheusRule")) == {
        (f"site-t-{key}", f"monitoring/fab-platform-alerts-{key}") for key in ("compute", "gpu", "storage")}


def test_in_cluster_only_compute_runs_the_charts_default_rules(in_cluster):
    assert {c: r["values"]["defaultRules"]["create"] for c, r in stack_releases(in_cluster).items()} == {
        "site-t-compute": True, "site-t-gpu": False, "site-t-storage": False}


def test_in_cluster_only_compute_runs_an_alertmanager(in_cluster):
    assert {c: r["values"]["alertmanager"].get("enabled", True) for c, r in stack_releases(in_cluster).items()} == {
        "site-t-compute": True, "site-t-gpu": False, "site-t-storage": False}


def test_in_cluster_the_other_clusters_keep_alert_states_out_of_their_remote_write(in_cluster):
    writes = {c: r["values"]["prometheus"]["prometheusSpec"]["remoteWrite"] for c, r in stack_releases(in_cluster).items()}
    assert {c: [w.get("writeRelabelConfigs") for w in targets] for c, targets in writes.items()} == {
        "site-t-compute": [], "site-t-gpu": [DROPPED], "site-t-storage": [DROPPED]}


def test_remote_write_every_cluster_runs_the_default_rules_and_an_alertmanager(remote_write):
    assert {c: (r["values"]["defaultRules"]["create"], r["values"]["alertmanager"].get("enabled", True))
            for c, r in stack_releases(remote_write).items()} == dict.fromkeys(
        ("site-t-compute", "site-t-gpu", "site-t-storage"), (True, True))


def test_remote_write_forwards_every_series(remote_write):
    writes = [w for r in stack_releases(remote_write).values() for w in r["values"]["prometheus"]["prometheusSpec"]["remoteWrite"]]
    assert writes
    assert [w for w in writes if "writeRelabelConfigs" in w] == []


def test_alertmanager_inhibits_alerts_only_within_their_cluster(in_cluster):
    inhibit = stack_releases(in_cluster)["site-t-compute"]["values"]["alertmanager"]["config"]["inhibit_rules"]
    assert [rule.get("equal") for rule in inhibit] == [
        ["cluster", "namespace", "alertname"], ["cluster", "namespace", "alertname"], ["cluster", "namespace"], None]


def test_alertmanager_groups_alerts_by_cluster(in_cluster):
    route = stack_releases(in_cluster)["site-t-compute"]["values"]["alertmanager"]["config"]["route"]
    assert route["group_by"] == ["cluster", "namespace"]


def test_fails_when_the_webhook_url_is_written_in_plain_config():
    site = small_site()
    add_observability(site, alerts={"webhook_url": "https://alerts.site-t.fab.internal/hook?token=t0ken"})
    assert config_errors(site) == [(
        "fab-platform:site.observability.alerts.webhook_url: unknown key; allowed keys: backup_age_hours, "
        "certificate_expiry_days, gateway_5xx_percent, infiniband_xmit_wait_per_second, queue_starvation_minutes, "
        "rate_limit_saturation_percent, replication_lag_minutes")]
