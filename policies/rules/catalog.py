"""One catalog authority (DESIGN section 2, storage row): Polaris is the only Iceberg catalog, whatever the engine.

Every engine's catalog configuration in the plan is read property by property (rules/_props.py): Spark catalogs
(`spark.sql.catalog.<name>`, `.type`, `.catalog-impl`, `.uri`, `spark.sql.catalogImplementation`), Trino catalog
files (`connector.name`, `iceberg.catalog.type`, `iceberg.rest-catalog.uri`), StarRocks external catalogs (`type`,
`iceberg.catalog.type`, `iceberg.catalog.uri`) and Hive settings (`hive.metastore.uri(s)`) in Helm values, ConfigMaps,
Secrets and custom resources, on every cluster. One rule per property family:

- the catalog's kind: an Iceberg REST catalog, never Hive, Glue, JDBC, Hadoop, Nessie or another table format's;
- its URI: this site's Polaris REST endpoint, or a linked peer site's Polaris as read from the peer's stack;
- no Hive metastore address anywhere;
- AIStor's own table catalog (S3 Tables) stays unreachable: every MinIO policy denies `s3tables:*`.

This site's Polaris REST endpoint is derived from the plan, not configured: the LoadBalancer Service that selects the
Polaris pods is what every cluster reaches Polaris through, so its host names (the DNS name it is published under,
its `external-dns.alpha.kubernetes.io/hostname` annotation), its VIP and its port, with Polaris's Iceberg REST path,
are the URIs a catalog may use; when that Service is a ClusterMesh global service (`service.cilium.io/global: "true"`),
so is its cluster-local name (`<name>.<namespace>.svc`, and with `.cluster.local`). A setting would have to be written
per site and could drift from the Service.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any
from urllib.parse import urlsplit

from pulumi_policy import ReportViolation, StackValidationArgs

from rules._k8s import HELM_RELEASE, UNKNOWN, field, k8s_object, name_of, namespace_of, objects, plain, provider_name, undecided
from rules._policy import stack_rule
from rules._props import Config, configs

IAM_POLICY = "minio:index/iamPolicy:IamPolicy"
STACK_REFERENCE = "pulumi:pulumi:StackReference"

POLARIS_POD_LABEL = ("app.kubernetes.io/name", "polaris")
"""The label the Polaris chart gives its pods: a LoadBalancer Service selecting it is Polaris's endpoint."""
HOSTNAME_ANNOTATION = "external-dns.alpha.kubernetes.io/hostname"
LB_IPS_ANNOTATION = "lbipam.cilium.io/ips"
GLOBAL_SERVICE_ANNOTATION = "service.cilium.io/global"
"""On Polaris's Service: a ClusterMesh global service, which every cluster of the site reaches by its cluster-local name."""
POLARIS_REST_PATH = "/api/catalog"
"""Where Polaris serves the Iceberg REST API."""

REST = "rest"
ICEBERG_REST_IMPL = "org.apache.iceberg.rest.RESTCatalog"
ICEBERG_SPARK_CATALOGS = {"org.apache.iceberg.spark.SparkCatalog", "org.apache.iceberg.spark.SparkSessionCatalog"}
SPARK_JDBC_CATALOG = "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog"
"""External databases (not a table catalog), as Trino's JDBC connectors: allowed."""
TRINO_LAKEHOUSE_CONNECTORS = {"iceberg", "hive", "delta_lake", "hudi", "lakehouse"}
"""Trino connectors over a table catalog; only iceberg on a REST catalog is Polaris. Others (postgresql, ...) reach
external databases, which the design allows."""
STARROCKS_LAKEHOUSE_TYPES = {"iceberg", "hive", "hudi", "deltalake", "paimon", "unified"}
SPARK_CATALOG = re.compile(r"^spark\.sql\.catalog\.([^.]+)(?:\.(.+))?$")
ENV_REFERENCE = re.compile(r"^(?:\$(?:\{(?:ENV:|env:)?([A-Za-z_]\w*)\}|([A-Za-z_]\w*))|env:([A-Za-z_]\w*))$")
"""`${ENV:X}` (Trino), `env:X` (Iceberg's own, what Spark's catalog options use), `${env:X}`, `$X` / `${X}` (shell)."""
METASTORE_KEY = re.compile(r"(^|\.)hive\.metastore\.uris?$")

KIND_ALLOWED = "every catalog is Polaris's Iceberg REST catalog"


def _value(value: Any) -> str:
    return "<unknown during preview>" if value is UNKNOWN else str(value)


# fab-single-catalog-authority: the catalog's kind -----------------------------------------------------------------

def _spark_kind(props: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, problem) for each Spark catalog setting that makes a catalog other than an Iceberg REST one."""
    found = []
    if str(props.get("spark.sql.catalogImplementation", "")).lower() == "hive":
        found.append(("spark.sql.catalogImplementation",
                      "makes Spark's session catalog a Hive metastore; use spark.sql.catalogImplementation=in-memory"))
    names = sorted({m.group(1) for key in props if (m := SPARK_CATALOG.match(key))})
    for name in names:
        base = f"spark.sql.catalog.{name}"
        impl, kind, custom = props.get(base), props.get(f"{base}.type"), props.get(f"{base}.catalog-impl")
        if impl is not None and impl is not UNKNOWN and impl not in ICEBERG_SPARK_CATALOGS | {SPARK_JDBC_CATALOG}:
            found.append((base, f"is not an Iceberg catalog; {KIND_ALLOWED} (org.apache.iceberg.spark.SparkCatalog, type rest)"))
        if kind is not None and kind is not UNKNOWN and str(kind).lower() != REST:
            found.append((f"{base}.type", f"is not a REST catalog; {KIND_ALLOWED} (type rest)"))
        if custom is not None and custom is not UNKNOWN and custom != ICEBERG_REST_IMPL:
            found.append((f"{base}.catalog-impl", f"is not the REST catalog; {KIND_ALLOWED} ({ICEBERG_REST_IMPL})"))
        if impl in ICEBERG_SPARK_CATALOGS and kind is None and custom is None:
            found.append((base, f"has no type, so Iceberg makes it a Hive catalog; set {base}.type=rest"))
    return found


def _trino_kind(props: dict[str, Any]) -> list[tuple[str, str]]:
    connector = props.get("connector.name")
    if connector is None or connector is UNKNOWN or str(connector).lower() not in TRINO_LAKEHOUSE_CONNECTORS:
        return []
    if str(connector).lower() != "iceberg":
        return [("connector.name", f"is a table catalog outside Polaris; {KIND_ALLOWED} (connector.name=iceberg, iceberg.catalog.type=rest)")]
    if "iceberg.catalog.type" not in props:
        return [("connector.name", "has no iceberg.catalog.type, so Trino uses a Hive metastore; set iceberg.catalog.type=rest")]
    return []


def _starrocks_kind(props: dict[str, Any]) -> list[tuple[str, str]]:
    kind = str(props.get("type", "")).lower()
    if kind not in STARROCKS_LAKEHOUSE_TYPES:
        return []
    if kind != "iceberg":
        return [("type", f"is a table catalog outside Polaris; {KIND_ALLOWED} (type iceberg, iceberg.catalog.type rest)")]
    if "iceberg.catalog.type" not in props:
        return [("type", "has no iceberg.catalog.type; set iceberg.catalog.type=rest")]
    return []


def _iceberg_type(props: dict[str, Any]) -> list[tuple[str, str]]:
    kind = props.get("iceberg.catalog.type")
    if kind is None or kind is UNKNOWN or str(kind).lower() == REST:
        return []
    return [("iceberg.catalog.type", f"is not a REST catalog; {KIND_ALLOWED} (iceberg.catalog.type=rest)")]


@stack_rule("fab-single-catalog-authority",
            "Every engine's catalog is an Iceberg REST catalog (no Hive, Glue, JDBC, Hadoop or Nessie catalog, no other table format).",
            place=210,
            docs="every engine's catalog is an Iceberg REST catalog: Spark catalogs' class, `type`, `catalog-impl` and "
                 "`spark.sql.catalogImplementation`, Trino's `connector.name` and `iceberg.catalog.type`, StarRocks external "
                 "catalogs' `type` and `iceberg.catalog.type`")
def single_catalog_authority(args: StackValidationArgs, report: ReportViolation) -> None:
    """Reads Spark catalogs, `spark.sql.catalogImplementation`, Trino catalogs' `connector.name` and
    `iceberg.catalog.type`, and StarRocks external catalogs' `type` and `iceberg.catalog.type`.

    Unknown values: skipped (a catalog's kind is literal text in the program, never another resource's output)."""
    for config in configs(args.resources):
        for source, props in config.sources().items():
            sql = any(p.sql_catalog for p in config.props if p.source == source)
            problems = (_starrocks_kind(props) if sql else [*_spark_kind(props), *_trino_kind(props)]) + _iceberg_type(props)
            for key, problem in problems:
                report(f"{config.where(source)} sets {key}={_value(props[key])}, which {problem}",
                       config.resource.urn)


# fab-catalog-uri-polaris: the catalog's URI -----------------------------------------------------------------------

def polaris_endpoints(resources: list[Any]) -> list[tuple[str, int]]:
    """(host, port) of every LoadBalancer Service selecting the Polaris pods: its published host names and its VIPs, and
    its cluster-local names when it is a ClusterMesh global service."""
    found: list[tuple[str, int]] = []
    for _, obj in objects(resources):
        spec = obj.get("spec")
        if obj["kind"] != "Service" or not isinstance(spec, dict) or spec.get("type") != "LoadBalancer":
            continue
        if (spec.get("selector") or {}).get(POLARIS_POD_LABEL[0]) != POLARIS_POD_LABEL[1]:
            continue
        annotations = field(obj, "metadata", "annotations")
        annotations = annotations if isinstance(annotations, dict) else {}
        hosts = [h.strip().rstrip(".").lower() for key in (HOSTNAME_ANNOTATION, LB_IPS_ANNOTATION)
                 if isinstance(annotations.get(key), str) for h in annotations[key].split(",") if h.strip()]
        if str(annotations.get(GLOBAL_SERVICE_ANNOTATION, "")).lower() == "true":
            local = f"{name_of(obj)}.{namespace_of(obj)}.svc"
            hosts += [local, f"{local}.cluster.local"]
        # The engine sends numbers as doubles.
        ports = [int(p["port"]) for p in spec.get("ports") or [] if isinstance(p, dict) and isinstance(p.get("port"), (int, float))]
        found += [(host, port) for host in hosts for port in ports]
    return sorted(set(found))


def _is_polaris(uri: str, endpoints: list[tuple[str, int]]) -> bool:
    try:
        parts = urlsplit(uri)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return False
    return (parts.scheme in ("http", "https") and (parts.hostname or "", port) in endpoints
            and parts.path.rstrip("/") == POLARIS_REST_PATH and not parts.query)


def _uri_keys(props: dict[str, Any], sql: bool) -> list[str]:
    """The URI settings of the catalogs in one source (REST catalogs without one are reported with their type)."""
    if sql:
        return ["iceberg.catalog.uri"] if str(props.get("type", "")).lower() == "iceberg" else []
    keys = [k for k in props if k in ("iceberg.rest-catalog.uri", "iceberg.catalog.uri")
            or ((m := SPARK_CATALOG.match(k)) and m.group(2) == "uri")]
    if str(props.get("iceberg.catalog.type", "")).lower() == REST and not {"iceberg.rest-catalog.uri", "iceberg.catalog.uri"} & set(props):
        keys.append("iceberg.rest-catalog.uri" if "connector.name" in props else "iceberg.catalog.uri")
    for name in sorted({m.group(1) for key in props if (m := SPARK_CATALOG.match(key))}):
        base = f"spark.sql.catalog.{name}"
        is_rest = str(props.get(f"{base}.type", "")).lower() == REST or props.get(f"{base}.catalog-impl") == ICEBERG_REST_IMPL
        if is_rest and f"{base}.uri" not in props:
            keys.append(f"{base}.uri")
    return keys


class StackRead:
    """A value read from another stack of this project (a federated peer's output)."""

    def __init__(self, stack: str):
        self.stack = stack


class _Environment:
    """What an environment reference in a Helm release's values resolves to: the release's `env` literals, else the
    Secrets its `envFrom` names (in its namespace, on its cluster)."""

    def __init__(self, resources: list[Any]):
        self._secrets: dict[tuple[str, str, str], Any] = {}
        for resource, obj in objects(resources):
            if obj["kind"] == "Secret":
                self._secrets[(provider_name(resource), namespace_of(obj), name_of(obj))] = resource

    def resolve(self, config: Config, variable: str) -> tuple[str, Any] | None:
        """(what holds it, its value or the peer stack it is read from), or None when nothing the release names holds it."""
        if config.resource.resource_type != HELM_RELEASE:
            return None
        props = plain(config.resource.props)
        values, ns = props.get("values"), props.get("namespace")
        env, env_from = _env_lists(values)
        for entry in env:
            if entry.get("name") == variable and "value" in entry:
                return f"values env {variable}", entry["value"]
        for secret_name in env_from:
            secret = self._secrets.get((provider_name(config.resource), ns, secret_name))
            if secret is None:
                continue
            obj = k8s_object(secret.resource_type, secret.props) or {}
            for key in ("stringData", "data"):
                data = obj.get(key)
                if isinstance(data, dict) and variable in data:
                    peers = [d for d in secret.property_dependencies.get(key, []) if d.resource_type == STACK_REFERENCE]
                    if peers:
                        return f"Secret {ns}/{secret_name}", StackRead(str(plain(peers[0].props).get("name")))
                    value = data[variable]
                    if key == "data" and isinstance(value, str):
                        value = _decoded(value)
                    return f"Secret {ns}/{secret_name}", value
        return None


def _decoded(value: str) -> str:
    """A Secret's `data` value (base64), or the value itself where it is not base64."""
    try:
        return base64.b64decode(value, validate=True).decode(errors="replace")
    except ValueError:
        return value


def _env_lists(values: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Every `env` entry and `envFrom` Secret name anywhere in Helm values."""
    env: list[dict[str, Any]] = []
    env_from: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "env" and isinstance(item, list):
                    env.extend(e for e in item if isinstance(e, dict))
                if key == "envFrom" and isinstance(item, list):
                    env_from.extend(n for e in item if isinstance(n := field(e, "secretRef", "name"), str))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(values)
    return env, env_from


def _project(urn: str) -> str:
    parts = urn.split("::")
    return parts[1] if len(parts) > 2 else ""


@stack_rule("fab-catalog-uri-polaris",
            "Every Iceberg REST catalog's URI is this site's Polaris REST endpoint or a linked peer site's Polaris.",
            place=220,
            docs="every REST catalog's URI is this site's Polaris REST endpoint (derived from the plan: the LoadBalancer Service "
                 "selecting the Polaris pods, its host name, VIP and port, and its cluster-local name when it is a ClusterMesh "
                 "global service; path `/api/catalog`) or a linked peer's, read from the peer's stack")
def catalog_uri_polaris(args: StackValidationArgs, report: ReportViolation) -> None:
    """Reads Spark `spark.sql.catalog.<name>.uri`, Trino `iceberg.rest-catalog.uri` and StarRocks `iceberg.catalog.uri`.
    A literal URI must be Polaris's (see the module); an environment reference in a Helm release's values is followed
    to the value the release's env or envFrom Secret gives it: a value read from another stack of this project (a
    linked peer's exported catalog URI) is that peer's Polaris, a literal is checked as above.

    Unknown values: a URI (or the Secret value it refers to) that is unknown fails closed."""
    endpoints = polaris_endpoints(args.resources)
    here = (f"({', '.join(f'{h}:{p}' for h, p in endpoints)}, path {POLARIS_REST_PATH})" if endpoints else
            f"(but the plan has no LoadBalancer Service selecting {'='.join(POLARIS_POD_LABEL)})")
    allowed = f"allowed: this site's Polaris REST endpoint {here}, or a linked peer's Polaris read from its stack"
    environment = _Environment(args.resources)
    for config in configs(args.resources):
        for source, props in config.sources().items():
            sql = any(p.sql_catalog for p in config.props if p.source == source)
            for key in _uri_keys(props, sql):
                where = config.where(source)
                if key not in props:
                    report(f"{where} has a REST catalog without {key}; {allowed}", config.resource.urn)
                elif problem := undecided(where, props[key], f".{key}"):
                    report(problem, config.resource.urn)
                elif wrong := _not_polaris(config, str(props[key]), endpoints, environment):
                    report(f"{where} sets {key}={props[key]}{wrong}; {allowed}", config.resource.urn)


def _not_polaris(config: Config, value: str, endpoints: list[tuple[str, int]], environment: _Environment) -> str | None:
    """None when the URI is Polaris's; else what is wrong with it, to follow the value in the message."""
    reference = ENV_REFERENCE.match(value)
    if reference is None:
        return None if _is_polaris(value, endpoints) else ", which is not Polaris's REST endpoint"
    variable = reference.group(1) or reference.group(2) or reference.group(3)
    resolved = environment.resolve(config, variable)
    if resolved is None:
        return (", an environment variable that nothing in the plan ties to Polaris (write the URI, or take it from a "
                "Secret the release's envFrom names)")
    holder, target = resolved
    if isinstance(target, StackRead):
        project = _project(config.resource.urn)
        if target.stack.split("/")[-2:-1] == [project]:
            return None
        return f", which {holder} reads from the stack {target.stack}, not a site of this project ({project})"
    if target is UNKNOWN:
        return f", which {holder} sets to a value that can't be known during preview, so this rule fails closed"
    if _is_polaris(str(target), endpoints):
        return None
    return f", which {holder} sets to {target}, not Polaris's REST endpoint"


# fab-no-hive-metastore ------------------------------------------------------------------------------------------------

@stack_rule("fab-no-hive-metastore", "No engine is given a Hive metastore (hive.metastore.uri or hive.metastore.uris).",
            place=230,
            docs="no engine is given a Hive metastore (`hive.metastore.uri(s)` under any prefix, in any format)")
def no_hive_metastore(args: StackValidationArgs, report: ReportViolation) -> None:
    """Reads `hive.metastore.uri(s)` under any prefix (`spark.hadoop.hive.metastore.uris`, a StarRocks or Trino catalog's,
    a hive-site.xml's). Unknown values: the key alone decides, so an unknown value is refused like any other."""
    for config in configs(args.resources):
        for prop in config.props:
            if METASTORE_KEY.search(prop.key):
                report(f"{config.where(prop.source)} sets {prop.key}={_value(prop.value)}; no engine uses a Hive metastore, Polaris's "
                       "REST catalog is the only catalog", config.resource.urn)


# fab-object-store-tables-denied ------------------------------------------------------------------------------------

@stack_rule("fab-object-store-tables-denied", "Every MinIO policy denies s3tables:*, so AIStor's own table catalog is never a second catalog.",
            place=240,
            docs="every MinIO policy denies `s3tables:*`, so AIStor's own table catalog is never a second catalog")
def object_store_tables_denied(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a policy whose document is unknown fails closed."""
    for resource in args.resources:
        if resource.resource_type != IAM_POLICY:
            continue
        props = plain(resource.props)
        if problem := undecided(f"MinIO policy {resource.name}", props.get("policy"), ".policy"):
            report(problem, resource.urn)
            continue
        document = json.loads(props.get("policy") or "{}")
        if not any(s.get("Effect") == "Deny" and "s3tables:*" in s.get("Action", []) for s in document.get("Statement", [])):
            report(f"MinIO policy {props.get('name')} does not deny s3tables:*: the object store's own table "
                   "catalog must stay unreachable, Polaris is the only catalog", resource.urn)
