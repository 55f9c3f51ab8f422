"""Trust: every client in the picture that calls an endpoint the site's CA issued trusts that CA (rule `trust.site-ca`).

A site with its own PKI (config `ca_bundle`) has endpoints whose certificates no public CA signed: its Keycloak, its
object store, its Git server, everything under its domain. A client that verifies them against its system's CAs only
fails at run time (401 on every authenticated call, a failed sign-in, a failed clone), which no schema and no other
rule sees. `CLIENTS` is the table of client kinds the check knows: how to recognise one in the picture (object kind and
fields), which endpoint it calls, and how that component reads a CA (the field, volume or setting to check). Each
finding names the client, the endpoint and the fix. Without `ca_bundle` the site's endpoints carry public certificates
and nothing is checked.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from fabctl.check.findings import Finding
from fabctl.check.picture import Picture
from fabctl.check.placed import Placed
from fabctl.check.trust_reading import (
    SECRET_MASK,
    Client,
    decoded,
    holds_certificate,
    host_of,
    load_yaml,
    mounted_file,
    site_ca_host,
    source_keys,
    workloads_using,
)
from fabctl.check.trust_s3 import STARROCKS_CN_CA_FILE, polaris_s3, spark_application_s3, spark_connect_s3, starrocks_s3, trino_s3

CA_KEY = "ca.crt"
"""The key a Secret or ConfigMap holds a CA bundle under, for Envoy Gateway's Backend and for the program's `fab-site-ca`."""
ARGOCD_SECRET_TYPE = "argocd.argoproj.io/secret-type"
_ENV_REF = re.compile(r"^\$\{ENV:[A-Za-z_][A-Za-z0-9_]*\}$")


@dataclass(frozen=True)
class ClientKind:
    name: str
    recognise: str
    """How the client is recognised in the picture (for the docs and the table's readers)."""
    reads: str
    """How that component reads its CA: the field, volume or setting the check looks at."""
    fix: str
    clients: Callable[[Picture], Iterator[Client]]



# --------------------------------------------------------------------------------------------------------------------
# The client kinds.


def gateway_jwks(picture: Picture) -> Iterator[Client]:
    """Envoy Gateway JWT providers: a bare `remoteJWKS.uri` is fetched with the system's CAs only (envoyproxy/gateway
    v1.9.0 api/v1alpha1/jwt_types.go); through `backendRefs` to a Backend, with the Backend's `tls.caCertificateRefs`
    (a ConfigMap or Secret of its namespace, key `ca.crt`) or a BackendTLSPolicy on it."""
    for placed in picture.placed:
        if placed.kind != "SecurityPolicy":
            continue
        for provider in (((placed.obj.get("spec") or {}).get("jwt") or {}).get("providers") or []):
            remote = provider.get("remoteJWKS") or {}
            uri = remote.get("uri")
            if not site_ca_host(picture.site, host_of(uri)):
                continue
            what = f"the JWT provider {provider.get('name')}'s JWKS fetch (remoteJWKS)"
            refs = remote.get("backendRefs") or []
            missing = "it names no backendRefs, so Envoy fetches the keys trusting the system's CAs only" if not refs else None
            for ref in refs:
                missing = missing or _backend_trust(picture, placed, ref)
            yield Client(placed, what, str(uri), missing)


def _backend_trust(picture: Picture, policy: Placed, ref: dict[str, Any]) -> str | None:
    namespace = ref.get("namespace") or policy.namespace
    name = str(ref.get("name"))
    if ref.get("kind", "Service") != "Backend":
        return f"its backendRef {ref.get('kind', 'Service')} {namespace}/{name} is no Envoy Gateway Backend, whose TLS could trust the site's CA"
    backends = picture.by_name.get((policy.cluster, "Backend", namespace, name))
    if not backends:
        return f"its backendRef Backend {namespace}/{name} is not in the plan"
    if backends_disabled(picture, policy.cluster):
        return (f"Envoy Gateway's configuration ({EG_CONFIG}) lacks extensionApis.enableBackend, so it refuses Backend "
                f"{namespace}/{name}")
    tls = (backends[0].obj.get("spec") or {}).get("tls") or {}
    policies = [p for p in picture.placed if p.cluster == policy.cluster and p.kind == "BackendTLSPolicy" and p.namespace == namespace
                and any(t.get("kind") == "Backend" and t.get("name") == name for t in (p.obj.get("spec") or {}).get("targetRefs") or [])]
    refs = [(namespace, r) for r in tls.get("caCertificateRefs") or []]
    for btp in policies:
        refs += [(namespace, r) for r in (((btp.obj.get("spec") or {}).get("validation") or {}).get("caCertificateRefs") or [])]
    if not refs:
        return f"Backend {namespace}/{name} trusts no CA of the site (no tls.caCertificateRefs, no BackendTLSPolicy)"
    for ns, ca in refs:
        kind, ca_name = str(ca.get("kind")), str(ca.get("name"))
        keys = source_keys(picture, policy.cluster, ns, kind, ca_name)
        if keys is None:
            return f"Backend {namespace}/{name} trusts {kind} {ns}/{ca_name}, which the plan does not create"
        if CA_KEY not in keys:
            return f"Backend {namespace}/{name} trusts {kind} {ns}/{ca_name}, which has no key {CA_KEY}"
    return None


EG_CONFIG = "ConfigMap envoy-gateway-system/envoy-gateway-config"
"""Envoy Gateway's own configuration (the chart's `config.envoyGateway`, key `envoy-gateway.yaml`)."""


def backends_disabled(picture: Picture, cluster: str) -> bool:
    """Whether the cluster's Envoy Gateway, as its chart renders its configuration, refuses Backends (v1.9.0
    internal/gatewayapi/ext_service.go: "Backend is disabled in Envoy Gateway configuration"). Unknown (the chart not
    rendered): False."""
    for placed in picture.placed:
        if placed.cluster == cluster and f"{placed.kind} {placed.namespace}/{placed.name}" == EG_CONFIG:
            try:
                config = load_yaml((placed.obj.get("data") or {}).get("envoy-gateway.yaml") or "") or {}
            except yaml.YAMLError:
                return False
            return not ((config.get("extensionApis") or {}).get("enableBackend") is True)
    return False


def grafana_oauth(picture: Picture) -> Iterator[Client]:
    """Grafana's generic OAuth sign-in (grafana.ini `[auth.generic_oauth]`): its HTTP client trusts the system's CAs and
    the file `tls_client_ca` names, which the Grafana pod must mount."""
    for placed in picture.placed:
        ini = (placed.obj.get("data") or {}).get("grafana.ini") if placed.kind == "ConfigMap" else None
        if not isinstance(ini, str):
            continue
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(ini)
        except configparser.Error:
            continue
        if not parser.has_section("auth.generic_oauth"):
            continue
        section = parser["auth.generic_oauth"]
        url = section.get("token_url") or section.get("api_url")
        if section.get("enabled", "false").lower() != "true" or not site_ca_host(picture.site, host_of(url)):
            continue
        ca_file = section.get("tls_client_ca", "").strip()
        yield Client(placed, "Grafana's generic OAuth sign-in (grafana.ini auth.generic_oauth)", str(url),
                     _file_missing(picture, placed, "ConfigMap", ca_file, "grafana.ini sets no auth.generic_oauth.tls_client_ca"))


def _file_missing(picture: Picture, config: Placed, volume_kind: str, path: str, unset: str) -> str | None:
    """What keeps the pods that read `config` (a mounted ConfigMap or Secret) from reading the CA file `path`."""
    if not path:
        return unset
    users = workloads_using(picture, config, volume_kind)
    if not users:
        return f"no workload of {config.namespace} mounts it, so nothing can be said of the CA file {path}"
    for workload, spec in users:
        problem = mounted_file(picture, workload, spec, path)
        if problem:
            return f"its CA file {path} is not there: {problem}"
    return None


def jupyterhub_oauth(picture: Picture) -> Iterator[Client]:
    """JupyterHub's OAuthenticator (the chart's Secret `hub`, key `values.yaml`: `hub.config.GenericOAuthenticator`):
    OAuthenticator 17 passes `http_request_kwargs` to tornado's HTTPRequest, whose `ca_certs` file the hub must mount."""
    for placed in picture.placed:
        if placed.kind != "Secret" or placed.name != "hub":
            continue
        text = decoded((placed.obj.get("data") or {}).get("values.yaml"))
        try:
            values = load_yaml(text) if text else None
        except yaml.YAMLError:
            continue
        config = (((values or {}).get("hub") or {}).get("config") or {})
        for section in ("GenericOAuthenticator", "OAuthenticator"):
            settings = config.get(section)
            url = settings.get("token_url") if isinstance(settings, dict) else None
            if not site_ca_host(picture.site, host_of(url)):
                continue
            ca_file = str((settings.get("http_request_kwargs") or {}).get("ca_certs") or "")
            yield Client(placed, f"JupyterHub's sign-in ({section})", str(url),
                         _file_missing(picture, placed, "Secret", ca_file, f"{section}.http_request_kwargs sets no ca_certs"))


def argocd_oidc(picture: Picture) -> Iterator[Client]:
    """Argo CD's OIDC sign-in (`argocd-cm` `oidc.config`): the server trusts the system's CAs and the PEM `rootCA` holds."""
    for placed in picture.placed:
        if placed.kind != "ConfigMap" or placed.name != "argocd-cm":
            continue
        text = (placed.obj.get("data") or {}).get("oidc.config")
        try:
            config = load_yaml(text) if isinstance(text, str) else None
        except yaml.YAMLError:
            continue
        if not isinstance(config, dict) or not site_ca_host(picture.site, host_of(config.get("issuer"))):
            continue
        missing = None if holds_certificate(config.get("rootCA")) else "oidc.config has no rootCA"
        yield Client(placed, "Argo CD's OIDC sign-in (argocd-cm oidc.config)", str(config["issuer"]), missing)


def argocd_repository(picture: Picture) -> Iterator[Client]:
    """Argo CD's Git repositories (Secrets labelled `argocd.argoproj.io/secret-type: repository`): the repo server
    verifies an HTTPS host against the certificates `argocd-tls-certs-cm` holds under the host's name, else the system's
    CAs. A URL the plan hides (a Pulumi secret) is the site's serving repository (`compute.argocd.serving_repo.url`)."""
    repo = picture.site.compute.argocd.serving_repo
    for placed in picture.placed:
        labels = (placed.obj.get("metadata") or {}).get("labels") or {}
        if placed.kind != "Secret" or labels.get(ARGOCD_SECRET_TYPE) != "repository":
            continue
        url = ((placed.obj.get("stringData") or {}).get("url") or decoded((placed.obj.get("data") or {}).get("url")))
        if url in (None, SECRET_MASK):
            url = str(repo.url) if repo is not None else None
        host = host_of(url)
        if not site_ca_host(picture.site, host):
            continue
        keys = source_keys(picture, placed.cluster, placed.namespace, "ConfigMap", "argocd-tls-certs-cm") or set()
        missing = None if host in keys else f"argocd-tls-certs-cm holds no certificate for {host}"
        yield Client(placed, "Argo CD's clone of the repository", str(url), missing)


def trino_oauth2(picture: Picture) -> Iterator[Client]:
    """Trino's OAuth2 sign-in (`config.properties` of the coordinator, `http-server.authentication.oauth2.*`): its HTTP
    client (`oauth2-jwk`) is reset to the JVM's default trust and reads `oauth2-jwk.http-client.trust-store-path`. An
    issuer read from the environment is the site's realm."""
    for placed in picture.placed:
        text = (placed.obj.get("data") or {}).get("config.properties") if placed.kind == "ConfigMap" else None
        if not isinstance(text, str):
            continue
        props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.lstrip().startswith("#"))
        issuer = props.get("http-server.authentication.oauth2.issuer")
        if issuer is None:
            continue
        if _ENV_REF.match(issuer.strip()):
            issuer = str(picture.site.keycloak.url)
        if not site_ca_host(picture.site, host_of(issuer)):
            continue
        store = props.get("oauth2-jwk.http-client.trust-store-path", "").strip()
        yield Client(placed, "Trino's OAuth2 sign-in (http-server.authentication.oauth2)", issuer,
                     _file_missing(picture, placed, "ConfigMap", store, "config.properties sets no oauth2-jwk.http-client.trust-store-path"))


def cnpg_backup(picture: Picture) -> Iterator[Client]:
    """CloudNativePG's backups to S3 (Cluster `spec.backup.barmanObjectStore`): barman trusts the system's CAs and the
    Secret key `endpointCA` names."""
    for placed in picture.placed:
        if placed.kind != "Cluster" or placed.group != "postgresql.cnpg.io":
            continue
        store = ((placed.obj.get("spec") or {}).get("backup") or {}).get("barmanObjectStore") or {}
        url = store.get("endpointURL")
        if not site_ca_host(picture.site, host_of(url)):
            continue
        ca = store.get("endpointCA") or {}
        missing = None
        if not ca:
            missing = "barmanObjectStore has no endpointCA"
        else:
            keys = source_keys(picture, placed.cluster, placed.namespace, "Secret", str(ca.get("name")))
            if keys is None:
                missing = f"its endpointCA Secret {placed.namespace}/{ca.get('name')} is not in the plan"
            elif ca.get("key") not in keys:
                missing = f"its endpointCA Secret {placed.namespace}/{ca.get('name')} has no key {ca.get('key')}"
        yield Client(placed, "CloudNativePG's backups (barmanObjectStore)", str(url), missing)




SITE_CA_SECRET_FIX = "the site CA's Secret fab-site-ca (key ca.crt, StorageCluster.site_ca)"

CLIENTS: tuple[ClientKind, ...] = (
    ClientKind("Envoy Gateway JWT provider", "SecurityPolicy `spec.jwt.providers[].remoteJWKS.uri`",
               "`remoteJWKS.backendRefs` to a Backend with `tls.caCertificateRefs` (or a BackendTLSPolicy), key `ca.crt`",
               f"fetch the keys through an Envoy Gateway Backend (remoteJWKS.backendRefs; extensionApis.enableBackend) whose "
               f"tls.caCertificateRefs names {SITE_CA_SECRET_FIX} in the policy's namespace", gateway_jwks),
    ClientKind("Grafana generic OAuth", "ConfigMap with `grafana.ini` `[auth.generic_oauth]` enabled",
               "`tls_client_ca`, a file the pods that mount the ConfigMap find in a Secret or ConfigMap",
               f"set grafana.ini auth.generic_oauth.tls_client_ca to a file of {SITE_CA_SECRET_FIX} mounted into Grafana "
               "(chart value extraSecretMounts)", grafana_oauth),
    ClientKind("JupyterHub OAuthenticator", "Secret `hub` (`values.yaml` `hub.config.GenericOAuthenticator.token_url`)",
               "`http_request_kwargs.ca_certs`, a file the hub mounts",
               f"set GenericOAuthenticator.http_request_kwargs.ca_certs to a file of {SITE_CA_SECRET_FIX} mounted into the hub "
               "(hub.extraVolumes, hub.extraVolumeMounts)", jupyterhub_oauth),
    ClientKind("Argo CD OIDC", "ConfigMap `argocd-cm` `oidc.config` `issuer`", "`oidc.config` `rootCA` (PEM)",
               "set rootCA in oidc.config (chart value configs.cm.\"oidc.config\") to the site's CA bundle", argocd_oidc),
    ClientKind("Argo CD repository", "Secret labelled `argocd.argoproj.io/secret-type: repository`",
               "`argocd-tls-certs-cm` key named after the repository's host",
               "add the site's CA bundle under the repository's host to argocd-tls-certs-cm (chart value configs.tls.certificates)",
               argocd_repository),
    ClientKind("Trino OAuth2", "ConfigMap `config.properties` with `http-server.authentication.oauth2.issuer`",
               "`oauth2-jwk.http-client.trust-store-path`, a file the coordinator mounts",
               "set oauth2-jwk.http-client.trust-store-path to a trust store of the site's CA mounted into the coordinator "
               "(components/engines/trino.py: trino-site-ca)", trino_oauth2),
    ClientKind("CloudNativePG backup", "postgresql.cnpg.io Cluster `spec.backup.barmanObjectStore.endpointURL`",
               "`barmanObjectStore.endpointCA` (Secret name and key)",
               f"set barmanObjectStore.endpointCA to {SITE_CA_SECRET_FIX} in the Cluster's namespace", cnpg_backup),
    ClientKind("Trino S3", "ConfigMap catalog `<name>.properties` with `fs.native-s3.enabled=true` and `s3.endpoint`",
               "`-Djavax.net.ssl.trustStore` in the jvm.config of the pods mounting the catalogs, a file they mount",
               "make a trust store of the public CAs and the site's the JVM's default: -Djavax.net.ssl.trustStore in the chart's "
               "coordinator.additionalJVMConfig and worker.additionalJVMConfig, the store mounted (components/engines/trino.py: "
               "trino-site-ca)", trino_s3),
    ClientKind("StarRocks S3", "a ConfigMap with `\"aws.s3.endpoint\"` beside a StarRocksCluster",
               "FE: `-Djavax.net.ssl.trustStore` in `feEnvVars` JAVA_TOOL_OPTIONS, a file of `configMaps`/`secrets`; CN: the "
               f"file {STARROCKS_CN_CA_FILE} of `configMaps`/`secrets`",
               "mount a trust store of the public CAs and the site's into the FE (configMaps) and name it in JAVA_TOOL_OPTIONS "
               f"(feEnvVars), and a PEM bundle of them at {STARROCKS_CN_CA_FILE} into the CN (components/engines/starrocks.py: "
               "starrocks-site-ca)", starrocks_s3),
    ClientKind("Polaris S3", "ConfigMap `plan.json` with `catalog.storageConfigInfo.endpoint`",
               "`-Djavax.net.ssl.trustStore` in the server's JAVA_TOOL_OPTIONS, a file it mounts",
               "mount a trust store of the public CAs and the site's into Polaris' server and name it in JAVA_TOOL_OPTIONS "
               "(chart values extraEnv, extraVolumes, extraVolumeMounts; components/polaris.py: polaris-site-ca)", polaris_s3),
    ClientKind("Spark application S3", "SparkApplication (applied or in a ConfigMap) whose `sparkConf` S3 endpoint "
               "(`spark.sql.catalog.*.s3.endpoint`, `spark.hadoop.fs.s3a.endpoint`) is the site's",
               "`-Djavax.net.ssl.trustStore` in the driver's and executor's JAVA_TOOL_OPTIONS or javaOptions, a file of a "
               "ConfigMap or Secret in `spec.volumes` mounted by each",
               "give the driver and executor JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=<store> with the store (the site's CA, "
               "and the public CAs if the JVM reaches Maven Central) mounted from a ConfigMap (components/engines/_spark_trust.py: spark-trust)",
               spark_application_s3),
    ClientKind("Spark Connect S3", "workload running `start-connect-server.sh` whose spark-defaults.conf (at SPARK_CONF_DIR) or "
               "`--conf` names the site's S3 endpoint",
               "`-Djavax.net.ssl.trustStore` in the server's JAVA_TOOL_OPTIONS and its executors' pod template, the file mounted in each",
               "give the server and its executors' pod template JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=<store> with the store "
               "mounted from a ConfigMap (components/engines/_spark_trust.py: spark-trust)", spark_connect_s3),
)
"""The client kinds of `trust.site-ca`, one function each to find them (docs/deploy-check.md lists them)."""


def trust_findings(picture: Picture) -> Iterator[Finding]:
    """`trust.site-ca`: a client calling a site-CA endpoint that does not trust the site's CA."""
    if picture.site.ca_bundle is None:
        return
    for kind in CLIENTS:
        for client in kind.clients(picture):
            if client.missing is None:
                continue
            yield Finding.of(
                "trust.site-ca", client.placed,
                f"{client.what} calls {client.url}, whose certificate the site's CA (ca_bundle) issued, but does not trust "
                f"that CA: {client.missing}",
                kind.fix,
            )
