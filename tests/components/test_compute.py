"""ComputeCluster behaviour on small sites: isolation, engines on Polaris, no keys in values, Keycloak sign-in, the one ingress."""

from __future__ import annotations

import ipaddress
import json

import yaml

from helpers import config_errors, render_small
from small_site import small_site

MOCK_SECRETS = ("MOCKACCESSKEY", "mock-secret-key", "mock-client-secret", "mock-random-password", "[secret]")
"""What the offline render puts where a credential would be: none may appear in values or ConfigMaps."""


def releases(plan, cluster: str) -> dict[str, dict]:
    """The compute component's Helm releases on `cluster` by release name (Cilium belongs to the network)."""
    return {
        r["inputs"]["name"]: r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")
        if plan.cluster(r) == cluster and plan.component(r)["name"] == "compute"
    }


def test_every_compute_namespace_allows_zero_gpus(small_plan):
    quotas = small_plan.objects("ResourceQuota", "site-t-compute")
    assert {q["metadata"]["namespace"] for q in quotas} == {"spark", "spark-team-yield", "airflow", "trino", "starrocks", "superset", "jupyterhub"}
    assert all(q["spec"]["hard"]["requests.nvidia.com/gpu"] == "0" for q in quotas)


def test_no_credential_is_written_into_helm_values_or_config_maps(small_plan):
    texts = [json.dumps(values) for values in releases(small_plan, "site-t-compute").values()]
    texts += [json.dumps(c.get("data", {})) for c in small_plan.objects("ConfigMap", "site-t-compute")]
    assert texts
    leaks = [marker for text in texts for marker in MOCK_SECRETS if marker in text]
    assert leaks == []


def test_spark_trino_and_starrocks_use_polaris_with_their_own_principals(small_plan):
    secrets = {(r["inputs"]["metadata"]["namespace"], r["inputs"]["metadata"]["name"]): r for r in small_plan.of_type("kubernetes:core/v1:Secret") if small_plan.target(r) == "site-t-compute"}
    for engine, ns in (("spark", "spark"), ("trino", "trino"), ("starrocks", "starrocks")):
        assert set(secrets[(ns, f"polaris-{engine}")]["inputs"]["stringData"]) >= {"POLARIS_URI", "POLARIS_CLIENT_ID", "POLARIS_CLIENT_SECRET"}
    trino = releases(small_plan, "site-t-compute")["trino"]
    assert "iceberg.rest-catalog.uri=http://polaris-rest.polaris.svc:8181/api/catalog" in trino["values"]["catalogs"]["fab"]
    assert {"secretRef": {"name": "polaris-trino"}} in trino["values"]["envFrom"]
    (template,) = [c for c in small_plan.objects("ConfigMap", "site-t-compute")
                   if (c["metadata"]["namespace"], c["metadata"]["name"]) == ("airflow", "spark-application")]
    spark = yaml.safe_load(template["data"]["sparkapplication.yaml"])["spec"]
    assert spark["sparkConf"]["spark.sql.catalog.fab.uri"] == "http://polaris-rest.polaris.svc:8181/api/catalog"
    assert {"secretRef": {"name": "polaris-spark"}} in spark["driver"]["envFrom"]
    (setup,) = [c for c in small_plan.objects("ConfigMap", "site-t-compute") if c["metadata"]["name"] == "starrocks-setup"]
    assert '"iceberg.catalog.uri" = "http://polaris-rest.polaris.svc:8181/api/catalog"' in setup["data"]["setup.sh"]


def test_every_ui_has_a_browser_client_with_its_exact_redirect_uri(small_plan):
    clients = {r["inputs"]["clientId"]: r["inputs"] for r in small_plan.of_type("keycloak:openid/client:Client")}
    # Each application's own OAuth callback path: Flask AppBuilder's for Airflow and Superset, Trino's, JupyterHub's.
    assert {ui: clients[ui]["validRedirectUris"] for ui in ("airflow", "trino", "superset", "jupyterhub")} == {
        "airflow": ["https://airflow.site-t.fab.internal/auth/oauth-authorized/keycloak"],
        "trino": ["https://trino.site-t.fab.internal/oauth2/callback"],
        "superset": ["https://superset.site-t.fab.internal/oauth-authorized/keycloak"],
        "jupyterhub": ["https://jupyter.site-t.fab.internal/hub/oauth_callback"],
    }
    for ui in ("airflow", "trino", "superset", "jupyterhub"):
        client = clients[ui]
        assert (client["standardFlowEnabled"], client["pkceCodeChallengeMethod"], client["accessType"]) == (True, "S256", "CONFIDENTIAL")


def test_the_ingress_is_the_only_entry_and_sits_on_an_external_pool(small_plan):
    (proxy,) = small_plan.objects("EnvoyProxy", "site-t-compute")
    service = proxy["spec"]["provider"]["kubernetes"]["envoyService"]
    assert service["labels"] == {"lb.fab.internal/pool": "external"}
    assert service["annotations"] == {"lbipam.cilium.io/ips": "203.0.113.20"}
    assert service["externalTrafficPolicy"] == "Local"
    (gateway,) = [g for g in small_plan.objects("Gateway", "site-t-compute")]
    assert sorted(listener["hostname"] for listener in gateway["spec"]["listeners"]) == [
        "airflow.site-t.fab.internal", "jupyter.site-t.fab.internal", "superset.site-t.fab.internal", "trino.site-t.fab.internal",
    ]


def test_outside_users_are_allowed_only_to_the_compute_ingress(full_plan):
    flow = full_plan.outputs["network"]["flows"]["compute-ingress"]
    assert (flow["from"], flow["to"], flow["target_port"]) == (["world"], ["compute"], 10443)
    world_flows = {n: f["to"] for n, f in full_plan.outputs["network"]["flows"].items() if "world" in f.get("from", [])}
    assert world_flows == {"compute-ingress": ["compute"], "s3-external": ["storage"]}


def test_gpu_clusters_expose_only_private_addresses(full_plan):
    vips = {cluster: obj["spec"]["provider"]["kubernetes"]["envoyService"]["annotations"]["lbipam.cilium.io/ips"]
            for cluster, obj, _ in full_plan.manifests() if cluster.endswith(("-gpu", "-gpu-train")) and obj["kind"] == "EnvoyProxy"}
    assert vips == {"site-t-gpu": "10.30.103.10"}
    assert all(ipaddress.ip_address(vip).is_private for vip in vips.values())


def test_yunikorn_queues_come_from_config_and_spark_uses_yunikorn():
    site = small_site()
    site["compute"]["spark"]["interactive"] = {"guaranteed_vcores": 4, "guaranteed_memory_gib": 16, "max_vcores": 12, "max_memory_gib": 48}
    charts = releases(render_small(site), "site-t-compute")
    queues = yaml.safe_load(charts["yunikorn"]["values"]["yunikornDefaults"]["queues.yaml"])
    (root,) = queues["partitions"][0]["queues"]
    assert {q["name"]: q["resources"] for q in root["queues"]} == {
        "batch": {"guaranteed": {"vcore": "8", "memory": "32Gi"}, "max": {"vcore": "16", "memory": "64Gi"}},
        "interactive": {"guaranteed": {"vcore": "4", "memory": "16Gi"}, "max": {"vcore": "12", "memory": "48Gi"}},
    }
    assert charts["spark-operator"]["values"]["controller"]["batchScheduler"] == {"enable": True, "default": "yunikorn"}


def test_starrocks_runs_three_fe_and_autoscaled_stateless_cn_with_an_nvme_cache(small_plan):
    (cluster,) = small_plan.objects("StarRocksCluster", "site-t-compute")
    fe, cn = cluster["spec"]["starRocksFeSpec"], cluster["spec"]["starRocksCnSpec"]
    assert fe["replicas"] == 3
    assert (cn["autoScalingPolicy"]["minReplicas"], cn["autoScalingPolicy"]["maxReplicas"]) == (2, 8)
    assert "replicas" not in cn
    assert cn["storageVolumes"][0]["storageClassName"] == "local-nvme-cache"


def test_airflow_gets_one_kubernetes_connection_per_gpu_cluster(full_plan):
    env = {e["name"]: json.loads(e["value"]) for e in releases(full_plan, "site-t-compute")["airflow"]["values"]["env"]}
    assert env == {
        "AIRFLOW_CONN_GPU_GPU": {"conn_type": "kubernetes", "extra": {"kube_config_path": "/opt/airflow/kube/gpu/kubeconfig"}},
        "AIRFLOW_CONN_GPU_GPU_TRAIN": {"conn_type": "kubernetes", "extra": {"kube_config_path": "/opt/airflow/kube/gpu-train/kubeconfig"}},
    }


def test_pool_nodes_are_labelled_and_their_taints_left_to_the_kubelet(small_plan):
    patches = {r["inputs"]["metadata"]["name"]: r["inputs"] for r in small_plan.of_type("kubernetes:core/v1:NodePatch") if small_plan.target(r) == "site-t-compute"}
    assert {name: (p["metadata"]["labels"], "spec" in p) for name, p in patches.items()} == {
        "compute-batch-1": ({"fab.internal/compute-pool": "batch"}, False),
        "compute-interactive-1": ({"fab.internal/compute-pool": "interactive"}, False),
    }


def test_ui_databases_are_protected(small_plan):
    databases = {r["inputs"]["metadata"]["name"]: r for r in small_plan.of_type("kubernetes:postgresql.cnpg.io/v1:Cluster") if small_plan.target(r) == "site-t-compute"}
    assert sorted(databases) == ["airflow-db", "superset-db"]
    assert all(db["protect"] and db["retain_on_delete"] for db in databases.values())


def test_a_disabled_service_is_not_deployed(small_plan):
    raw = small_site()
    raw["compute"]["superset"] = {"enabled": False}
    raw["compute"]["jupyterhub"] = {"enabled": False}
    plan = render_small(raw)
    assert {"superset", "jupyterhub"} <= set(releases(small_plan, "site-t-compute"))
    assert not {"superset", "jupyterhub"} & set(releases(plan, "site-t-compute"))
    assert plan.outputs["ui_urls"] == {"airflow": "https://airflow.site-t.fab.internal", "trino": "https://trino.site-t.fab.internal"}


def test_fails_when_the_ingress_uses_an_internal_pool():
    raw = small_site()
    raw["compute"]["ingress"]["pool"] = "internal"
    assert config_errors(raw) == ["fab-platform:site.compute.ingress.pool: 'internal' is not an external pool of clusters.compute"]


def test_fails_when_starrocks_has_no_olap_bucket():
    raw = small_site()
    del raw["storage"]["buckets"]["site-t-olap"]
    assert config_errors(raw) == [
        "fab-platform:site.storage.buckets: StarRocks is enabled but no bucket has class olap: its shared-data storage needs one"
    ]
