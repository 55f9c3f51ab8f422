"""ComputeCluster behaviour: isolation, engines on Polaris, no keys in values, Keycloak sign-in, the one ingress."""

from __future__ import annotations

import ipaddress
import json

import pytest
import yaml

from components.config import parse_site
from components.storage import catalog_uri
from helpers import render_site, site_raw

MOCK_SECRETS = ("MOCKACCESSKEY", "mock-secret-key", "mock-client-secret", "mock-random-password", "[secret]")
"""What the offline render puts where a credential would be: none may appear in values or ConfigMaps."""


def releases(plan, cluster: str) -> dict[str, dict]:
    """The compute component's Helm releases on `cluster` by release name (Cilium belongs to the network)."""
    return {
        r["inputs"]["name"]: r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")
        if plan.cluster(r) == cluster and plan.component(r)["name"] == "compute"
    }


def test_every_compute_namespace_allows_zero_gpus(plan):
    quotas = plan.objects("ResourceQuota", f"{plan.stack}-compute")
    assert {q["metadata"]["namespace"] for q in quotas} == {"spark", "airflow", "trino", "starrocks", "superset", "jupyterhub"}
    assert all(q["spec"]["hard"]["requests.nvidia.com/gpu"] == "0" for q in quotas)


def test_no_credential_is_written_into_helm_values_or_config_maps(plan):
    compute = f"{plan.stack}-compute"
    texts = [json.dumps(values) for values in releases(plan, compute).values()]
    texts += [json.dumps(c.get("data", {})) for c in plan.objects("ConfigMap", compute)]
    leaks = [marker for text in texts for marker in MOCK_SECRETS if marker in text]
    assert leaks == []


def test_spark_trino_and_starrocks_use_polaris_with_their_own_principals(plan_a):
    site = parse_site(site_raw("site-a"))
    secrets = {(r["inputs"]["metadata"]["namespace"], r["inputs"]["metadata"]["name"]): r for r in plan_a.of_type("kubernetes:core/v1:Secret") if plan_a.target(r) == "site-a-compute"}
    for engine, ns in (("spark", "spark"), ("trino", "trino"), ("starrocks", "starrocks")):
        assert set(secrets[(ns, f"polaris-{engine}")]["inputs"]["stringData"]) >= {"POLARIS_URI", "POLARIS_CLIENT_ID", "POLARIS_CLIENT_SECRET"}
    assert catalog_uri(site.domain, site.storage.polaris) == "http://polaris.site-a.fab.internal:8181/api/catalog"
    trino = releases(plan_a, "site-a-compute")["trino"]
    assert "iceberg.rest-catalog.uri=${ENV:POLARIS_URI}" in trino["values"]["catalogs"]["fab"]
    assert {"secretRef": {"name": "polaris-trino"}} in trino["values"]["envFrom"]
    (defaults,) = [c for c in plan_a.objects("ConfigMap", "site-a-compute") if c["metadata"]["name"] == "spark-defaults"]
    assert "spark.sql.catalog.fab.uri ${env:POLARIS_URI}" in defaults["data"]["spark-defaults.conf"]
    (setup,) = [c for c in plan_a.objects("ConfigMap", "site-a-compute") if c["metadata"]["name"] == "starrocks-setup"]
    assert '"iceberg.catalog.uri" = "$POLARIS_URI"' in setup["data"]["setup.sh"]


def test_every_ui_has_a_browser_client_with_its_exact_redirect_uri(plan_a):
    clients = {r["inputs"]["clientId"]: r["inputs"] for r in plan_a.of_type("keycloak:openid/client:Client")}
    expected = {
        "airflow": "https://airflow.site-a.fab.internal/auth/oauth-authorized/keycloak",
        "trino": "https://trino.site-a.fab.internal/oauth2/callback",
        "superset": "https://superset.site-a.fab.internal/oauth-authorized/keycloak",
        "jupyterhub": "https://jupyter.site-a.fab.internal/hub/oauth_callback",
    }
    for ui, uri in expected.items():
        client = clients[ui]
        assert client["validRedirectUris"] == [uri]
        assert (client["standardFlowEnabled"], client["pkceCodeChallengeMethod"], client["accessType"]) == (True, "S256", "CONFIDENTIAL")


def test_the_ingress_is_the_only_entry_and_sits_on_an_external_pool(plan_a):
    (proxy,) = plan_a.objects("EnvoyProxy", "site-a-compute")
    service = proxy["spec"]["provider"]["kubernetes"]["envoyService"]
    assert service["labels"] == {"lb.fab.internal/pool": "external"}
    assert service["annotations"] == {"lbipam.cilium.io/ips": "203.0.113.10"}
    assert service["externalTrafficPolicy"] == "Local"
    (gateway,) = [g for g in plan_a.objects("Gateway", "site-a-compute")]
    assert sorted(listener["hostname"] for listener in gateway["spec"]["listeners"]) == [
        "airflow.site-a.fab.internal", "jupyter.site-a.fab.internal", "superset.site-a.fab.internal", "trino.site-a.fab.internal",
    ]


def test_outside_users_are_allowed_only_to_the_compute_ingress(plan_a):
    flow = plan_a.outputs["network"]["flows"]["compute-ingress"]
    assert (flow["from"], flow["to"], flow["target_port"]) == (["world"], ["compute"], 10443)
    world_flows = {n: f["to"] for n, f in plan_a.outputs["network"]["flows"].items() if "world" in f.get("from", [])}
    assert world_flows == {"compute-ingress": ["compute"], "s3-external": ["storage"]}


def test_gpu_clusters_expose_only_private_addresses(plan):
    for cluster, obj, _ in plan.manifests():
        if cluster.endswith(("-gpu", "-gpu-train")) and obj["kind"] == "EnvoyProxy":
            vip = obj["spec"]["provider"]["kubernetes"]["envoyService"]["annotations"]["lbipam.cilium.io/ips"]
            assert ipaddress.ip_address(vip).is_private


def test_yunikorn_queues_come_from_config_and_spark_uses_yunikorn(plan_a):
    charts = releases(plan_a, "site-a-compute")
    queues = yaml.safe_load(charts["yunikorn"]["values"]["yunikornDefaults"]["queues.yaml"])
    (root,) = queues["partitions"][0]["queues"]
    assert {q["name"]: q["resources"] for q in root["queues"]} == {
        "batch": {"guaranteed": {"vcore": "256", "memory": "2048Gi"}, "max": {"vcore": "512", "memory": "4096Gi"}},
        "interactive": {"guaranteed": {"vcore": "64", "memory": "512Gi"}, "max": {"vcore": "128", "memory": "1024Gi"}},
    }
    assert charts["spark-operator"]["values"]["controller"]["batchScheduler"] == {"enable": True, "default": "yunikorn"}


def test_starrocks_runs_three_fe_and_autoscaled_stateless_cn_with_an_nvme_cache(plan_a):
    (cluster,) = plan_a.objects("StarRocksCluster", "site-a-compute")
    fe, cn = cluster["spec"]["starRocksFeSpec"], cluster["spec"]["starRocksCnSpec"]
    assert fe["replicas"] == 3
    assert (cn["autoScalingPolicy"]["minReplicas"], cn["autoScalingPolicy"]["maxReplicas"]) == (3, 12)
    assert "replicas" not in cn
    assert cn["storageVolumes"][0]["storageClassName"] == "local-nvme-cache"


def test_airflow_gets_one_kubernetes_connection_per_gpu_cluster(plan_a):
    env = {e["name"]: json.loads(e["value"]) for e in releases(plan_a, "site-a-compute")["airflow"]["values"]["env"]}
    assert env == {
        "AIRFLOW_CONN_GPU_GPU": {"conn_type": "kubernetes", "extra": {"kube_config_path": "/opt/airflow/kube/gpu/kubeconfig"}},
        "AIRFLOW_CONN_GPU_GPU_TRAIN": {"conn_type": "kubernetes", "extra": {"kube_config_path": "/opt/airflow/kube/gpu-train/kubeconfig"}},
    }


def test_batch_nodes_are_labelled_and_their_taints_left_to_the_kubelet(plan_b):
    patches = {r["inputs"]["metadata"]["name"]: r["inputs"] for r in plan_b.of_type("kubernetes:core/v1:NodePatch") if plan_b.target(r) == "site-b-compute"}
    assert sorted(patches) == ["compute-b-batch-01", "compute-b-batch-02"]
    assert patches["compute-b-batch-01"]["metadata"]["labels"] == {"fab.internal/compute-pool": "batch"}
    assert "spec" not in patches["compute-b-batch-01"]


def test_ui_databases_are_protected(plan_a):
    databases = {r["inputs"]["metadata"]["name"]: r for r in plan_a.of_type("kubernetes:postgresql.cnpg.io/v1:Cluster") if plan_a.target(r) == "site-a-compute"}
    assert sorted(databases) == ["airflow-db", "superset-db"]
    assert all(db["protect"] and db["retain_on_delete"] for db in databases.values())


def test_a_disabled_service_is_not_deployed():
    raw = site_raw("site-b")
    raw["compute"]["superset"] = {"enabled": False}
    raw["compute"]["jupyterhub"] = {"enabled": False}
    plan = render_site("site-b", raw)
    names = set(releases(plan, "site-b-compute"))
    assert not {"superset", "jupyterhub"} & names
    assert plan.outputs["ui_urls"] == {"airflow": "https://airflow.site-b.fab.internal", "trino": "https://trino.site-b.fab.internal"}


def test_fails_when_the_ingress_uses_an_internal_pool():
    raw = site_raw("site-b")
    raw["compute"]["ingress"]["pool"] = "internal"
    with pytest.raises(Exception) as info:
        parse_site(raw)
    assert str(info.value) == "fab-platform:site.compute.ingress.pool: 'internal' is not an external pool of clusters.compute"


def test_fails_when_starrocks_has_no_olap_bucket():
    raw = site_raw("site-b")
    del raw["storage"]["buckets"]["site-b-olap"]
    with pytest.raises(Exception) as info:
        parse_site(raw)
    assert str(info.value) == "fab-platform:site.storage.buckets: StarRocks is enabled but no bucket has class olap: its shared-data storage needs one"
