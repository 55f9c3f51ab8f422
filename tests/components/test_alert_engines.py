"""The alert rules and Alertmanager configuration the program renders, run by Prometheus' and Alertmanager's own engines
(issue 36): `promtool check rules` on every rule file of both stacks (the platform's PrometheusRules and those the
kube-prometheus-stack chart renders) and of the small sites with the metrics stack, `promtool test rules` on every
platform alert with the cases of tests/alert_cases.py (fires, with the labels and annotations routed and
shown; silent while healthy; silent after recovery), `amtool check-config` on the Alertmanager configuration the chart
writes from the program's values, and `amtool config routes test` on where each alert goes.

One promtool run per stack and kind of check (tests/alert_engine.py); the engines come from tests/engines.py.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from alert_cases import CASES
from alert_engine import amtool, passed, promtool, rule_alerts, run_unit_tests, write_rule_file
from engines import engine
from helpers import STACKS, render_small, rendered, site_raw
from small_site import METRICS_PASSWORD, STORE, add_observability, small_site

from components import monitors
from components.alerts import RULE_NAME
from components.config import parse_site
from fabctl.helm import ChartPackages, ChartRef, releases, template
from fabctl.render import PROJECT_DIR, Plan

RULE_TYPE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
WEBHOOK = {"fab-platform:alertWebhookUrl": {"secure": "v1:aHR0cHM6Ly9hbGVydHMuc2l0ZS10LmZhYi5pbnRlcm5hbC9ob29r"}}
"""The secret alert hub URL, as tests/components/test_observability.py sets it (the same render, shared)."""


def _in_cluster() -> dict[str, Any]:
    site = small_site()
    add_observability(site)
    return site


def _remote_write() -> dict[str, Any]:
    site = small_site()
    add_observability(site, "remote-write", remote_write={**STORE, "username": "site-t"})
    return site


SMALL = {"small-in-cluster": (_in_cluster, WEBHOOK), "small-remote-write": (_remote_write, METRICS_PASSWORD)}
"""The small sites with the metrics stack (as tests/components/test_alert_placement.py and test_observability.py render
them): the smallest and the full small site have none, so no rule."""


def render_of(name: str) -> tuple[Plan, dict[str, Any]]:
    """A render by name (a stack, or a small site of SMALL) and the raw site object it was rendered from."""
    if name in STACKS:
        return rendered(name), site_raw(name)
    build, secrets = SMALL[name]
    site = build()
    return render_small(site, secrets=secrets), site


RENDERS = (*STACKS, *SMALL)


def prometheuses(name: str) -> dict[str, list[tuple[dict[str, Any], monitors.MetricsScope, Any]]]:
    """Per Prometheus (its cluster) of a render: the platform's PrometheusRules it evaluates, each with the scope of the
    cluster whose series it reads (`fab-platform-alerts-<key>`) and the thresholds of the config."""
    plan, raw = render_of(name)
    site = parse_site(raw)
    scopes = monitors.metrics_scopes(site)
    found: dict[str, list[tuple[dict[str, Any], monitors.MetricsScope, Any]]] = {}
    for resource in plan.of_type(RULE_TYPE):
        obj = {"metadata": resource["inputs"]["metadata"], "spec": resource["inputs"]["spec"]}
        key = obj["metadata"]["name"].removeprefix(f"{RULE_NAME}-")
        found.setdefault(f"{name}--{plan.cluster(resource)}", []).append((obj, scopes[key], site.observability.alerts))
    return found


@pytest.fixture(scope="module")
def promtool_bin() -> Path:
    return engine("promtool")


@pytest.fixture(scope="module")
def amtool_bin() -> Path:
    return engine("amtool")


@pytest.fixture(scope="module")
def unit_reports(promtool_bin, tmp_path_factory) -> dict[tuple[str, str], dict[str, str]]:
    """(Prometheus, alert) -> promtool's report on the alert's cases, for every Prometheus of both stacks: one run. (The
    small sites' rule files are the same rules with the default thresholds: they are checked, not run again.)"""
    every = {where: objs for name in STACKS for where, objs in prometheuses(name).items()}
    return run_unit_tests(promtool_bin, tmp_path_factory.mktemp("alert-unit-tests"), every)


def test_every_shipped_alert_has_a_unit_test():
    shipped = {alert for name in RENDERS for objs in prometheuses(name).values() for obj, _, _ in objs for alert in rule_alerts(obj)}
    assert shipped
    assert (sorted(shipped - set(CASES)), sorted(set(CASES) - shipped)) == ([], [])


@pytest.mark.parametrize("alert", sorted(CASES))
def test_alert_fires_routes_and_clears_in_prometheus(alert, unit_reports):
    reports = {test: report for (_, name), tests in unit_reports.items() if name == alert for test, report in tests.items()}
    assert reports, f"no render ships {alert}"
    assert {test: report for test, report in reports.items() if not passed(report)} == {}


def test_every_platform_rule_file_passes_promtool_check(promtool_bin, tmp_path):
    files = [write_rule_file(tmp_path / where, obj) for name in RENDERS for where, objs in prometheuses(name).items()
             for obj, _, _ in objs]
    assert files
    code, sections, output = promtool(promtool_bin, "check rules", files, tmp_path)
    assert (code, {f.name: sections.get(f.name) for f in files if not passed(sections.get(f.name))}) == (0, {}), output


@pytest.mark.parametrize("stack", STACKS)
def test_every_rule_file_the_charts_render_passes_promtool_check(stack, promtool_bin, releases_of, tmp_path):
    done, _ = releases_of(stack)
    files = [write_rule_file(tmp_path / f"{r.cluster}-{r.release['name']}", obj)
             for r in done for obj in r.objects if obj.get("kind") == "PrometheusRule"]
    assert files, "no chart renders a PrometheusRule"
    code, sections, output = promtool(promtool_bin, "check rules", files, tmp_path)
    failed = {f"{f.parent.name}/{f.name}": sections.get(f.name) for f in files if not passed(sections.get(f.name))}
    assert (code, failed) == (0, {name: CHART_LINT[Path(name).name] for name in failed if Path(name).name in CHART_LINT}), output


CHART_LINT = {"monitoring-metrics-kube-apiserver-availability.rules.yaml": (
    "  FAILED:\nlint error 1 duplicate rule(s) found.\nMetric: code_verb:apiserver_request_total:increase1h\nLabel(s):\n"
    "Might cause inconsistency while recording expressions\n\n")}
"""promtool's lint findings on the chart's default rules (not errors: its exit status stays 0), known upstream:
kubernetes-mixin records code_verb:apiserver_request_total:increase1h twice in one group, once per verb class
(kubernetes-sigs/kubernetes-mixin#875 and prometheus-community/helm-charts#3879, both closed unmerged). Any other finding
fails."""


def test_fails_when_a_case_expects_what_the_rule_does_not_do(promtool_bin, tmp_path):
    """The harness reports a rule that misbehaves: the certificate rule with a threshold of 0 days never fires."""
    where, objs = next(iter(prometheuses("site-a").items()))
    broken = []
    for obj, scope, alerts in objs:
        obj = yaml.safe_load(yaml.safe_dump(obj))
        for group in obj["spec"]["groups"]:
            for rule in group["rules"]:
                if rule["alert"] == "FabCertificateExpiring":
                    rule["expr"] = rule["expr"].rpartition("<")[0] + "< 0"
        broken.append((obj, scope, alerts))
    reports = run_unit_tests(promtool_bin, tmp_path, {where: broken}, only=("FabCertificateExpiring", "FabGateway5xx"))
    assert {report.strip().partition(":")[0] for report in reports[(where, "FabCertificateExpiring")].values()} == {"FAILED"}
    assert all(map(passed, reports[(where, "FabGateway5xx")].values()))


# --- Alertmanager: the configuration the kube-prometheus-stack chart writes (Secret alertmanager-metrics-alertmanager,
# key alertmanager.yaml) from the program's `alertmanager.config` values, rendered by Helm.

def alertmanager_configs(plan: Plan, chart_dir: Path, helm: Path) -> dict[str, str]:
    """Cluster -> the alertmanager.yaml the chart renders for it (only where an Alertmanager runs)."""
    packages = ChartPackages(chart_dir)
    found = {}
    for release in releases(plan):
        if release["inputs"]["chart"] != "kube-prometheus-stack":
            continue
        if release["inputs"]["values"].get("alertmanager", {}).get("enabled") is False:
            continue

        objects = template(release, packages.find(ChartRef.of(release)), helm, PROJECT_DIR)
        (secret,) = [o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == "alertmanager-metrics-alertmanager"]
        found[plan.cluster(release)] = base64.b64decode(secret["data"]["alertmanager.yaml"]).decode()
    return found


def amtool_version(binary: Path) -> tuple[int, ...]:
    match = re.search(r"version (\d+)\.(\d+)", amtool(binary, "--version").stdout)
    assert match, "amtool --version says no version"
    return tuple(map(int, match.groups()))


URL_FILE_SINCE = (0, 26)
"""Alertmanager reads a webhook's URL from a file (`url_file`, how the program keeps the hub's URL out of values) since
0.26; Debian 12's amtool is 0.25 and refuses the field ("field url_file not found"), the chart's Alertmanager knows it."""


def for_amtool(text: str, version: tuple[int, ...]) -> str:
    """The configuration as an older amtool can read it: a webhook's `url_file` becomes a `url` naming the file (the only
    field the program sets that 0.25 lacks); unchanged for a newer amtool."""
    if version >= URL_FILE_SINCE:
        return text
    config = yaml.safe_load(text)
    for receiver in config.get("receivers", []):
        for hook in receiver.get("webhook_configs", []):
            if "url_file" in hook:
                hook["url"] = f"http://url-file.invalid{hook.pop('url_file')}"
    return yaml.safe_dump(config, sort_keys=False)


@pytest.fixture(scope="module")
def am_rendered(chart_dir, helm) -> dict[str, str]:
    """`<render>--<cluster>` -> the alertmanager.yaml the chart writes: both stacks and the small site alerting to a
    webhook."""
    return {f"{name}--{cluster}": text for name in (*STACKS, "small-in-cluster")
            for cluster, text in alertmanager_configs(render_of(name)[0], chart_dir, helm).items()}


@pytest.fixture(scope="module")
def am_configs(am_rendered, amtool_bin, tmp_path_factory) -> dict[str, Path]:
    """The same, written out for amtool (`for_amtool`)."""
    folder = tmp_path_factory.mktemp("alertmanager")
    version = amtool_version(amtool_bin)
    paths = {}
    for key, text in am_rendered.items():
        paths[key] = path = folder / f"{key}.yaml"
        path.write_text(for_amtool(text, version))
    return paths


def test_the_webhook_url_is_read_from_the_mounted_secret(am_rendered):
    config = yaml.safe_load(am_rendered["small-in-cluster--site-t-compute"])
    assert [r.get("webhook_configs") for r in config["receivers"]] == [
        [{"url_file": "/etc/alertmanager/secrets/alert-webhook/url", "send_resolved": True}], None]


def test_every_alertmanager_configuration_passes_amtool_check(amtool_bin, am_configs):
    assert am_configs
    run = amtool(amtool_bin, "check-config", *map(str, am_configs.values()))
    checked = re.findall(r"^Checking '(.+?)'\s+SUCCESS$", run.stdout, re.M)
    assert (run.returncode, sorted(checked)) == (0, sorted(map(str, am_configs.values()))), run.stdout


def routed(amtool_bin: Path, config: Path, labels: dict[str, str]) -> str:
    run = amtool(amtool_bin, "config", "routes", "test", f"--config.file={config}", *(f"{k}={v}" for k, v in labels.items()))
    assert run.returncode == 0, run.stdout
    return run.stdout.strip().splitlines()[-1]  # after amtool's warning that --config.file overrides --alertmanager.url


def test_every_platform_alert_goes_to_the_webhook_and_watchdog_nowhere(amtool_bin, am_configs):
    config = am_configs["small-in-cluster--site-t-compute"]
    alerts = {alert: {"alertname": alert, **rule["labels"]} for objs in prometheuses("site-a").values() for obj, _, _ in objs
              for alert, rule in rule_alerts(obj).items()}
    assert set(alerts) == set(CASES)
    got = {alert: routed(amtool_bin, config, labels) for alert, labels in sorted(alerts.items())}
    got["Watchdog"] = routed(amtool_bin, config, {"alertname": "Watchdog", "severity": "none"})
    assert got == {**dict.fromkeys(alerts, "webhook"), "Watchdog": "null"}


def test_without_a_webhook_alerts_stay_in_alertmanager(amtool_bin, am_configs):
    config = am_configs["site-a--site-a-compute"]
    assert routed(amtool_bin, config, {"alertname": "FabGpusLost", "severity": "critical", "cluster": "site-a-gpu"}) == "null"
