"""Every client the program runs trusts the site's CA bundle (`ca_bundle`): providers, its own MinIO calls, and pods."""

from __future__ import annotations

import http.server
import json
import os
import ssl
import subprocess
import threading

import certifi
import pytest
import urllib3
import yaml
from cryptography.x509 import load_pem_x509_certificates
from engines import engine

from components.jvm_trust import jvm_trust_options, public_and_site_pem, public_and_site_store
from components.minio_admin import _apply_tags, _exists
from fabctl.render import PROJECT_DIR
from helpers import config_errors, render_small
from schemas import CrdSchemas, schema_errors
from small_site import SERVING_REPO_TOKEN, small_site, trusting_site

CA_BUNDLE = "certs/site-b-ca.pem"
"""A PEM bundle of the project's (site-b's PKI), which the small site names as its own."""
MC_CA_DIR = "/work/.mc/certs/CAs"
"""Where the MinIO client (mc) of the pods looks for extra CAs: certs/CAs of its config folder."""


@pytest.fixture(scope="module")
def trusting_plan():
    site = small_site()
    site["ca_bundle"] = CA_BUNDLE
    return render_small(site)


def pem_certificates() -> str:
    text = (PROJECT_DIR / CA_BUNDLE).read_text()
    blocks = text.split("-----BEGIN CERTIFICATE-----")[1:]
    assert blocks, f"{CA_BUNDLE} holds no certificate"
    return "\n".join("-----BEGIN CERTIFICATE-----" + b.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----" for b in blocks) + "\n"


def test_the_providers_trust_the_site_ca(trusting_plan):
    (minio,) = trusting_plan.of_type("pulumi:providers:minio")
    (keycloak,) = trusting_plan.of_type("pulumi:providers:keycloak")
    assert (minio["inputs"]["minioCacertFile"], keycloak["inputs"]["rootCaCertificate"]) == (CA_BUNDLE, pem_certificates())


def test_the_programs_minio_calls_carry_the_site_ca(trusting_plan):
    tags = [r for r in trusting_plan.resources if r["type"] == "pulumi-python:dynamic/storage:BucketTags"]
    assert tags
    assert {r["inputs"]["ca_bundle"] for r in tags} == {pem_certificates()}


def test_pods_that_call_aistor_mount_the_site_ca(trusting_plan):
    (deployment,) = [d for d in trusting_plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    pod = deployment["spec"]["template"]["spec"]
    mounts = {c["name"]: [m["mountPath"] for m in c["volumeMounts"] if m["name"] == "site-ca"] for c in pod["initContainers"]}
    assert mounts == {"weights-alias": [MC_CA_DIR], "weights-sync": [MC_CA_DIR]}
    (database,) = [c for c in trusting_plan.objects("Cluster", "site-t-storage") if c["metadata"]["name"] == "polaris-db"]
    assert database["spec"]["backup"]["barmanObjectStore"]["endpointCA"] == {"name": "fab-site-ca", "key": "ca.crt"}


def test_fails_when_the_ca_bundle_holds_no_certificate(tmp_path, monkeypatch):
    (tmp_path / "ca.pem").write_text("not a certificate\n")
    monkeypatch.chdir(tmp_path)
    raw = small_site()
    raw["ca_bundle"] = "ca.pem"
    assert config_errors(raw) == ["fab-platform:site.ca_bundle: 'ca.pem' holds no PEM certificate (-----BEGIN CERTIFICATE-----)"]


def test_fails_when_the_ca_bundle_is_missing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = small_site()
    raw["ca_bundle"] = "certs/ca.pem"
    assert config_errors(raw) == [
        "fab-platform:site.ca_bundle: 'certs/ca.pem' cannot be read (No such file or directory); paths are relative to the project directory"
    ]


def test_fails_when_the_ca_bundle_is_not_text(tmp_path, monkeypatch):
    (tmp_path / "ca.pem").write_bytes(b"\xff\xfe binary")
    monkeypatch.chdir(tmp_path)
    raw = small_site()
    raw["ca_bundle"] = "ca.pem"
    assert config_errors(raw) == ["fab-platform:site.ca_bundle: 'ca.pem' is not a PEM file (PEM is ASCII text)"]


@pytest.fixture(scope="module")
def private_endpoint(tmp_path_factory):
    """An HTTPS endpoint on loopback whose certificate a private CA issued: (host:port, the CA's PEM, the PUTs it received)."""
    tmp = tmp_path_factory.mktemp("pki")
    run = lambda *args: subprocess.run(["openssl", *args], cwd=tmp, capture_output=True, check=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test site CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-keyout", "ca.key", "-out", "ca.pem")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr")
    (tmp / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
        "-extfile", "ext", "-out", "server.pem")

    class Ok(http.server.BaseHTTPRequestHandler):
        """Just enough of AIStor: PutBucketTagging, ListBuckets (one bucket), user-info (404) and info-canned-policy."""

        def reply(self, status: int, body: bytes = b"", content_type: str = "application/xml") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PUT(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append((self.path, body.decode()))
            self.reply(200)

        def do_GET(self):  # noqa: N802
            if self.path.startswith("/minio/admin/v3/user-info"):
                self.reply(404, b'{"Code":"XMinioAdminNoSuchUser"}', "application/json")
            elif self.path.startswith("/minio/admin/v3/info-canned-policy"):
                self.reply(200, b'{"Version":"2012-10-17","Statement":[]}', "application/json")
            else:
                self.reply(200, b'<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>x</ID></Owner>'
                                b'<Buckets><Bucket><Name>site-b-gold</Name><CreationDate>2026-01-01T00:00:00.000Z</CreationDate>'
                                b'</Bucket></Buckets></ListAllMyBucketsResult>')

        def log_message(self, *args):
            pass

    received: list[tuple[str, str]] = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp / "server.pem", tmp / "server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"localhost:{server.server_address[1]}", (tmp / "ca.pem").read_text(), received
    server.shutdown()


def _tags_props(server: str, ca_bundle: str | None) -> dict:
    return {"bucket": "site-b-gold", "tags": {"fab.internal/class": "gold"}, "server": server, "ssl": True, "region": "us-east-1",
            "ca_bundle": ca_bundle}


def test_bucket_tags_reach_an_endpoint_of_the_private_ca(private_endpoint, monkeypatch):
    server, ca, received = private_endpoint
    monkeypatch.setenv("MINIO_USER", "admin")
    monkeypatch.setenv("MINIO_PASSWORD", "admin-password")
    received.clear()
    _apply_tags(_tags_props(server, ca))
    assert [path for path, _ in received] == ["/site-b-gold?tagging="]
    assert "<Key>fab.internal/class</Key><Value>gold</Value>" in received[0][1]


def test_fails_when_the_private_ca_is_not_trusted(private_endpoint, monkeypatch):
    server, _, _ = private_endpoint
    monkeypatch.setenv("MINIO_USER", "admin")
    monkeypatch.setenv("MINIO_PASSWORD", "admin-password")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(urllib3.exceptions.MaxRetryError, match="CERTIFICATE_VERIFY_FAILED"):
        _apply_tags(_tags_props(server, None))


def test_the_name_check_asks_the_object_store_through_the_private_ca(private_endpoint, monkeypatch):
    server, ca, _ = private_endpoint
    monkeypatch.setenv("MINIO_USER", "admin")
    monkeypatch.setenv("MINIO_PASSWORD", "admin-password")
    exists = _exists(_tags_props(server, ca))
    asked = {(kind, name): exists(kind, name) for kind, name in
             (("bucket", "site-b-gold"), ("bucket", "site-b-new"), ("user", "fab-spark"), ("policy", "fab-spark"))}
    assert asked == {("bucket", "site-b-gold"): True, ("bucket", "site-b-new"): False, ("user", "fab-spark"): False,
                     ("policy", "fab-spark"): True}


def _envoy_gateway_values(plan, cluster: str) -> dict:
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release")
                  if plan.cluster(r) == cluster and r["inputs"]["name"] == "envoy-gateway"]
    return release["inputs"]["values"]


def test_the_inference_gateway_fetches_the_realms_keys_trusting_the_site_ca(trusting_plan):
    # Envoy Gateway fetches a bare remoteJWKS.uri with the system's CAs only (envoyproxy/gateway v1.9.0 jwt_types.go):
    # every policy's JWKS goes through a Backend of its namespace that trusts the site CA's Secret there.
    policies = trusting_plan.objects("SecurityPolicy", "site-t-gpu")
    assert policies
    backends = {(b["metadata"]["namespace"], b["metadata"]["name"]): b["spec"]
                for b in trusting_plan.objects("Backend", "site-t-gpu")}
    host = "keycloak.site-t.fab.internal"
    for policy in policies:
        (provider,) = policy["spec"]["jwt"]["providers"]
        assert provider["remoteJWKS"]["backendRefs"] == [
            {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": "keycloak-jwks", "port": 443}]
        assert backends[policy["metadata"]["namespace"], "keycloak-jwks"] == {
            "endpoints": [{"fqdn": {"hostname": host, "port": 443}}],
            "tls": {"caCertificateRefs": [{"group": "", "kind": "Secret", "name": "fab-site-ca"}], "sni": host},
        }
    cas = {s["metadata"]["namespace"] for s in trusting_plan.objects("Secret", "site-t-gpu") if s["metadata"]["name"] == "fab-site-ca"}
    assert {ns for ns, _ in backends} <= cas


def test_envoy_gateway_accepts_backends_only_where_the_jwks_needs_one(trusting_plan, small_plan):
    assert _envoy_gateway_values(trusting_plan, "site-t-gpu")["config"]["envoyGateway"]["extensionApis"] == {"enableBackend": True}
    assert "extensionApis" not in _envoy_gateway_values(small_plan, "site-t-gpu")["config"]["envoyGateway"]
    assert not small_plan.objects("Backend")


@pytest.fixture(scope="module")
def every_client():
    return render_small(trusting_site(), secrets=SERVING_REPO_TOKEN)


def _values(plan, name: str, cluster: str = "site-t-compute") -> dict:
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == name and plan.cluster(r) == cluster]
    return release["inputs"]["values"]


def _site_ca_namespaces(plan, cluster: str) -> set[str]:
    return {s["metadata"]["namespace"] for s in plan.objects("Secret", cluster) if s["metadata"]["name"] == "fab-site-ca"}


def test_grafanas_sign_in_trusts_the_site_ca(every_client):
    grafana = _values(every_client, "metrics")["grafana"]
    assert grafana["grafana.ini"]["auth.generic_oauth"]["tls_client_ca"] == "/etc/fab/site-ca/ca.crt"
    assert grafana["extraSecretMounts"] == [{"name": "site-ca", "secretName": "fab-site-ca", "mountPath": "/etc/fab/site-ca", "readOnly": True}]
    assert "monitoring" in _site_ca_namespaces(every_client, "site-t-compute")


@pytest.mark.parametrize(("release", "cluster"), [("jupyterhub", "site-t-compute"), ("gpu-notebooks", "site-t-gpu")])
def test_each_hubs_sign_in_trusts_the_site_ca(every_client, release, cluster):
    hub = _values(every_client, release, cluster)["hub"]
    assert hub["config"]["GenericOAuthenticator"]["http_request_kwargs"] == {"ca_certs": "/etc/fab/site-ca/ca.crt"}
    assert (hub["extraVolumes"], hub["extraVolumeMounts"]) == (
        [{"name": "site-ca", "secret": {"secretName": "fab-site-ca"}}], [{"name": "site-ca", "mountPath": "/etc/fab/site-ca", "readOnly": True}])
    assert release in _site_ca_namespaces(every_client, cluster)


def test_argocd_trusts_the_site_ca_for_its_sign_in_and_the_serving_repository(every_client):
    configs = _values(every_client, "argocd")["configs"]
    assert yaml.safe_load(configs["cm"]["oidc.config"])["rootCA"] == pem_certificates()
    assert configs["tls"]["certificates"] == {"git.site-t.fab.internal": pem_certificates()}


def test_trinos_oauth2_sign_in_reads_the_site_cas_trust_store(every_client):
    values = _values(every_client, "trino")
    assert "oauth2-jwk.http-client.trust-store-path=/etc/fab/site-ca/truststore.p12\n" in values["server"]["coordinatorExtraConfig"]
    assert values["configMounts"][0] == {"name": "site-ca", "configMap": "trino-site-ca", "path": "/etc/fab/site-ca/truststore.p12",
                                         "subPath": "truststore.p12"}


def test_trinos_jvms_trust_the_store_of_the_public_cas_and_the_sites(every_client):
    values = _values(every_client, "trino")
    options = ["-Djavax.net.ssl.trustStore=/etc/fab/site-ca/jvm-truststore.p12", "-Djavax.net.ssl.trustStoreType=PKCS12"]
    assert (values["coordinator"]["additionalJVMConfig"], values["worker"]["additionalJVMConfig"], values["configMounts"][1]) == (
        options, options, {"name": "site-ca-jvm", "configMap": "trino-site-ca", "path": "/etc/fab/site-ca/jvm-truststore.p12",
                           "subPath": "jvm-truststore.p12"})


JAVA_PROBE = """
import java.net.URL;
import javax.net.ssl.HttpsURLConnection;

public class Probe {
    public static void main(String[] args) throws Exception {
        HttpsURLConnection connection = (HttpsURLConnection) new URL(args[0]).openConnection();
        System.out.println(connection.getResponseCode());
    }
}
"""


def _java_get(url: str, store: bytes, tmp_path) -> subprocess.CompletedProcess:
    """A JVM (the engines' JSSE) GETs `url` trusting `store` as the engines' JVMs are told to (JAVA_TOOL_OPTIONS)."""
    (tmp_path / "store.p12").write_bytes(store)
    (tmp_path / "Probe.java").write_text(JAVA_PROBE)
    options = " ".join(jvm_trust_options(str(tmp_path / "store.p12")))
    return subprocess.run([str(engine("java")), str(tmp_path / "Probe.java"), url], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JAVA_TOOL_OPTIONS": options})


def test_a_jvm_given_the_engines_store_reaches_an_endpoint_of_the_site_ca(private_endpoint, tmp_path):
    server, ca_pem, _ = private_endpoint
    done = _java_get(f"https://{server}/", public_and_site_store(ca_pem), tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "200"), done.stderr


def test_fails_when_a_jvms_store_holds_the_public_cas_only(private_endpoint, tmp_path):
    server, _, _ = private_endpoint
    done = _java_get(f"https://{server}/", public_and_site_store(""), tmp_path)
    assert done.returncode != 0 and "PKIX path building failed" in done.stderr


def test_starrocks_cns_curl_given_the_bundle_reaches_an_endpoint_of_the_site_ca_and_keeps_the_public_cas(private_endpoint, tmp_path):
    server, ca_pem, _ = private_endpoint
    (tmp_path / "ca-certificates.crt").write_text(public_and_site_pem(ca_pem))
    done = subprocess.run([str(engine("curl")), "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert",
                           str(tmp_path / "ca-certificates.crt"), f"https://{server}/"], capture_output=True, text=True, timeout=60)
    public = load_pem_x509_certificates(certifi.contents().encode())
    bundle = load_pem_x509_certificates((tmp_path / "ca-certificates.crt").read_bytes())
    assert (done.returncode, done.stdout, bundle[:len(public)] == public) == (0, "200", True), done.stderr


def test_no_client_is_given_a_site_ca_the_site_does_not_have(small_plan):
    assert [name for name in ("metrics", "jupyterhub", "argocd", "trino", "superset", "airflow") if "site-ca" in json.dumps(
        [r["inputs"]["values"] for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == name])] == []
    assert _site_ca_namespaces(small_plan, "site-t-compute") == set()


def test_supersets_sign_in_trusts_the_site_ca(every_client):
    values = _values(every_client, "superset")
    assert (values["extraEnv"], values["extraVolumes"], values["extraVolumeMounts"]) == (
        {"REQUESTS_CA_BUNDLE": "/etc/fab/site-ca/ca.crt"}, [{"name": "site-ca", "secret": {"secretName": "fab-site-ca"}}],
        [{"name": "site-ca", "mountPath": "/etc/fab/site-ca", "readOnly": True}])
    assert "superset" in _site_ca_namespaces(every_client, "site-t-compute")


def test_airflows_sign_in_trusts_the_site_ca(every_client):
    values = _values(every_client, "airflow")
    assert {"name": "REQUESTS_CA_BUNDLE", "value": "/etc/fab/site-ca/ca.crt"} in values["apiServer"]["env"]
    assert {"name": "site-ca", "secret": {"secretName": "fab-site-ca"}} in values["volumes"]
    assert {"name": "site-ca", "mountPath": "/etc/fab/site-ca", "readOnly": True} in values["volumeMounts"]


def test_starrocks_fe_and_cn_are_given_the_site_ca_as_each_reads_it(every_client, crd_dir):
    (cluster,) = every_client.objects("StarRocksCluster", "site-t-compute")
    fe, cn = cluster["spec"]["starRocksFeSpec"], cluster["spec"]["starRocksCnSpec"]
    assert (fe["feEnvVars"], fe["configMaps"], cn["configMaps"], schema_errors(cluster, CrdSchemas(crd_dir))) == (
        [{"name": "JAVA_TOOL_OPTIONS",
          "value": "-Djavax.net.ssl.trustStore=/etc/fab/site-ca/jvm-truststore.p12 -Djavax.net.ssl.trustStoreType=PKCS12"}],
        [{"name": "starrocks-site-ca", "mountPath": "/etc/fab/site-ca"}],
        [{"name": "starrocks-site-ca", "mountPath": "/etc/ssl/certs/ca-certificates.crt", "subPath": "ca-certificates.crt"}],
        [])


def test_polaris_server_trusts_the_store_of_the_public_cas_and_the_sites(every_client):
    values = _values(every_client, "polaris", "site-t-storage")
    assert (values["extraEnv"][1:], values["extraVolumes"], values["extraVolumeMounts"]) == (
        [{"name": "JAVA_TOOL_OPTIONS",
          "value": "-Djavax.net.ssl.trustStore=/etc/fab/site-ca/jvm-truststore.p12 -Djavax.net.ssl.trustStoreType=PKCS12"}],
        [{"name": "site-ca-jvm", "configMap": {"name": "polaris-site-ca"}}],
        [{"name": "site-ca-jvm", "mountPath": "/etc/fab/site-ca", "readOnly": True}])


def test_no_engine_is_given_a_trust_store_the_site_does_not_have(small_plan):
    (cluster,) = small_plan.objects("StarRocksCluster", "site-t-compute")
    assert ([k for k in ("feEnvVars", "configMaps") if k in cluster["spec"]["starRocksFeSpec"]],
            "configMaps" in cluster["spec"]["starRocksCnSpec"], "JAVA_TOOL_OPTIONS" in json.dumps(_values(small_plan, "polaris", "site-t-storage")),
            [c["metadata"]["name"] for c in small_plan.objects("ConfigMap", "site-t-storage") + small_plan.objects("ConfigMap", "site-t-compute")
             if c["metadata"]["name"].endswith("site-ca")]) == ([], False, False, [])


@pytest.mark.parametrize("given_ca", [True, False])
def test_the_serving_loops_git_verifies_a_repository_of_the_site_with_the_site_ca(private_endpoint, tmp_path, given_ca):
    """git (libcurl) as the DAG runs it: given the CA file, the TLS handshake passes (the stand-in server answers an
    empty repository); without it, the certificate is refused."""
    server, ca_pem, _ = private_endpoint
    (tmp_path / "ca.crt").write_text(ca_pem)
    from components.dags.serving_loop_steps import git_command

    git = git_command("dXNlcjp0b2s=", str(tmp_path / "ca.crt") if given_ca else None)
    # As in the Airflow image: no GIT_SSL_CAINFO, which would override git's configuration (this machine sets one).
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_SSL_")}
    done = subprocess.run([str(engine("git")), *git[1:], "ls-remote", f"https://{server}/ml/serving.git"], capture_output=True,
                          text=True, timeout=60, env={**env, "GIT_TERMINAL_PROMPT": "0", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"})
    assert (done.returncode == 0, "certificate" in done.stderr) == (given_ca, not given_ca), done.stderr
