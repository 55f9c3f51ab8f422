"""SiteObservability: one kube-prometheus-stack release per cluster, where each Prometheus writes its series, compute's
receiver and Grafana, and the manifests it registers after the chart; read from renders of small sites under mocks."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers import render_small
from small_site import METRICS_PASSWORD, RECEIVER_VIP, STORE, add_gpu_cluster, add_observability, small_site

from components.observability import GrafanaSettings, logical_suffix
from fabctl.render import HELM_RELEASE_TYPE, render_config
from fabctl.stackfile import SITE_KEY

CLUSTERS = ("site-t-compute", "site-t-gpu", "site-t-storage")
PROGRAM = Path(__file__).resolve().parent.parent / "programs" / "observability_objects"
COMPONENT = "fab:observability:SiteObservability"


def in_cluster_site(**settings) -> dict:
    site = small_site()
    add_observability(site, **settings)
    return site


@pytest.fixture(scope="module")
def in_cluster():
    return render_small(in_cluster_site())


@pytest.fixture(scope="module")
def remote_write():
    site = small_site()
    add_observability(site, "remote-write", remote_write={**STORE, "username": "site-t"})
    return render_small(site, secrets=METRICS_PASSWORD)


def stack_releases(plan) -> dict[str, dict]:
    return {plan.cluster(r): r["inputs"] for r in plan.of_type(HELM_RELEASE_TYPE) if r["inputs"]["chart"] == "kube-prometheus-stack"}


def prometheus(plan, cluster: str) -> dict:
    return stack_releases(plan)[cluster]["values"]["prometheus"]["prometheusSpec"]


def test_every_cluster_runs_one_pinned_release_in_the_monitoring_namespace(in_cluster):
    releases = stack_releases(in_cluster)
    assert {c: (r["name"], r["namespace"], r["version"]) for c, r in releases.items()} == dict.fromkeys(
        CLUSTERS, ("metrics", "monitoring", "88.5.3"))


def test_a_site_without_observability_runs_no_metrics_stack(small_plan):
    assert stack_releases(small_plan) == {}


def test_prometheus_keeps_its_series_for_the_retention_on_a_volume_that_outlives_the_release():
    spec = prometheus(render_small(in_cluster_site(retention_days=30, storage_gib=200)), "site-t-gpu")
    assert (spec["retention"], spec["storageSpec"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"],
            spec["persistentVolumeClaimRetentionPolicy"]) == ("30d", "200Gi", {"whenDeleted": "Retain", "whenScaled": "Retain"})


def test_every_prometheus_labels_its_series_with_its_site_and_cluster(in_cluster):
    labels = {c: prometheus(in_cluster, c)["externalLabels"] for c in CLUSTERS}
    assert labels == {c: {"site": "site-t", "cluster": c} for c in CLUSTERS}


def test_every_prometheus_selects_every_monitor_and_rule_without_a_label(in_cluster):
    spec = prometheus(in_cluster, "site-t-storage")
    assert [spec[f"{kind}SelectorNilUsesHelmValues"] for kind in ("serviceMonitor", "podMonitor", "rule")] == [False] * 3


def test_in_cluster_every_other_cluster_writes_to_the_receiver_vip(in_cluster):
    targets = {c: [w["url"] for w in prometheus(in_cluster, c)["remoteWrite"]] for c in CLUSTERS}
    assert targets == {"site-t-compute": [], "site-t-gpu": [f"http://{RECEIVER_VIP}:9090/api/v1/write"],
                       "site-t-storage": [f"http://{RECEIVER_VIP}:9090/api/v1/write"]}


def test_in_cluster_only_computes_prometheus_receives(in_cluster):
    assert {c: prometheus(in_cluster, c)["enableRemoteWriteReceiver"] for c in CLUSTERS} == {
        "site-t-compute": True, "site-t-gpu": False, "site-t-storage": False}


def test_the_receiver_is_a_local_load_balancer_at_its_vip_in_computes_internal_pool(in_cluster):
    (service,) = [s for s in in_cluster.objects("Service", "site-t-compute") if s["metadata"]["name"] == "prometheus-receiver"]
    assert (service["metadata"]["labels"], service["metadata"]["annotations"], service["spec"]["externalTrafficPolicy"],
            service["spec"]["ports"][0]["port"]) == (
        {"lb.fab.internal/pool": "internal"}, {"lbipam.cilium.io/ips": RECEIVER_VIP}, "Local", 9090)


def test_remote_write_every_cluster_writes_to_the_store(remote_write):
    targets = {c: [w["url"] for w in prometheus(remote_write, c)["remoteWrite"]] for c in CLUSTERS}
    assert targets == {c: [STORE["url"]] for c in CLUSTERS}


def test_remote_write_has_no_receiver(remote_write):
    assert [s for s in remote_write.objects("Service") if s["metadata"]["name"] == "prometheus-receiver"] == []
    assert {c: prometheus(remote_write, c)["enableRemoteWriteReceiver"] for c in CLUSTERS} == dict.fromkeys(CLUSTERS, False)


def test_the_stores_password_is_in_a_secret_on_every_cluster_never_in_values(remote_write):
    secrets = {c: s for c, s, r in remote_write.manifests() if s["kind"] == "Secret" and s["metadata"]["name"] == "metrics-remote-write"}
    (write,) = prometheus(remote_write, "site-t-gpu")["remoteWrite"]
    assert sorted(secrets) == sorted(CLUSTERS)
    assert write["basicAuth"] == {"username": {"name": "metrics-remote-write", "key": "username"},
                                  "password": {"name": "metrics-remote-write", "key": "password"}}


WEBHOOK = {"fab-platform:alertWebhookUrl": {"secure": "v1:aHR0cHM6Ly9hbGVydHMuc2l0ZS10LmZhYi5pbnRlcm5hbC9ob29r"}}


@pytest.fixture(scope="module")
def with_webhook():
    return render_small(in_cluster_site(), secrets=WEBHOOK)


def test_alerts_go_to_the_webhook_read_from_its_mounted_secret(with_webhook):
    values = stack_releases(with_webhook)["site-t-compute"]["values"]["alertmanager"]
    assert (values["config"]["route"]["receiver"], values["config"]["receivers"][0], values["alertmanagerSpec"]["secrets"]) == (
        "webhook", {"name": "webhook", "webhook_configs": [{"url_file": "/etc/alertmanager/secrets/alert-webhook/url",
                                                           "send_resolved": True}]}, ["alert-webhook"])


def test_the_webhook_url_is_in_a_secret_beside_the_alertmanager_never_in_values(with_webhook):
    secrets = [r for r in with_webhook.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == "alert-webhook"]
    assert [(with_webhook.cluster(r), r["inputs"]["metadata"]["namespace"]) for r in secrets] == [("site-t-compute", "monitoring")]
    assert "alerts.site-t.fab.internal" not in json.dumps([r["inputs"] for r in with_webhook.of_type(HELM_RELEASE_TYPE)])


def test_alerts_stay_in_alertmanager_without_a_webhook(in_cluster):
    config = stack_releases(in_cluster)["site-t-compute"]["values"]["alertmanager"]["config"]
    assert (config["route"]["receiver"], config["receivers"]) == ("null", [{"name": "null"}])


def test_kube_state_metrics_exposes_the_gpu_pool_and_type_and_the_team(in_cluster):
    values = stack_releases(in_cluster)["site-t-gpu"]["values"]["kube-state-metrics"]
    assert values["metricLabelsAllowlist"] == [
        "nodes=[fab.internal/gpu-pool,fab.internal/gpu-type]", "namespaces=[fab.internal/team]", "cronjobs=[fab.internal/profile]",
    ]


def test_node_exporter_runs_on_every_node_in_its_allow_listed_privileged_namespace(in_cluster):
    values = stack_releases(in_cluster)["site-t-gpu"]["values"]["prometheus-node-exporter"]
    (namespace,) = [n for n in in_cluster.objects("Namespace", "site-t-gpu") if n["metadata"]["name"] == "node-exporter"]
    assert (values["namespaceOverride"], values["tolerations"], namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]) == (
        "node-exporter", [{"operator": "Exists"}], "privileged")


def test_grafana_runs_only_on_compute(in_cluster):
    assert {c: r["values"]["grafana"]["enabled"] for c, r in stack_releases(in_cluster).items()} == {
        "site-t-compute": True, "site-t-gpu": False, "site-t-storage": False}


def test_grafana_is_behind_the_compute_ingress_at_its_own_host(in_cluster):
    (route,) = [r for r in in_cluster.objects("HTTPRoute", "site-t-compute") if r["metadata"]["name"] == "grafana"]
    assert (route["metadata"]["namespace"], route["spec"]["hostnames"], route["spec"]["parentRefs"][0]["sectionName"]) == (
        "monitoring", ["grafana.site-t.fab.internal"], "grafana")
    assert in_cluster.outputs["ui_urls"]["grafana"] == "https://grafana.site-t.fab.internal"


def test_grafana_signs_in_through_keycloak_only(in_cluster):
    ini = stack_releases(in_cluster)["site-t-compute"]["values"]["grafana"]["grafana.ini"]
    oauth = ini["auth.generic_oauth"]
    assert (ini["auth"]["disable_login_form"], ini["auth.basic"]["enabled"], oauth["use_pkce"], oauth["role_attribute_strict"],
            oauth["auth_url"]) == (True, False, True, True, "https://keycloak.site-t.fab.internal/realms/fab/protocol/openid-connect/auth")


def test_grafana_sends_everyone_to_keycloak_without_the_deprecated_setting(in_cluster):
    ini = stack_releases(in_cluster)["site-t-compute"]["values"]["grafana"]["grafana.ini"]
    assert (ini["auth.generic_oauth"]["auto_login"], ini["auth"]) == (True, {"disable_login_form": True})


def test_grafanas_data_source_is_computes_prometheus_while_in_cluster(in_cluster):
    values = stack_releases(in_cluster)["site-t-compute"]["values"]["grafana"]
    assert (values["sidecar"]["datasources"]["defaultDatasourceEnabled"], "additionalDataSources" in values) == (True, False)


def test_platform_admins_administer_grafana_and_teams_view():
    settings = GrafanaSettings(domain="d", issuer="i", admin_group="platform-admins", viewer_groups=("team-fdc", "team-yield"),
                               query_url="http://q", remote_store=False, basic_auth_user=None)
    assert settings.role_attribute_path() == (
        "contains(groups[*], 'platform-admins') && 'Admin' || (contains(groups[*], 'team-fdc') || "
        "contains(groups[*], 'team-yield')) && 'Viewer'")


def test_grafanas_data_source_is_the_store_while_remote_write(remote_write):
    values = stack_releases(remote_write)["site-t-compute"]["values"]["grafana"]
    (source,) = values["additionalDataSources"]
    assert (values["sidecar"]["datasources"]["defaultDatasourceEnabled"], source["url"], source["basicAuthUser"]) == (
        False, STORE["query_url"], "site-t")


def test_without_grafana_there_is_no_route_and_no_listener():
    plan = render_small(in_cluster_site(grafana=False))
    (gateway,) = [g for g in plan.objects("Gateway", "site-t-compute") if g["metadata"]["name"] == "compute"]
    assert [r for r in plan.objects("HTTPRoute") if r["metadata"]["name"] == "grafana"] == []
    assert "grafana" not in [listener["name"] for listener in gateway["spec"]["listeners"]]


def test_adding_a_cluster_replaces_nothing_of_the_others():
    def names(plan) -> set[str]:
        return {r["urn"] for r in plan.resources if COMPONENT in r["urn"]}

    site = in_cluster_site()
    grown = copy.deepcopy(site)
    add_gpu_cluster(grown, "gpu-train")
    before, after = names(render_small(site)), names(render_small(grown))
    assert before
    assert before <= after


@pytest.fixture(scope="module")
def objects_plan():
    return render_config("site-t", {SITE_KEY: in_cluster_site(grafana=False)}, project_dir=PROGRAM)


def test_manifests_are_registered_on_their_cluster_named_by_kind_and_name(objects_plan):
    registered = {(objects_plan.cluster(r), r["name"]) for r in objects_plan.resources
                  if r["custom"] and r.get("parent", "").endswith("::observability") and r["inputs"].get("kind") in (
                      "ServiceMonitor", "PrometheusRule", "ConfigMap")}
    assert registered == {("site-t-gpu", "observability-gpu-servicemonitor-kueue-system-kueue"),
                          ("site-t-gpu", "observability-gpu-rule-fab-gpu"),
                          ("site-t-compute", "observability-compute-dashboard-fab-gpu-use")}


def test_manifests_wait_for_the_release_that_installs_their_crds(objects_plan):
    (monitor,) = [r for r in objects_plan.resources if r["name"] == "observability-gpu-servicemonitor-kueue-system-kueue"]
    assert [u.rsplit("::", 1)[-1] for u in monitor["dependencies"]] == ["observability-gpu-stack"]


def test_a_manifests_logical_name_leaves_out_the_monitoring_namespace():
    obj = {"kind": "PrometheusRule", "metadata": {"name": "fab-queues", "namespace": "monitoring"}}
    assert logical_suffix(obj) == "rule-fab-queues"


def registered(plan, kind: str) -> dict[tuple[str, str], dict]:
    """(cluster, namespace/name) -> inputs of the objects of a kind the metrics component registered."""
    return {(plan.cluster(r), f"{r['inputs']['metadata']['namespace']}/{r['inputs']['metadata']['name']}"): r["inputs"]
            for r in plan.resources if r["type"].endswith(f":{kind}") and r["urn"].count(COMPONENT)}


def test_each_cluster_gets_the_scrape_targets_of_what_runs_on_it(in_cluster):
    monitors = {*registered(in_cluster, "ServiceMonitor"), *registered(in_cluster, "PodMonitor")}
    assert ("site-t-storage", "aistor/aistor") in monitors
    assert ("site-t-gpu", "monitoring/vllm") in monitors
    assert not any(cluster != "site-t-storage" and name == "aistor/aistor" for cluster, name in monitors)


def test_the_dashboards_go_to_computes_grafana_only(in_cluster):
    dashboards = {key for key, obj in registered(in_cluster, "ConfigMap").items()
                  if obj["metadata"].get("labels", {}).get("grafana_dashboard") == "1"}
    assert dashboards
    assert {cluster for cluster, _ in dashboards} == {"site-t-compute"}


def test_without_grafana_no_dashboard_is_registered():
    plan = render_small(in_cluster_site(grafana=False))
    assert [key for key, obj in registered(plan, "ConfigMap").items()
            if obj["metadata"].get("labels", {}).get("grafana_dashboard") == "1"] == []


def test_storage_makes_the_token_aistors_monitor_presents(in_cluster):
    (secret,) = [r for r in in_cluster.of_type("kubernetes:core/v1:Secret")
                 if r["inputs"]["metadata"]["name"] == "aistor-metrics-token"]
    assert (in_cluster.cluster(secret), secret["inputs"]["metadata"]["namespace"]) == ("site-t-storage", "aistor")
    (user,) = [r for r in in_cluster.of_type("minio:index/iamUser:IamUser") if r["inputs"]["name"] == "fab-metrics"]
    assert user


def test_a_site_without_observability_has_no_metrics_principal(small_plan):
    assert [r for r in small_plan.of_type("minio:index/iamUser:IamUser") if r["inputs"]["name"] == "fab-metrics"] == []


def test_alertmanager_keeps_its_silences_on_a_volume(in_cluster):
    spec = stack_releases(in_cluster)["site-t-compute"]["values"]["alertmanager"]["alertmanagerSpec"]
    assert spec["storage"]["volumeClaimTemplate"]["spec"]["resources"] == {"requests": {"storage": "1Gi"}}


def test_the_monitoring_namespace_outlives_the_stack_with_the_prometheus_volume(in_cluster):
    namespaces = [r for r in in_cluster.of_type("kubernetes:core/v1:Namespace")
                  if r["inputs"]["metadata"]["name"] == "monitoring"]
    assert namespaces
    assert all(r["retain_on_delete"] for r in namespaces)


PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus", "operator.prometheus.io/name": "metrics-prometheus"}


def _to_prometheus(plan, source, port=9090):
    from cilium_engine import admitted, pod

    return admitted(plan, pod("site-t-compute", "monitoring", PROMETHEUS_POD), source, port)


def test_the_other_clusters_prometheus_write_to_computes(in_cluster):
    from cilium_engine import pod

    assert _to_prometheus(in_cluster, pod("site-t-gpu", "monitoring", PROMETHEUS_POD)).admitted


def test_grafana_and_the_acceptance_jobs_query_computes_prometheus(in_cluster):
    from cilium_engine import pod

    grafana = pod("site-t-compute", "monitoring", {"app.kubernetes.io/name": "grafana"})
    verify = pod("site-t-compute", "fab-verify", {"fab.internal/verify": "03-serving"})
    assert (_to_prometheus(in_cluster, grafana).admitted, _to_prometheus(in_cluster, verify).admitted) == (True, True)


def test_alertmanager_cannot_write_to_computes_prometheus(in_cluster):
    """Only Prometheus and Grafana of the monitoring namespace: the fence names pods, not the namespace."""
    from cilium_engine import pod

    verdict = _to_prometheus(in_cluster, pod("site-t-compute", "monitoring", {"app.kubernetes.io/name": "alertmanager"}))
    assert (verdict.admitted, verdict.why) == (False, "denied by prometheus")


def _to_gpu_prometheus(plan, source):
    from cilium_engine import admitted, pod

    return admitted(plan, pod("site-t-gpu", "monitoring", PROMETHEUS_POD), source, 9090)


def test_a_team_cannot_query_another_clusters_prometheus(in_cluster):
    """Every cluster's Prometheus holds its teams' series (their pods', their jobs' GPUs): fenced on every cluster."""
    from cilium_engine import in_plan

    verdict = _to_gpu_prometheus(in_cluster, in_plan(in_cluster, "site-t-gpu", "team-yield", {"app": "mine"}))
    assert (verdict.admitted, verdict.why) == (False, "denied by prometheus")


def test_the_acceptance_jobs_query_every_clusters_prometheus(in_cluster):
    from cilium_engine import pod

    assert _to_gpu_prometheus(in_cluster, pod("site-t-gpu", "fab-verify", {"fab.internal/verify": "03-serving"})).admitted


def test_grafana_is_admitted_by_computes_prometheus_alone(in_cluster):
    fences = {c: f["spec"]["ingressDeny"] for c, f, _ in in_cluster.manifests()
              if f["kind"] == "CiliumNetworkPolicy" and f["metadata"]["name"] == "prometheus"}
    labels = {c: [e["matchExpressions"][0]["values"] for rule in deny for e in rule["fromEndpoints"]
                  if e.get("matchLabels", {}).get("k8s:io.kubernetes.pod.namespace") == "monitoring"] for c, deny in fences.items()}
    assert labels == {"site-t-compute": [["grafana", "prometheus"]], "site-t-gpu": [["prometheus"]], "site-t-storage": [["prometheus"]]}
