"""`trust.site-ca`: every client of an endpoint the site's CA issued trusts that CA (fabctl/check/trust.py). A site with
every kind of client trusts it throughout; each kind's trust, taken out of a copy of the render, is a finding that names
the client, the endpoint and the fix; both stack files' clients trust it."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator

import pytest
import yaml
from check_helpers import Deploy, deploy_of
from helpers import site_raw
from small_site import SERVING_REPO_TOKEN, trusting_site

from components.config import parse_site
from fabctl.check.picture import Picture
from fabctl.check.trust import CLIENTS, trust_findings

KEYCLOAK = "https://keycloak.site-t.fab.internal"
_DEPLOY: list[Deploy] = []


_CHANGED: list[tuple[dict, dict]] = []


@pytest.fixture
def trusting(chart_dir, helm) -> Iterator[Deploy]:
    """The deploy of a site with its own CA and every kind of client of it (rendered once); what a test changes through
    `_object` is put back after it (copying the whole deploy for each test would cost more than the test)."""
    if not _DEPLOY:
        _DEPLOY.append(deploy_of(trusting_site(), chart_dir, helm, SERVING_REPO_TOKEN))
    deploy = _DEPLOY[0]
    site = deploy.site
    yield deploy
    deploy.site = site
    while _CHANGED:
        obj, saved = _CHANGED.pop()
        obj.clear()
        obj.update(saved)


def _object(deploy: Deploy, cluster: str, kind: str, namespace: str, name: str) -> dict:
    """The object as the picture holds it (the program's resource inputs or a release's rendered object), to change for
    one test."""
    (placed,) = [p for p in Picture(deploy.plan, deploy.site, deploy.releases, deploy.missing).placed
                 if (p.cluster, p.kind, p.namespace, p.name) == (cluster, kind, namespace, name)]
    _CHANGED.append((placed.obj, copy.deepcopy(placed.obj)))
    return placed.obj


def _findings(deploy: Deploy) -> list:
    """The rule's findings (the rule alone: the other rules' are the other tests')."""
    return list(trust_findings(Picture(deploy.plan, deploy.site, deploy.releases, deploy.missing)))


def _lines(deploy: Deploy) -> list[str]:
    return [f.line() for f in _findings(deploy)]


def _clients(deploy: Deploy) -> dict[str, list[str]]:
    picture = Picture(deploy.plan, deploy.site, deploy.releases, deploy.missing)
    return {kind.name: sorted(c.placed.subject for c in kind.clients(picture)) for kind in CLIENTS}


def test_a_site_whose_clients_trust_its_ca_has_no_finding_and_every_kind_of_client(trusting):
    assert _lines(trusting) == []
    assert {name for name, clients in _clients(trusting).items() if not clients} == set()


def test_fails_when_an_inference_jwt_policy_fetches_the_keys_without_the_backend(trusting):
    policy = _object(trusting, "site-t-gpu", "SecurityPolicy", "inference", "vllm-qwen3-8b")
    del policy["spec"]["jwt"]["providers"][0]["remoteJWKS"]["backendRefs"]
    assert _lines(trusting) == [
        "error [trust.site-ca] site-t-gpu SecurityPolicy inference/vllm-qwen3-8b (inference-jwt-qwen3-8b): the JWT provider "
        f"keycloak's JWKS fetch (remoteJWKS) calls {KEYCLOAK}/realms/fab/protocol/openid-connect/certs, whose certificate the "
        "site's CA (ca_bundle) issued, but does not trust that CA: it names no backendRefs, so Envoy fetches the keys trusting "
        "the system's CAs only. Fix: fetch the keys through an Envoy Gateway Backend (remoteJWKS.backendRefs; "
        "extensionApis.enableBackend) whose tls.caCertificateRefs names the site CA's Secret fab-site-ca (key ca.crt, "
        "StorageCluster.site_ca) in the policy's namespace"
    ]


def test_fails_when_the_jwks_backend_trusts_no_ca(trusting):
    backend = _object(trusting, "site-t-gpu", "Backend", "envoy-gateway-system", "keycloak-jwks")
    del backend["spec"]["tls"]["caCertificateRefs"]
    (finding,) = _findings(trusting)
    assert (finding.subject, finding.problem.rsplit(": ", 1)[1]) == (
        "SecurityPolicy envoy-gateway-system/llm",
        "Backend envoy-gateway-system/keycloak-jwks trusts no CA of the site (no tls.caCertificateRefs, no BackendTLSPolicy)")


def test_fails_when_envoy_gateway_refuses_backends(trusting):
    config = _object(trusting, "site-t-gpu", "ConfigMap", "envoy-gateway-system", "envoy-gateway-config")
    settings = yaml.safe_load(config["data"]["envoy-gateway.yaml"])
    del settings["extensionApis"]
    config["data"]["envoy-gateway.yaml"] = yaml.safe_dump(settings)
    assert sorted((f.subject, f.problem.rsplit("CA: ", 1)[1]) for f in _findings(trusting)) == [
        (f"SecurityPolicy {namespace}", "Envoy Gateway's configuration (ConfigMap envoy-gateway-system/envoy-gateway-config) "
         f"lacks extensionApis.enableBackend, so it refuses Backend {namespace.split('/')[0]}/keycloak-jwks")
        for namespace in ("envoy-gateway-system/llm", "inference/vllm-qwen3-8b")]


def test_fails_when_grafanas_sign_in_names_no_ca_file(trusting):
    config = _object(trusting, "site-t-compute", "ConfigMap", "monitoring", "grafana")
    config["data"]["grafana.ini"] = "\n".join(line for line in config["data"]["grafana.ini"].splitlines() if "tls_client_ca" not in line)
    assert _lines(trusting) == [
        "error [trust.site-ca] site-t-compute ConfigMap monitoring/grafana (observability-compute-stack (Helm release metrics)): "
        f"Grafana's generic OAuth sign-in (grafana.ini auth.generic_oauth) calls {KEYCLOAK}/realms/fab/protocol/openid-connect/"
        "token, whose certificate the site's CA (ca_bundle) issued, but does not trust that CA: grafana.ini sets no "
        "auth.generic_oauth.tls_client_ca. Fix: set grafana.ini auth.generic_oauth.tls_client_ca to a file of the site CA's "
        "Secret fab-site-ca (key ca.crt, StorageCluster.site_ca) mounted into Grafana (chart value extraSecretMounts)"
    ]


def test_fails_when_grafana_does_not_mount_its_ca_file(trusting):
    grafana = _object(trusting, "site-t-compute", "Deployment", "monitoring", "grafana")["spec"]["template"]["spec"]
    (container,) = [c for c in grafana["containers"] if c["name"] == "grafana"]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["mountPath"] != "/etc/fab/site-ca"]
    (finding,) = _findings(trusting)
    assert finding.problem.rsplit("CA: ", 1)[1] == (
        "its CA file /etc/fab/site-ca/ca.crt is not there: Deployment monitoring/grafana mounts nothing at /etc/fab/site-ca/ca.crt")


def test_fails_when_a_hubs_authenticator_is_given_no_ca(trusting):
    secret = _object(trusting, "site-t-gpu", "Secret", "gpu-notebooks", "hub")
    values = yaml.safe_load(base64.b64decode(secret["data"]["values.yaml"]))
    del values["hub"]["config"]["GenericOAuthenticator"]["http_request_kwargs"]
    secret["data"]["values.yaml"] = base64.b64encode(yaml.safe_dump(values).encode()).decode()
    assert [(f.cluster, f.subject, f.problem.rsplit("CA: ", 1)[1]) for f in _findings(trusting)] == [
        ("site-t-gpu", "Secret gpu-notebooks/hub", "GenericOAuthenticator.http_request_kwargs sets no ca_certs")]


def test_fails_when_argocds_sign_in_has_no_root_ca(trusting):
    config = _object(trusting, "site-t-compute", "ConfigMap", "argocd", "argocd-cm")
    oidc = yaml.safe_load(config["data"]["oidc.config"])
    del oidc["rootCA"]
    config["data"]["oidc.config"] = yaml.safe_dump(oidc)
    assert _lines(trusting) == [
        "error [trust.site-ca] site-t-compute ConfigMap argocd/argocd-cm (compute-argocd (Helm release argocd)): Argo CD's OIDC "
        f"sign-in (argocd-cm oidc.config) calls {KEYCLOAK}/realms/fab, whose certificate the site's CA (ca_bundle) issued, but "
        "does not trust that CA: oidc.config has no rootCA. Fix: set rootCA in oidc.config (chart value "
        "configs.cm.\"oidc.config\") to the site's CA bundle"
    ]


def test_fails_when_argocd_holds_no_certificate_for_the_serving_repositorys_host(trusting):
    _object(trusting, "site-t-compute", "ConfigMap", "argocd", "argocd-tls-certs-cm")["data"] = {}
    assert _lines(trusting) == [
        "error [trust.site-ca] site-t-compute Secret argocd/repo-serving (compute-argocd-repo-serving): Argo CD's clone of the "
        "repository calls https://git.site-t.fab.internal/platform/serving.git, whose certificate the site's CA (ca_bundle) "
        "issued, but does not trust that CA: argocd-tls-certs-cm holds no certificate for git.site-t.fab.internal. Fix: add "
        "the site's CA bundle under the repository's host to argocd-tls-certs-cm (chart value configs.tls.certificates)"
    ]


def test_fails_when_trinos_oauth2_client_has_no_trust_store(trusting):
    config = _object(trusting, "site-t-compute", "ConfigMap", "trino", "trino-coordinator")
    config["data"]["config.properties"] = "\n".join(
        line for line in config["data"]["config.properties"].splitlines() if not line.startswith("oauth2-jwk."))
    assert [(f.subject, f.problem.split(" calls ")[1]) for f in _findings(trusting)] == [
        ("ConfigMap trino/trino-coordinator", f"{KEYCLOAK}, whose certificate the site's CA (ca_bundle) issued, but does not "
         "trust that CA: config.properties sets no oauth2-jwk.http-client.trust-store-path")]


def test_fails_when_the_catalogs_database_backups_do_not_trust_the_site_ca(trusting):
    cluster = _object(trusting, "site-t-storage", "Cluster", "polaris", "polaris-db")
    del cluster["spec"]["backup"]["barmanObjectStore"]["endpointCA"]
    assert [(f.subject, f.problem.rsplit("CA: ", 1)[1], f.fix) for f in _findings(trusting)] == [
        ("Cluster polaris/polaris-db", "barmanObjectStore has no endpointCA",
         "set barmanObjectStore.endpointCA to the site CA's Secret fab-site-ca (key ca.crt, StorageCluster.site_ca) in the "
         "Cluster's namespace")]


def test_a_site_without_its_own_ca_is_not_checked(trusting):
    trusting.site = trusting.site.model_copy(update={"ca_bundle": None})
    _object(trusting, "site-t-compute", "ConfigMap", "argocd", "argocd-tls-certs-cm")["data"] = {}
    assert _lines(trusting) == []


def test_each_stack_files_clients_of_the_site_ca_trust_it(plan, releases_of):
    releases, missing = releases_of(plan.stack)
    site = parse_site(site_raw(plan.stack))
    picture = Picture(plan, site, releases, missing)
    found = {kind.name for kind in CLIENTS if any(True for _ in kind.clients(picture))}
    assert {"Envoy Gateway JWT provider", "Grafana generic OAuth", "JupyterHub OAuthenticator", "Trino OAuth2", "Trino S3",
            "StarRocks S3", "Polaris S3"} <= found
    assert [f.line() for f in trust_findings(picture)] == []


S3 = "https://s3.site-t.fab.internal:9000"


def test_fails_when_trinos_workers_do_not_name_a_jvm_trust_store(trusting):
    config = _object(trusting, "site-t-compute", "ConfigMap", "trino", "trino-worker")
    config["data"]["jvm.config"] = "\n".join(
        line for line in config["data"]["jvm.config"].splitlines() if "javax.net.ssl.trustStore" not in line)
    assert _lines(trusting) == [
        "error [trust.site-ca] site-t-compute ConfigMap trino/trino-catalog (compute-trino (Helm release trino)): Trino's S3 "
        f"file system of the catalog fab (fs.native-s3) calls {S3}, whose certificate the site's CA (ca_bundle) issued, but "
        "does not trust that CA: the jvm.config of Deployment trino/trino-worker (ConfigMap trino/trino-worker) sets no "
        "-Djavax.net.ssl.trustStore, so the JVM trusts the JDK's CAs only. Fix: make a trust store of the public CAs and the "
        "site's the JVM's default: -Djavax.net.ssl.trustStore in the chart's coordinator.additionalJVMConfig and "
        "worker.additionalJVMConfig, the store mounted (components/engines/trino.py: trino-site-ca)"
    ]


def test_fails_when_starrocks_fe_are_not_given_a_jvm_trust_store(trusting):
    cluster = _object(trusting, "site-t-compute", "StarRocksCluster", "starrocks", "starrocks")
    del cluster["spec"]["starRocksFeSpec"]["feEnvVars"]
    assert _lines(trusting) == [
        "error [trust.site-ca] site-t-compute StarRocksCluster starrocks/starrocks (compute-starrocks): StarRocks' FE S3 client "
        f"(storage volume, Iceberg catalog) calls {S3}, whose certificate the site's CA (ca_bundle) issued, but does not "
        "trust that CA: its FE's JAVA_TOOL_OPTIONS (feEnvVars) set no -Djavax.net.ssl.trustStore, so they trust the JDK's "
        "CAs only. Fix: mount a trust store of the public CAs and the site's into the FE (configMaps) and name it in "
        "JAVA_TOOL_OPTIONS (feEnvVars), and a PEM bundle of them at /etc/ssl/certs/ca-certificates.crt into the CN "
        "(components/engines/starrocks.py: starrocks-site-ca)"
    ]


def test_fails_when_starrocks_cn_read_the_images_ca_file(trusting):
    cluster = _object(trusting, "site-t-compute", "StarRocksCluster", "starrocks", "starrocks")
    del cluster["spec"]["starRocksCnSpec"]["configMaps"]
    assert [(f.subject, f.problem.split(" calls ")[1]) for f in _findings(trusting)] == [
        ("StarRocksCluster starrocks/starrocks", f"{S3}, whose certificate the site's CA (ca_bundle) issued, but does not trust "
         "that CA: its CN's CA file /etc/ssl/certs/ca-certificates.crt is the image's: it mounts nothing at "
         "/etc/ssl/certs/ca-certificates.crt")]


def test_fails_when_polaris_server_does_not_mount_its_jvm_trust_store(trusting):
    polaris = _object(trusting, "site-t-storage", "Deployment", "polaris", "polaris")["spec"]["template"]["spec"]
    (container,) = polaris["containers"]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "site-ca-jvm"]
    assert _lines(trusting) == [
        "error [trust.site-ca] site-t-storage ConfigMap polaris/polaris-setup (storage-polaris-setup): Polaris' S3 storage (the "
        f"catalog's storageConfigInfo) calls {S3}, whose certificate the site's CA (ca_bundle) issued, but does not trust that "
        "CA: its JVM trust store /etc/fab/site-ca/jvm-truststore.p12 is not there: Deployment polaris/polaris mounts nothing "
        "at /etc/fab/site-ca/jvm-truststore.p12. Fix: mount a trust store of the public CAs and the site's into Polaris' "
        "server and name it in JAVA_TOOL_OPTIONS (chart values extraEnv, extraVolumes, extraVolumeMounts; "
        "components/polaris.py: polaris-site-ca)"
    ]


def _airflow_template(deploy: Deploy) -> tuple[dict, dict]:
    config_map = _object(deploy, "site-t-compute", "ConfigMap", "airflow", "spark-application")
    return config_map, yaml.safe_load(config_map["data"]["sparkapplication.yaml"])


def test_fails_when_a_spark_applications_executors_lack_the_trust_store(trusting):
    config_map, app = _airflow_template(trusting)
    del app["spec"]["executor"]["env"]
    config_map["data"]["sparkapplication.yaml"] = yaml.safe_dump(app)
    assert _lines(trusting) == [
        "error [trust.site-ca] site-t-compute ConfigMap airflow/spark-application (compute-spark-application): SparkApplication "
        "spark/(template) (data.sparkapplication.yaml)'s S3 reads (spark.hadoop.fs.s3a.endpoint) calls "
        "https://s3.site-t.fab.internal:9000, whose certificate the site's CA (ca_bundle) issued, but does not trust that CA: "
        "its executor sets no -Djavax.net.ssl.trustStore (JAVA_TOOL_OPTIONS or javaOptions). Fix: give the driver and executor "
        "JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=<store> with the store (the site's CA, and the public CAs if the JVM "
        "reaches Maven Central) mounted from a ConfigMap (components/engines/_spark_trust.py: spark-trust)"]


def test_fails_when_the_spark_connect_server_lacks_the_trust_store(trusting):
    server = _object(trusting, "site-t-compute", "Deployment", "spark-team-yield", "spark-connect")
    (container,) = server["spec"]["template"]["spec"]["containers"]
    container["env"] = [e for e in container["env"] if e["name"] != "JAVA_TOOL_OPTIONS"]
    assert _lines(trusting) == [
        "error [trust.site-ca] site-t-compute Deployment spark-team-yield/spark-connect (compute-spark-connect-yield): the Spark Connect "
        "server's S3 reads (spark.hadoop.fs.s3a.endpoint) calls https://s3.site-t.fab.internal:9000, whose certificate the "
        "site's CA (ca_bundle) issued, but does not trust that CA: its server sets no -Djavax.net.ssl.trustStore "
        "(JAVA_TOOL_OPTIONS or javaOptions). Fix: give the server and its executors' pod template "
        "JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=<store> with the store mounted from a ConfigMap "
        "(components/engines/_spark_trust.py: spark-trust)"]


def test_fails_when_a_spark_applications_driver_does_not_mount_the_trust_store(trusting):
    config_map, app = _airflow_template(trusting)
    app["spec"]["driver"]["volumeMounts"] = [m for m in app["spec"]["driver"]["volumeMounts"] if m["name"] != "spark-trust"]
    config_map["data"]["sparkapplication.yaml"] = yaml.safe_dump(app)
    assert [f.problem.split("does not trust that CA: ")[1] for f in _findings(trusting)] == [
        "its driver's trust store /etc/spark-trust/truststore.p12 is not there: the driver mounts nothing at "
        "/etc/spark-trust/truststore.p12"]


def test_fails_when_the_spark_connect_executors_lack_the_trust_store(trusting):
    template = _object(trusting, "site-t-compute", "ConfigMap", "spark-team-yield", "spark-connect-executor")
    pod = yaml.safe_load(template["data"]["executor.yaml"])
    (container,) = pod["spec"]["containers"]
    container["env"] = [e for e in container["env"] if e["name"] != "JAVA_TOOL_OPTIONS"]
    template["data"]["executor.yaml"] = yaml.safe_dump(pod)
    assert [f.problem.split("does not trust that CA: ")[1] for f in _findings(trusting)] == [
        "its executors' pod template sets no -Djavax.net.ssl.trustStore (JAVA_TOOL_OPTIONS or javaOptions)"]


def test_fails_when_the_spark_trust_store_lacks_the_site_ca(trusting):
    from components.config.views import PEM_CERTIFICATE
    from components.jvm_trust import public_cas, trust_store

    store = _object(trusting, "site-t-compute", "ConfigMap", "spark", "spark-trust")
    other = "\n".join(PEM_CERTIFICATE.findall(public_cas())[:2])  # public CAs, not the site's
    store["binaryData"]["truststore.p12"] = base64.b64encode(trust_store(other)).decode()
    assert [f.problem.split("does not trust that CA: ")[1] for f in _findings(trusting)] == [
        "its driver's trust store /etc/spark-trust/truststore.p12 (ConfigMap spark/spark-trust) lacks the site's CA"]
