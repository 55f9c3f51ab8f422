"""The engines' S3 clients of the site-CA trust rule (fabctl/check/trust.py): JVMs trusting a store named by
-Djavax.net.ssl.trustStore (Trino, StarRocks' FE, Polaris, Spark), and StarRocks' CN's libcurl."""

from __future__ import annotations

import base64
import binascii
import re
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import yaml

from components.constants import S3_ENDPOINT
from components.data_access import s3_endpoint_internal
from fabctl.check.picture import Picture
from fabctl.check.placed import Placed
from fabctl.check.trust_reading import (
    SECRET_MASK,
    WORKLOADS,
    Client,
    containers,
    decoded,
    host_of,
    load_yaml,
    mounted_file,
    pod_spec,
    site_ca_host,
    source_keys,
    workloads_using,
)

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
            plan = load_yaml(text) if isinstance(text, str) else None
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
            found = (placed.obj.get("stringData") or {}).get(variable) or decoded((placed.obj.get("data") or {}).get(variable))
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
                with warnings.catch_warnings():  # a public root with a negative serial (components/jvm_trust.py trust_store)
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
        template = load_yaml(text) if text else None
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
