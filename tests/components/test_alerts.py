"""Alert rules (components/alerts.py): one valid PrometheusRule per cluster with the rules whose series exist there,
thresholds from `observability.alerts` (run by promtool on rules built from other thresholds), expressions that read only
the series `monitors.METRICS` lists. Every rendered rule file is checked and every alert unit-tested by Prometheus' own
engine in tests/components/test_alert_engines.py."""

from __future__ import annotations

import re
from typing import Any

import promql_parser
import pytest
from alert_engine import passed, run_unit_tests
from engines import engine
from schemas import CrdSchemas, schema_errors
from small_site import full_site

from components import alerts, monitors
from components.config import AlertsConfig, parse_site
from fabctl.render import PROJECT_DIR

DEFAULTS = AlertsConfig()


@pytest.fixture(scope="module")
def full_scopes() -> dict[str, monitors.MetricsScope]:
    return monitors.metrics_scopes(parse_site(full_site()))


def rules_of(scope: monitors.MetricsScope, config: AlertsConfig = DEFAULTS) -> dict[str, dict[str, Any]]:
    """Alert name -> rule, over the cluster's PrometheusRule."""
    return {rule["alert"]: rule for obj in alerts.alert_rules(scope, config) for group in obj["spec"]["groups"] for rule in group["rules"]}


def scope(role: str = "gpu", **fields: Any) -> monitors.MetricsScope:
    return monitors.MetricsScope(site="site-t", cluster="c", role=role, **fields)


def test_every_rule_validates_against_the_prometheusrule_crd(full_scopes, crd_dir):
    objects = [obj for s in full_scopes.values() for obj in alerts.alert_rules(s, DEFAULTS)]
    assert objects
    crds = CrdSchemas(crd_dir)
    assert {o["metadata"]["name"]: e for o in objects if (e := schema_errors(o, crds))} == {}


def test_rules_read_only_the_series_the_monitors_list(full_scopes):
    read = set()
    for s in full_scopes.values():
        for rule in rules_of(s).values():
            promql_parser.walk(promql_parser.parse(rule["expr"]),
                               lambda node: read.add(node.name) if isinstance(node, promql_parser.VectorSelector) else None)
    assert read
    assert read - set(monitors.METRICS) == set()


def test_each_cluster_gets_the_rules_of_what_runs_on_it(full_scopes):
    assert {key: sorted(rules_of(s)) for key, s in full_scopes.items()} == {
        "compute": ["FabCertificateExpiring", "FabGateway5xx", "FabQueueStarved", "FabQuotaExhausted"],
        "gpu": ["FabCertificateExpiring", "FabGateway5xx", "FabGpuXidError", "FabGpuXidHardware", "FabGpusLost", "FabInfinibandPortCongested",
                "FabQueueStarved", "FabQuotaExhausted", "FabRateLimitSaturated"],
        "gpu-train": ["FabGpuXidError", "FabGpuXidHardware", "FabGpusLost", "FabInfinibandPortCongested", "FabQueueStarved", "FabQuotaExhausted"],
        "storage": ["FabPostgresBackupTooOld"],
    }


def test_a_cluster_without_gpus_gets_no_gpu_rules():
    assert not {"FabGpuXidError", "FabGpuXidHardware", "FabGpusLost", "FabInfinibandPortCongested"} & set(rules_of(scope(kueue=True, gateways=("llm",))))


def test_a_cluster_running_nothing_alerted_on_gets_no_prometheus_rule():
    assert alerts.alert_rules(scope(), DEFAULTS) == []


CONFIGURED = {
    "FabGpusLost": (scope(gpu_nodes={"n1": 8, "n2": 4}), DEFAULTS),
    "FabQueueStarved": (scope(kueue=True), AlertsConfig(queue_starvation_minutes=90)),
    "FabCertificateExpiring": (scope(gateways=("llm",)), AlertsConfig(certificate_expiry_days=30)),
    "FabReplicationLag": (scope(role="storage", replicates_to=("site-b",)), AlertsConfig(replication_lag_minutes=45)),
    "FabPostgresBackupTooOld": (scope(role="storage", polaris=True), AlertsConfig(backup_age_hours=30)),
}
"""Rules built from a config other than the defaults, each run by promtool on its cases (tests/alert_cases.py), whose
times and values follow the config: a rule that ignored it fires too early, too late or not at all."""


@pytest.fixture(scope="module")
def configured_reports(tmp_path_factory) -> dict[tuple[str, str], dict[str, str]]:
    prometheuses = {alert: [(obj, s, config) for obj in alerts.alert_rules(s, config)] for alert, (s, config) in CONFIGURED.items()}
    return run_unit_tests(engine("promtool"), tmp_path_factory.mktemp("configured-alerts"), prometheuses)


def configured(alert: str, reports: dict[tuple[str, str], dict[str, str]]) -> dict[str, str]:
    """promtool's reports on the alert built from CONFIGURED, those that did not pass."""
    found = reports[(alert, alert)]
    assert found
    return {test: report for test, report in found.items() if not passed(report)}


def test_the_lost_gpu_rule_expects_each_nodes_gpus_from_config(configured_reports):
    assert configured("FabGpusLost", configured_reports) == {}


def test_queue_starvation_window_comes_from_config(configured_reports):
    assert configured("FabQueueStarved", configured_reports) == {}


def test_gateway_5xx_share_comes_from_config():
    expr = rules_of(scope(gateways=("llm",)), AlertsConfig(gateway_5xx_percent=7.5))["FabGateway5xx"]["expr"]
    assert expr.endswith("[5m])) > 7.5")


def test_certificate_expiry_days_come_from_config(configured_reports):
    assert configured("FabCertificateExpiring", configured_reports) == {}


def test_rate_limit_saturation_percent_reaches_the_description():
    rule = rules_of(scope(global_rate_limits=True, requests_per_minute={"*": 600}),
                    AlertsConfig(rate_limit_saturation_percent=75))["FabRateLimitSaturated"]
    assert "passed 75% of its rate" in rule["annotations"]["description"]


def test_replication_lag_comes_from_config(configured_reports):
    assert configured("FabReplicationLag", configured_reports) == {}


def test_a_storage_cluster_that_replicates_nothing_gets_no_replication_rule():
    assert "FabReplicationLag" not in rules_of(scope(role="storage", polaris=True))


def test_backup_age_comes_from_config(configured_reports):
    assert configured("FabPostgresBackupTooOld", configured_reports) == {}


def all_rules(full_scopes: dict[str, monitors.MetricsScope]) -> dict[str, dict[str, Any]]:
    """Every rule the platform ships: those of the full small site, and replication's (which needs a consumer)."""
    rules = {name: rule for s in full_scopes.values() for name, rule in rules_of(s).items()}
    rules.update(rules_of(scope(role="storage", replicates_to=("site-b",))))
    return rules


def test_every_rule_has_a_severity_and_a_summary(full_scopes):
    rules = all_rules(full_scopes)
    assert rules
    assert {n: r["labels"] for n, r in rules.items()
            if r["labels"]["severity"] not in ("warning", "critical") or not r["annotations"]["summary"]} == {}


def test_every_rule_links_its_runbook_section_in_operations(full_scopes):
    doc = (PROJECT_DIR / "docs" / "operations.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
               for line in doc.splitlines() if line.startswith("#")}
    links = {name: rule["annotations"]["runbook_url"] for name, rule in all_rules(full_scopes).items()}
    assert links
    assert {name: url for name, url in links.items() if f"docs/operations.md#{url.partition('#')[2]}" != url
            or url.partition("#")[2] not in anchors} == {}
