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

import base64
import binascii
import configparser
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

from components.config import SiteConfig
from components.constants import S3_ENDPOINT
from components.data_access import s3_endpoint_internal
from fabctl.check.findings import Finding
from fabctl.check.picture import Picture
from fabctl.check.placed import Placed
from fabctl.helm import _Loader


def _load(text: str) -> Any:
    """YAML as libyaml parses it (the check's loader: `fabctl.helm._Loader`), several times faster than PyYAML's own."""
    return yaml.load(text, Loader=_Loader)


CA_KEY = "ca.crt"
"""The key a Secret or ConfigMap holds a CA bundle under, for Envoy Gateway's Backend and for the program's `fab-site-ca`."""
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")
ARGOCD_SECRET_TYPE = "argocd.argoproj.io/secret-type"
SECRET_MASK = "[secret]"
"""How a plan shows a Pulumi secret's value: unreadable to the check."""
_ENV_REF = re.compile(r"^\$\{ENV:[A-Za-z_][A-Za-z0-9_]*\}$")


def site_ca_host(site: SiteConfig, host: str | None) -> bool:
    """Whether the site's CA issued the certificate of `host`: a name under the site's domain, or its Keycloak's host."""
    if not host or site.ca_bundle is None:
        return False
    host = host.lower().rstrip(".")
    domain = site.domain.lower()
    return host == domain or host.endswith(f".{domain}") or host == (urlsplit(str(site.keycloak.url)).hostname or "").lower()


def host_of(url: Any) -> str | None:
    return urlsplit(url).hostname if isinstance(url, str) and "://" in url else None


@dataclass(frozen=True)
class Client:
    """One client of the picture that calls a site-CA endpoint, and what it lacks to trust the CA (None: it trusts it)."""

    placed: Placed
    what: str
    """The client in words: `Grafana's generic OAuth sign-in (grafana.ini auth.generic_oauth)`."""
    url: str
    missing: str | None


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
# What the kinds share: pods, mounts, sources.


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec") or {})
    return (spec.get("template") or {}).get("spec") if kind in WORKLOADS else None


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def workloads_using(picture: Picture, client: Placed, volume_kind: str) -> list[tuple[Placed, dict[str, Any]]]:
    """The workloads of the client's namespace whose pods mount it (a ConfigMap or Secret) as a volume."""
    field, key = ("configMap", "name") if volume_kind == "ConfigMap" else ("secret", "secretName")
    found = []
    for placed in picture.placed:
        if placed.cluster != client.cluster or placed.namespace != client.namespace:
            continue
        spec = pod_spec(placed.obj)
        if spec and any((v.get(field) or {}).get(key) == client.name for v in spec.get("volumes") or []):
            found.append((placed, spec))
    return found


def source_keys(picture: Picture, cluster: str, namespace: str | None, kind: str, name: str) -> set[str] | None:
    """The keys of a Secret or ConfigMap in the picture (applied or derived); None when there is none. Keys of a Secret
    whose data the plan cannot show are the keys it names."""
    objs = picture.by_name.get((cluster, kind, namespace, name))
    if not objs:
        return None
    keys: set[str] = set()
    for placed in objs:
        for field in ("data", "stringData", "binaryData"):
            keys.update((placed.obj.get(field) or {}).keys())
    return keys


def mounted_file(picture: Picture, where: Placed, spec: dict[str, Any], path: str) -> str | None:
    """None when every container that mounts anything at the path's folder finds the file `path` there from a Secret or
    ConfigMap of the picture; else what is wrong, in words."""
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for container in containers(spec):
        for mount in container.get("volumeMounts") or []:
            mount_path = str(mount.get("mountPath", "")).rstrip("/")
            if mount.get("subPath") and mount_path == path:
                file_key = str(mount["subPath"])
            elif path.startswith(f"{mount_path}/") and not mount.get("subPath"):
                file_key = path[len(mount_path) + 1:]
            else:
                continue
            volume = volumes.get(mount.get("name")) or {}
            if "secret" in volume:
                kind, name = "Secret", volume["secret"].get("secretName")
            elif "configMap" in volume:
                kind, name = "ConfigMap", volume["configMap"].get("name")
            else:
                continue
            keys = source_keys(picture, where.cluster, where.namespace, kind, str(name))
            if keys is None:
                return f"{where.subject} mounts {kind} {where.namespace}/{name} at {mount_path}, which the plan does not create"
            if file_key not in keys:
                return f"{kind} {where.namespace}/{name}, mounted at {mount_path}, has no key {file_key}"
            return None
    return f"{where.subject} mounts nothing at {path}"


def _decoded(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def holds_certificate(value: Any) -> bool:
    return isinstance(value, str) and "-----BEGIN CERTIFICATE-----" in value


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
                config = _load((placed.obj.get("data") or {}).get("envoy-gateway.yaml") or "") or {}
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
        text = _decoded((placed.obj.get("data") or {}).get("values.yaml"))
        try:
            values = _load(text) if text else None
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
            config = _load(text) if isinstance(text, str) else None
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
        url = ((placed.obj.get("stringData") or {}).get("url") or _decoded((placed.obj.get("data") or {}).get("url")))
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


# --------------------------------------------------------------------------------------------------------------------
# The engines' S3 clients: JVMs trusting a store named by -Djavax.net.ssl.trustStore, and StarRocks' CN's libcurl.

TRUST_STORE_OPTION = re.compile(r"(?:^|\s)-Djavax\.net\.ssl\.trustStore=(\S+)")


def _site_s3_endpoint(picture: Picture, value: Any) -> str | None:
    """An S3 endpoint as a client names it: a URL, or a reference to this site's internal endpoint (the S3 Secrets'
    variable `AWS_ENDPOINT_URL_S3`, as Trino's `${ENV:...}` or a shell's `$...`); None for anything else (a peer's
    endpoint read from its Secret)."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if value in (f"${{ENV:{S3_ENDPOINT}}}", f"${S3_ENDPOINT}", f"${{{S3_ENDPOINT}}}"):
        return s3_endpoint_internal(picture.site.domain, picture.site.storage.object_store)
    return value if "://" in value else None


def _properties(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in (line.split("=", 1) for line in text.splitlines()
                                                if "=" in line and not line.lstrip().startswith("#"))}


def _store_missing(picture: Picture, where: Placed, spec: dict[str, Any], options: str | None, source: str) -> str | None:
    """What keeps a JVM whose options are `options` (read from `source`) from trusting a mounted trust store."""
    found = TRUST_STORE_OPTION.search(options or "")
    if not found:
        return f"{source} sets no -Djavax.net.ssl.trustStore, so the JVM trusts the JDK's CAs only"
    problem = mounted_file(picture, where, spec, found.group(1))
    return f"its JVM trust store {found.group(1)} is not there: {problem}" if problem else None


def _jvm_config(picture: Picture, where: Placed, spec: dict[str, Any]) -> tuple[str | None, str]:
    """The `jvm.config` of a Trino pod (a mounted ConfigMap's key) and where it is, in words."""
    for volume in spec.get("volumes") or []:
        name = (volume.get("configMap") or {}).get("name")
        for placed in picture.by_name.get((where.cluster, "ConfigMap", where.namespace, str(name)), []) if name else []:
            text = (placed.obj.get("data") or {}).get("jvm.config")
            if isinstance(text, str):
                return text, f"the jvm.config of {where.subject} (ConfigMap {where.namespace}/{name})"
    return None, f"{where.subject} mounts no jvm.config, which"


def trino_s3(picture: Picture) -> Iterator[Client]:
    """Trino's Iceberg catalogs' native S3 file system (a catalog's `fs.native-s3.enabled=true`, `s3.endpoint`): AWS SDK
    v2 verifies the object store with the JVM's default trust, which `-Djavax.net.ssl.trustStore` in the jvm.config of
    every pod that mounts the catalogs (coordinator and workers) names; that pod must mount the store. An endpoint read
    from the environment's `AWS_ENDPOINT_URL_S3` is the site's internal one."""
    for placed in picture.placed:
        if placed.kind != "ConfigMap":
            continue
        for key, text in sorted((placed.obj.get("data") or {}).items()):
            if not key.endswith(".properties") or not isinstance(text, str):
                continue
            props = _properties(text)
            url = _site_s3_endpoint(picture, props.get("s3.endpoint"))
            if props.get("fs.native-s3.enabled") != "true" or not site_ca_host(picture.site, host_of(url)):
                continue
            users = workloads_using(picture, placed, "ConfigMap")
            missing = None if users else f"no workload of {placed.namespace} mounts it, so nothing can be said of its JVMs' trust"
            for workload, spec in users:
                options, source = _jvm_config(picture, workload, spec)
                missing = missing or _store_missing(picture, workload, spec, options, source)
            yield Client(placed, f"Trino's S3 file system of the catalog {key.removesuffix('.properties')} (fs.native-s3)",
                         str(url), missing)


STARROCKS_CN_CA_FILE = "/etc/ssl/certs/ca-certificates.crt"
"""The CA file the CN's libcurl reads in the -ubuntu images (StarRocks issues 23506, 27766: curl's compiled-in path)."""
_STARROCKS_S3_ENDPOINT = re.compile(r'"aws\.s3\.endpoint"\s*=\s*"([^"]*)"')


def _operator_mounted(picture: Picture, cluster: Placed, part: dict[str, Any], path: str) -> str | None:
    """None when a StarRocks component (`starRocksFeSpec`, `starRocksCnSpec`) mounts the file `path` from a ConfigMap or
    Secret of the picture (its `configMaps`, `secrets`: name, mountPath, subPath); else what is wrong."""
    for field, kind in (("configMaps", "ConfigMap"), ("secrets", "Secret")):
        for mount in part.get(field) or []:
            mount_path = str(mount.get("mountPath", "")).rstrip("/")
            if mount.get("subPath") and mount_path == path:
                file_key = str(mount["subPath"])
            elif not mount.get("subPath") and path.startswith(f"{mount_path}/"):
                file_key = path[len(mount_path) + 1:]
            else:
                continue
            keys = source_keys(picture, cluster.cluster, cluster.namespace, kind, str(mount.get("name")))
            if keys is None:
                return f"it mounts {kind} {cluster.namespace}/{mount.get('name')} at {mount_path}, which the plan does not create"
            return None if file_key in keys else f"{kind} {cluster.namespace}/{mount.get('name')}, mounted at {mount_path}, has no key {file_key}"
    return f"it mounts nothing at {path}"


def starrocks_s3(picture: Picture) -> Iterator[Client]:
    """StarRocks' S3 clients (the setup's storage volume and Iceberg catalog, `"aws.s3.endpoint"` in a ConfigMap of the
    StarRocksCluster's namespace): the FE (Java) verify the object store with their JVM's default trust, which
    `JAVA_TOOL_OPTIONS` in `feEnvVars` names and the FE mount; the CN (AWS SDK for C++ over libcurl) with the CA file
    libcurl was built to read, which the CN mount. An endpoint read from `$AWS_ENDPOINT_URL_S3` is the site's internal one."""
    for placed in picture.placed:
        if placed.kind != "ConfigMap":
            continue
        urls = [u for text in (placed.obj.get("data") or {}).values() if isinstance(text, str)
                for u in (_site_s3_endpoint(picture, m) for m in _STARROCKS_S3_ENDPOINT.findall(text))
                if site_ca_host(picture.site, host_of(u))]
        if not urls:
            continue
        clusters = [p for p in picture.placed if p.cluster == placed.cluster and p.namespace == placed.namespace
                    and p.kind == "StarRocksCluster"]
        for cluster in clusters:
            spec = cluster.obj.get("spec") or {}
            fe, cn = spec.get("starRocksFeSpec") or {}, spec.get("starRocksCnSpec") or {}
            options = " ".join(str(e.get("value", "")) for e in fe.get("feEnvVars") or [] if e.get("name") == "JAVA_TOOL_OPTIONS")
            found = TRUST_STORE_OPTION.search(options)
            if not found:
                missing = "its FE's JAVA_TOOL_OPTIONS (feEnvVars) set no -Djavax.net.ssl.trustStore, so they trust the JDK's CAs only"
            else:
                problem = _operator_mounted(picture, cluster, fe, found.group(1))
                missing = f"its FE's JVM trust store {found.group(1)} is not there: {problem}" if problem else None
            yield Client(cluster, "StarRocks' FE S3 client (storage volume, Iceberg catalog)", urls[0], missing)
            if cn:
                problem = _operator_mounted(picture, cluster, cn, STARROCKS_CN_CA_FILE)
                yield Client(cluster, "StarRocks' CN S3 client (AWS SDK for C++, libcurl)", urls[0],
                             f"its CN's CA file {STARROCKS_CN_CA_FILE} is the image's: {problem}" if problem else None)


def polaris_s3(picture: Picture) -> Iterator[Client]:
    """Polaris' server reading and writing table metadata on S3 (its setup plan's catalog `storageConfigInfo.endpoint`,
    ConfigMap key `plan.json`): AWS SDK v2 in its JVM verifies the object store with the default trust, which
    `JAVA_TOOL_OPTIONS` names; the server's pods (label app.kubernetes.io/name: polaris) must mount the store."""
    for placed in picture.placed:
        text = (placed.obj.get("data") or {}).get("plan.json") if placed.kind == "ConfigMap" else None
        try:
            plan = _load(text) if isinstance(text, str) else None
        except yaml.YAMLError:
            continue
        info = ((plan or {}).get("catalog") or {}).get("storageConfigInfo") if isinstance(plan, dict) else None
        url = (info or {}).get("endpoint") if isinstance(info, dict) else None
        if not site_ca_host(picture.site, host_of(url)):
            continue
        servers = [(p, spec) for p in picture.placed if p.cluster == placed.cluster and p.namespace == placed.namespace
                   and p.kind in WORKLOADS and (spec := pod_spec(p.obj)) is not None
                   and ((((p.obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {})
                   .get("app.kubernetes.io/name") == "polaris"]
        missing = None if servers else f"no Polaris server (app.kubernetes.io/name: polaris) in {placed.namespace} to check"
        for server, spec in servers:
            for container in spec.get("containers") or []:
                options = " ".join(str(e.get("value", "")) for e in container.get("env") or [] if e.get("name") == "JAVA_TOOL_OPTIONS")
                missing = missing or _store_missing(picture, server, spec, options,
                                                    f"the JAVA_TOOL_OPTIONS of {server.subject} container {container.get('name')}")
        yield Client(placed, "Polaris' S3 storage (the catalog's storageConfigInfo)", str(url), missing)
# Spark's JVMs (Iceberg's S3FileIO and Hadoop's S3A verify S3 against the JVM's default trust store).

S3_ENDPOINT_KEY = re.compile(r"^spark\.(?:sql\.catalog\.[^.]+\.s3\.endpoint|hadoop\.fs\.s3a\.(?:bucket\.[^.]+\.)?endpoint)$")
"""The sparkConf keys that name an S3 endpoint: an Iceberg catalog's (`s3.endpoint`) and Hadoop S3A's (also per bucket)."""
_SPARK_ENV_REF = re.compile(r"^(?:env:([A-Za-z_]\w*)|\$\{env[.:]([A-Za-z_]\w*)\})$")
"""`env:NAME` (Iceberg), `${env.NAME}` (Hadoop), `${env:NAME}`: a value read from the environment."""


def _s3_url(picture: Picture, value: str, env_from: list[Any], cluster: str, namespace: str | None) -> str:
    """The S3 endpoint a sparkConf value names: written out, or read from the environment, from the Secret the pod's
    envFrom names when the plan shows its value, else the site's internal S3 endpoint (what StorageCluster puts there)."""
    reference = _SPARK_ENV_REF.match(value.strip())
    if reference is None:
        return value if "://" in value else f"https://{value}"  # S3A: a bare host is https (fs.s3a.connection.ssl.enabled)
    variable = reference.group(1) or reference.group(2)
    for source in env_from:
        name = ((source or {}).get("secretRef") or {}).get("name")
        for placed in picture.by_name.get((cluster, "Secret", namespace, str(name)), []):
            found = (placed.obj.get("stringData") or {}).get(variable) or _decoded((placed.obj.get("data") or {}).get(variable))
            if isinstance(found, str) and found != SECRET_MASK:
                return found
    from components.data_access import s3_endpoint_internal

    return s3_endpoint_internal(picture.site.domain, picture.site.storage.object_store)


def _jvm_trust_missing(picture: Picture, cluster: str, namespace: str | None, role: str, env: list[Any], options: str,
                       mounts: list[Any], volumes: list[Any]) -> str | None:
    """What keeps one Spark JVM (its env, JVM options, mounts and the pod's volumes) from reading a trust store; None if
    it reads one from a ConfigMap or Secret of the plan. (-Djavax.net.ssl.trustStore replaces the JDK's CAs: the store
    is the JVM's whole trust.)"""
    tool_options = " ".join(str(e.get("value") or "") for e in env or [] if isinstance(e, dict) and e.get("name") == "JAVA_TOOL_OPTIONS")
    match = TRUST_STORE_OPTION.search(f"{tool_options} {options}")
    if match is None:
        return f"its {role} sets no -Djavax.net.ssl.trustStore (JAVA_TOOL_OPTIONS or javaOptions)"
    path = match.group(1)
    jvm = Placed(cluster, {"kind": "Pod", "metadata": {"name": role, "namespace": namespace}}, {}, None, namespace)
    problem = mounted_file(picture, jvm, {"volumes": volumes, "containers": [{"volumeMounts": mounts}]}, path)
    if problem is not None:
        return f"its {role}'s trust store {path} is not there: {problem.replace(jvm.subject, f'the {role}')}"
    return _store_lacks_site_ca(picture, cluster, namespace, role, path, mounts, volumes)


def _store_lacks_site_ca(picture: Picture, cluster: str, namespace: str | None, role: str, path: str, mounts: list[Any],
                         volumes: list[Any]) -> str | None:
    """What the PKCS#12 store at `path` (a ConfigMap's binaryData the plan shows) lacks of the site's CA; None when it holds
    every certificate of `ca_bundle`, or its bytes are not in the plan."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    by_name = {v.get("name"): v for v in volumes}
    for mount in mounts:
        folder = str(mount.get("mountPath", "")).rstrip("/")
        config_map = (by_name.get(mount.get("name")) or {}).get("configMap") or {}
        if mount.get("subPath") or not path.startswith(f"{folder}/") or not config_map:
            continue
        for source in picture.by_name.get((cluster, "ConfigMap", namespace, str(config_map.get("name"))), []):
            data = (source.obj.get("binaryData") or {}).get(path[len(folder) + 1:])
            if not isinstance(data, str):
                continue
            try:
                with warnings.catch_warnings():  # a public root with a negative serial (components/engines/_spark_trust.py)
                    warnings.filterwarnings("ignore", message="Parsed a serial number which wasn't positive")
                    store = pkcs12.load_pkcs12(base64.b64decode(data), None)
            except (ValueError, binascii.Error):
                return f"its {role}'s trust store {path} (ConfigMap {namespace}/{config_map.get('name')}) is no password-less PKCS#12 file"
            held = {c.certificate.public_bytes(Encoding.DER) for c in store.additional_certs}
            from components.config.views import read_ca_bundle

            try:
                site = x509.load_pem_x509_certificates(read_ca_bundle(str(picture.site.ca_bundle)).encode())
            except (OSError, ValueError):
                return None  # the site's bundle is not readable here: the config's own rules say so
            if not all(c.public_bytes(Encoding.DER) in held for c in site):
                return f"its {role}'s trust store {path} (ConfigMap {namespace}/{config_map.get('name')}) lacks the site's CA"
    return None


def spark_application_s3(picture: Picture) -> Iterator[Client]:
    """SparkApplications (applied, or held in a ConfigMap such as Airflow's `spark-application` and `platform.json`) whose
    sparkConf names a site-CA S3 endpoint: the driver and the executors each need a trust store in their JVM options and
    mounted (the operator's webhook mounts `spec.volumes` by the driver's and executor's `volumeMounts`)."""
    from fabctl.check.settings import _applications, _spec

    for placed, where, app in _applications(picture):
        spec = _spec(app)
        conf = spec.get("sparkConf") or {}
        namespace = (app.get("metadata") or {}).get("namespace") or placed.namespace
        for key, value in sorted(conf.items()):
            if not S3_ENDPOINT_KEY.match(str(key)) or not isinstance(value, str):
                continue
            missing = None
            for role in ("driver", "executor"):
                pod = spec.get(role) or {}
                url = _s3_url(picture, value, pod.get("envFrom") or [], placed.cluster, namespace)
                if urlsplit(url).scheme != "https" or not site_ca_host(picture.site, host_of(url)):
                    break
                options = " ".join(str(x) for x in (pod.get("javaOptions"), conf.get(f"spark.{role}.extraJavaOptions")) if x)
                missing = missing or _jvm_trust_missing(picture, placed.cluster, namespace, role, pod.get("env") or [], options,
                                                        pod.get("volumeMounts") or [], spec.get("volumes") or [])
            else:
                name = (app.get("metadata") or {}).get("name") or "(template)"
                at = f" ({where})" if where else ""
                yield Client(placed, f"SparkApplication {namespace}/{name}{at}'s S3 reads ({key})", url, missing)
            break  # one endpoint per application is enough to name it


def spark_connect_s3(picture: Picture) -> Iterator[Client]:
    """The Spark Connect server (a workload running `start-connect-server.sh`) whose spark-defaults.conf (the ConfigMap at
    its SPARK_CONF_DIR) names a site-CA S3 endpoint: its JVM and its executors' (the pod template file's ConfigMap) need a
    trust store."""
    for placed in picture.placed:
        spec = pod_spec(placed.obj)
        for container in (containers(spec) if spec else []):
            if not any("start-connect-server.sh" in str(c) for c in container.get("command") or []):
                continue
            env = container.get("env") or []
            conf_dir = next((str(e.get("value")) for e in env if e.get("name") == "SPARK_CONF_DIR"), "/opt/spark/conf")
            conf = dict(_spark_defaults(picture, placed, spec, container, conf_dir))
            conf.update(a.split("=", 1) for a in container.get("args") or [] if isinstance(a, str) and "=" in a and a.startswith("spark."))
            endpoint = next(((k, v) for k, v in sorted(conf.items()) if S3_ENDPOINT_KEY.match(k)), None)
            if endpoint is None:
                continue
            url = _s3_url(picture, endpoint[1], container.get("envFrom") or [], placed.cluster, placed.namespace)
            if urlsplit(url).scheme != "https" or not site_ca_host(picture.site, host_of(url)):
                continue
            missing = _jvm_trust_missing(picture, placed.cluster, placed.namespace, "server", env, conf.get("spark.driver.extraJavaOptions", ""),
                                         container.get("volumeMounts") or [], spec.get("volumes") or [])
            missing = missing or _connect_executors_missing(picture, placed, spec, container, conf)
            yield Client(placed, f"the Spark Connect server's S3 reads ({endpoint[0]})", url, missing)


def _mounted_text(picture: Picture, placed: Placed, spec: dict[str, Any], container: dict[str, Any], path: str) -> str | None:
    """The text of the file `path` as `container` finds it in a mounted ConfigMap of the picture, or None."""
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        mount_path = str(mount.get("mountPath", "")).rstrip("/")
        if not path.startswith(f"{mount_path}/") or mount.get("subPath"):
            continue
        config_map = (volumes.get(mount.get("name")) or {}).get("configMap") or {}
        for source in picture.by_name.get((placed.cluster, "ConfigMap", placed.namespace, str(config_map.get("name"))), []):
            text = (source.obj.get("data") or {}).get(path[len(mount_path) + 1:])
            if isinstance(text, str):
                return text
    return None


def _spark_defaults(picture: Picture, placed: Placed, spec: dict[str, Any], container: dict[str, Any], conf_dir: str) -> Iterator[tuple[str, str]]:
    text = _mounted_text(picture, placed, spec, container, f"{conf_dir.rstrip('/')}/spark-defaults.conf") or ""
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and not parts[0].startswith("#"):
            yield parts[0], parts[1]


def _connect_executors_missing(picture: Picture, placed: Placed, spec: dict[str, Any], container: dict[str, Any],
                               conf: dict[str, str]) -> str | None:
    path = conf.get("spark.kubernetes.executor.podTemplateFile")
    text = _mounted_text(picture, placed, spec, container, path) if path else None
    try:
        template = _load(text) if text else None
    except yaml.YAMLError:
        template = None
    if not isinstance(template, dict):
        return None if conf.get("spark.executor.extraJavaOptions", "") and TRUST_STORE_OPTION.search(conf["spark.executor.extraJavaOptions"]) \
            else "its executors' pod template (spark.kubernetes.executor.podTemplateFile) is not in the plan, so nothing gives them a trust store"
    pod = template.get("spec") or {}
    name = conf.get("spark.kubernetes.executor.podTemplateContainerName")
    executors = [c for c in pod.get("containers") or [] if name is None or c.get("name") == name][:1]
    for executor in executors:
        return _jvm_trust_missing(picture, placed.cluster, placed.namespace, "executors' pod template", executor.get("env") or [],
                                  conf.get("spark.executor.extraJavaOptions", ""), executor.get("volumeMounts") or [], pod.get("volumes") or [])
    return "its executors' pod template has no container"


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
               "(chart values extraEnv, extraVolumes, extraVolumeMounts; components/storage.py: polaris-site-ca)", polaris_s3),
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
