"""Who may do what with the site's data (DESIGN sections 1, 2: least privilege, one catalog authority).

S3 bucket access per principal (the platform's own and each compute engine's, from its declaration), the
MinIO policy documents that grant exactly those buckets, the Polaris catalog roles and principals, and the
setup plan the Polaris setup Job applies. Pure functions of config: StorageCluster creates the resources.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pulumi_minio as minio

from components.config import REPLICABLE_CLASSES, Bucket, BucketAccess, ObjectStoreConfig, PolarisConfig, StorageConfig, declared, names
from components.constants import MAINTENANCE_PRINCIPAL, TRAINING

# --------------------------------------------------------------------------------------------------
# Who may do what: the platform's own principals here, and every compute engine's from its declaration
# (components/engines). The test of least privilege writes its expectations out independently.

PLATFORM_ACCESS: dict[str, BucketAccess] = {
    # Polaris writes table metadata and vends scoped credentials for every table location it serves,
    # and gold tables live in the gold bucket (so that only gold replicates), hence gold as well.
    "polaris": BucketAccess(read_write=("gold", "warehouse"), description="Polaris catalog"),
    "inference": BucketAccess(read=("models",), description="vLLM weight loading"),
    "postgres-backup": BucketAccess(read_write=("backups",), description="CloudNativePG base backups and WAL"),
    # Copies gold to federated sites (SiteFederation), and models to those that keep them: the classes that leave the
    # site, `engine_buckets(..., replicated=...)`; gold alone unless a consumer has replicate_models.
    "replication": BucketAccess(read=tuple(sorted(REPLICABLE_CLASSES)), description="replication to other sites"),
}
REPLICATION = "replication"
"""The principal that reads what leaves the site to copy it; the replication namespace runs as it."""


def engine_access() -> dict[str, BucketAccess]:
    """Every principal with S3 keys and the bucket classes it may read, or read and write (training's are per team, below)."""
    return dict(sorted({
        **PLATFORM_ACCESS, **{name: engine.buckets for name, engine in declared.engines().items() if engine.buckets},
    }.items()))


# Training: one principal per team, so that no team can overwrite another's checkpoints or models.
# TRAINING (components/constants.py): the grantee of training's Secrets, `s3-training` and `polaris-training`.
TRAINING_ACCESS = BucketAccess(
    # Training resumes from its own checkpoints, so "write" there includes reading them back; it is confined to the
    # team's prefix (`<bucket>/<team>/`) of the read-write classes.
    read=("datasets", "warehouse"), read_write=("checkpoints", "models"), description="GPU training of one team",
)
TRAINING_CATALOG_ROLE = "reader"

READ_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")
WRITE_ACTIONS = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
BUCKET_READ_ACTIONS = ("s3:GetBucketLocation", "s3:ListBucket")
BUCKET_WRITE_ACTIONS = ("s3:ListBucketMultipartUploads",)

CATALOG_ROLES: dict[str, list[dict[str, Any]]] = {
    "writer": [{"type": "catalog", "privilege": "CATALOG_MANAGE_CONTENT"}],
    "reader": [
        {"type": "catalog", "privilege": p}
        for p in ("NAMESPACE_LIST", "NAMESPACE_READ_PROPERTIES", "TABLE_LIST", "TABLE_READ_PROPERTIES", "TABLE_READ_DATA")
    ],
    "gold-reader": [
        {"type": "namespace", "namespace": ["gold"], "privilege": p}
        for p in ("NAMESPACE_READ_PROPERTIES", "TABLE_LIST", "TABLE_READ_PROPERTIES", "TABLE_READ_DATA")
    ],
}


def catalog_access() -> dict[str, str]:
    """Polaris principal of each engine and the one catalog role it gets (each training team has its own, `team_principal()`)."""
    return dict(sorted(
        (name, engine.catalog_role) for name, engine in declared.engines().items() if engine.catalog_role
    ))


GOLD_NAMESPACE = "gold"


def bucket_arn(bucket: str, objects: bool = False) -> str:
    return f"arn:aws:s3:::{bucket}/*" if objects else f"arn:aws:s3:::{bucket}"


def _no_table_catalog(buckets: list[str]) -> dict[str, Any]:
    """AIStor's own table catalog denied on these buckets: Polaris is the only catalog."""
    return {
        "Sid": "NoTableCatalog",
        "Effect": "Deny",
        "Action": ["s3tables:*"],
        "Resource": [r for b in buckets for r in (f"arn:aws:s3tables:::bucket/{b}", f"arn:aws:s3tables:::bucket/{b}/*")],
    }


def list_prefixes(sid: str, by_bucket: dict[str, list[str]]) -> list[dict[str, Any]]:
    """ListBucket of each bucket under its own prefixes only: one statement per bucket (`sid`, then `sid2`, ...), since
    one statement naming several buckets and several prefixes would let every bucket be listed under every prefix."""
    return [{"Sid": f"{sid}{i if i > 1 else ''}", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn(bucket)],
             "Condition": {"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}}}
            for i, (bucket, prefixes) in enumerate(sorted(by_bucket.items()), 1)]


def policy_document(read: list[str], read_write: list[str]) -> dict[str, Any]:
    """A MinIO policy granting exactly these buckets; AIStor's table catalog is denied on them."""
    every = sorted({*read, *read_write})
    statements: list[dict[str, Any]] = [
        {"Sid": "ListBuckets", "Effect": "Allow", "Action": list(BUCKET_READ_ACTIONS), "Resource": [bucket_arn(b) for b in every]},
        {"Sid": "ReadObjects", "Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": [bucket_arn(b, True) for b in every]},
    ]
    if read_write:
        rw = sorted(read_write)
        statements += [
            {"Sid": "ListUploads", "Effect": "Allow", "Action": list(BUCKET_WRITE_ACTIONS), "Resource": [bucket_arn(b) for b in rw]},
            {"Sid": "WriteObjects", "Effect": "Allow", "Action": list(WRITE_ACTIONS), "Resource": [bucket_arn(b, True) for b in rw]},
        ]
    statements.append(_no_table_catalog(every))
    return {"Version": "2012-10-17", "Statement": statements}


def replication_policy_document(read: list[str], models_bucket: str, model_paths: tuple[str, ...]) -> dict[str, Any]:
    """The replication principal's MinIO policy: the `read` buckets (gold) whole and read-only; in the models bucket,
    listing and reading only `model_paths` (`SiteConfig.replicated_models`, the served models' weights the copy jobs send),
    never the bucket whole: the rest of it is the teams' work, which no other site keeps. Nothing is written."""
    if not model_paths:
        return policy_document(read, [])
    read = sorted(set(read) - {models_bucket})
    statements: list[dict[str, Any]] = []
    if read:
        statements += [
            {"Sid": "ListBuckets", "Effect": "Allow", "Action": list(BUCKET_READ_ACTIONS), "Resource": [bucket_arn(b) for b in read]},
            {"Sid": "ReadObjects", "Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": [bucket_arn(b, True) for b in read]},
        ]
    statements += [
        *list_prefixes("ListModelPaths", {models_bucket: list(model_paths)}),
        {"Sid": "ReadModelPaths", "Effect": "Allow", "Action": list(READ_ACTIONS),
         "Resource": [f"{bucket_arn(models_bucket)}/{path}*" for path in model_paths]},
        _no_table_catalog(sorted({*read, models_bucket})),
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def team_principal(team: str) -> str:
    """A training team's MinIO user and policy, and its Polaris principal and principal role."""
    return f"fab-{TRAINING}-{team}"


def team_prefix(bucket: str, team: str) -> str:
    """Where a team's checkpoints or models live in their bucket: `s3://<bucket>/<team>/`."""
    return f"s3://{bucket}/{team}/"


def team_policy_document(team: str, read: list[str], own: list[str], shared: tuple[str, ...] = ()) -> dict[str, Any]:
    """A training team's MinIO policy: `read` buckets whole and read-only; in the `own` buckets (checkpoints and models)
    listing, reading and writing under `<team>/` only. Nothing else of those buckets is named, not even the bucket's
    location, so one team can neither overwrite nor read another's checkpoints and models, except `shared`: prefixes
    (`<bucket>/<path>/`, the served models' weights for offline batch inference) every team lists and reads."""
    read, own = sorted(set(read) - set(own)), sorted(own)
    statements: list[dict[str, Any]] = []
    if read:
        statements += [
            {"Sid": "ListBuckets", "Effect": "Allow", "Action": list(BUCKET_READ_ACTIONS), "Resource": [bucket_arn(b) for b in read]},
            {"Sid": "ReadObjects", "Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": [bucket_arn(b, True) for b in read]},
        ]
    if own:
        statements += [
            # MinIO evaluates s3:prefix on ListBucket only (ListBucketMultipartUploads takes no prefix condition, so the
            # team does without it: uploads need PutObject, AbortMultipartUpload and ListMultipartUploadParts on its objects).
            {"Sid": "ListTeamPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn(b) for b in own],
             "Condition": {"StringLike": {"s3:prefix": [f"{team}/*"]}}},
            {"Sid": "TeamObjects", "Effect": "Allow", "Action": [*READ_ACTIONS, *WRITE_ACTIONS],
             "Resource": [f"arn:aws:s3:::{b}/{team}/*" for b in own]},
        ]
    if shared:
        by_bucket: dict[str, list[str]] = {}
        for prefix in sorted(shared):
            bucket, _, path = prefix.partition("/")
            by_bucket.setdefault(bucket, []).append(path)
        statements += [
            *list_prefixes("ListSharedPrefixes", by_bucket),
            {"Sid": "ReadSharedObjects", "Effect": "Allow", "Action": list(READ_ACTIONS),
             "Resource": [f"arn:aws:s3:::{b}/{p}*" for b, paths in by_bucket.items() for p in paths]},
        ]
    statements.append(_no_table_catalog(sorted({*read, *own})))
    return {"Version": "2012-10-17", "Statement": statements}


def engine_buckets(buckets: dict[str, Bucket], engine: str,
                   replicated: frozenset[str] = REPLICABLE_CLASSES) -> tuple[list[str], list[str]]:
    """(read-only buckets, read-write buckets) of an engine (or of `TRAINING`, any team's) among the site's buckets.
    The replication principal reads the classes that leave the site, `replicated` (`FederationConfig.replicated_classes`)."""
    access = TRAINING_ACCESS if engine == TRAINING else engine_access()[engine]
    read = tuple(sorted(replicated)) if engine == REPLICATION else access.read
    by_class = lambda classes: sorted(n for n, b in buckets.items() if b.data_class in classes)
    return by_class(read), by_class(access.read_write)


def bucket_tags(site: str, spec: Bucket, replicated: frozenset[str] = REPLICABLE_CLASSES) -> dict[str, str]:
    """A bucket's class, site and residency: `replicable` for the classes that leave the site (`replicated`), else
    `site-local`."""
    data_class = spec.data_class
    residency = "replicable" if data_class in replicated else "site-local"
    return {"fab.internal/class": data_class, "fab.internal/residency": residency, "fab.internal/site": site}


def lifecycle_rules(spec: Bucket) -> list[minio.IlmPolicyRuleArgs]:
    rules = []
    if spec.retention_days is not None:
        rules.append(minio.IlmPolicyRuleArgs(id="retention", expiration=f"{spec.retention_days}d"))
    if spec.noncurrent_expiry_days is not None:
        rules.append(minio.IlmPolicyRuleArgs(id="noncurrent-expiry", noncurrent_version_expiration_days=spec.noncurrent_expiry_days))
    return rules


def s3_endpoint_internal(domain: str, store: ObjectStoreConfig) -> str:
    return f"{'https' if store.tls else 'http'}://{names.S3_HOST(domain)}:{store.s3_port}"


def catalog_uri(domain: str, polaris: PolarisConfig) -> str:
    """Polaris's REST catalog under its published name (`polaris.<domain>`, its VIP)."""
    return catalog_uri_at(names.POLARIS_HOST(domain), polaris)


def catalog_uri_at(host: str, polaris: PolarisConfig) -> str:
    """Polaris's REST catalog at `host` (its published name, or a global service's cluster-local name)."""
    return f"http://{host}:{polaris.port}/api/catalog"


def polaris_setup_plan(storage: StorageConfig, s3_endpoint: str, region: str, principals: dict[str, str],
                       maintained: Iterable[str] = ()) -> dict[str, Any]:
    """The catalog, namespaces, roles and principals (`principal_engines`) that the setup Job applies (desired state, no
    secrets); with `maintained` namespaces (compute.iceberg_maintenance), those namespaces and the maintenance role."""
    polaris = storage.polaris
    maintained = sorted(set(maintained))
    (warehouse,) = buckets_of(storage, "warehouse")
    gold = buckets_of(storage, "gold")
    return {
        "catalog": {
            "type": "INTERNAL",
            "name": polaris.catalog,
            "properties": {"default-base-location": f"s3://{warehouse}/"},
            "storageConfigInfo": {
                "storageType": "S3",
                "allowedLocations": [f"s3://{warehouse}/", *(f"s3://{b}/" for b in gold)],
                "endpoint": s3_endpoint,
                "pathStyleAccess": True,
                "region": region,
            },
        },
        "namespaces": [
            *([{"name": [GOLD_NAMESPACE], "properties": {"location": f"s3://{gold_location}/{GOLD_NAMESPACE}/"}}]
              if (gold_location := storage.gold_location()) else []),
            *({"name": parts} for parts in maintenance_namespaces(maintained) if not (gold_location and parts == [GOLD_NAMESPACE])),
        ],
        "catalog_roles": {**CATALOG_ROLES, **({MAINTENANCE_CATALOG_ROLE: maintenance_grants(maintained)} if maintained else {})},
        # Always named, with maintenance off too: the setup Job revokes the role's grants that `catalog_roles` no longer
        # lists (polaris_setup.revoke_unlisted), so a namespace dropped from the targets loses them.
        "maintenance_role": MAINTENANCE_CATALOG_ROLE,
        "principals": [
            {
                "name": f"fab-{engine}",
                "principal_role": f"fab-{engine}",
                "catalog_roles": [role],
                "credentials_env": engine.upper().replace("-", "_"),
            }
            for engine, role in sorted(principals.items())
        ],
    }


TEAM_CREDENTIALS_ENV = "TEAM"
"""The environment prefix of the team principal's credentials in a team's setup Job (`TEAM_CLIENT_ID`, `TEAM_CLIENT_SECRET`)."""


def team_setup_plan(catalog: str, team: str) -> dict[str, Any]:
    """What a training team's setup Job applies: its own principal and principal role, granted the catalog role
    `TRAINING_CATALOG_ROLE` that the site's setup Job creates (desired state, no secrets). A Job of its own per
    team, so that adding a team changes nothing another team or the site's setup holds."""
    name = team_principal(team)
    return {
        "catalog_name": catalog,
        "principals": [{"name": name, "principal_role": name, "catalog_roles": [TRAINING_CATALOG_ROLE],
                        "credentials_env": TEAM_CREDENTIALS_ENV}],
    }


def principal_engines(consumers: Iterable[str], maintenance: bool = False) -> dict[str, str]:
    """Polaris principal -> catalog role: one per engine, one per federated consumer site (gold only), and with Iceberg
    maintenance its principal."""
    return {**catalog_access(), **{f"federation-{consumer}": "gold-reader" for consumer in consumers},
            **({MAINTENANCE: MAINTENANCE_CATALOG_ROLE} if maintenance else {})}


# --------------------------------------------------------------------------------------------------
# Iceberg maintenance (compute.iceberg_maintenance): one principal for the nightly Spark jobs, limited to the configured
# namespaces in Polaris and to their locations in S3.

MAINTENANCE = MAINTENANCE_PRINCIPAL
MAINTENANCE_CATALOG_ROLE = "maintenance"
MAINTENANCE_PRIVILEGES = (
    # What the four procedures and the quality checks ask of Polaris (1.7.0, the pinned version), each on each configured
    # namespace (and so on its tables), and nothing more. Sources: polaris-core RbacOperationSemantics (operation ->
    # privilege), IcebergCatalogHandler.getUpdateTableAuthorizableOperations (an updateTable commit is authorized per
    # metadata update, with ENABLE_FINE_GRAINED_UPDATE_TABLE_PRIVILEGES, on by default and pinned on by StorageCluster)
    # and PolarisAuthorizerImpl.SUPER_PRIVILEGES (what implies what):
    # - TABLE_LIST: LIST_TABLES, to match `tables` against the namespace's tables (SHOW TABLES);
    # - TABLE_READ_PROPERTIES: LOAD_TABLE without access delegation. The maintenance applications ask for none
    #   (iceberg_maintenance.MAINTENANCE_CONF: the job reads and writes files with its own S3 keys, confined to these
    #   namespaces' locations), because a loadTable with delegation needs TABLE_WRITE_DATA to vend credentials that write;
    # - TABLE_ADD_SNAPSHOT and TABLE_SET_SNAPSHOT_REF: rewrite_data_files and rewrite_manifests commit a replace
    #   snapshot and move `main` (AddSnapshot, SetSnapshotRef);
    # - TABLE_REMOVE_SNAPSHOTS and TABLE_REMOVE_SNAPSHOT_REF: expire_snapshots (RemoveSnapshots, and RemoveSnapshotRef for
    #   refs left dangling or past their max age);
    # - TABLE_REMOVE_STATISTICS: expire_snapshots also drops the statistics files of the snapshots it removes
    #   (Iceberg 1.10 TableMetadata.Builder.rewriteSnapshotsInternal adds RemoveStatistics when a snapshot has any).
    # remove_orphan_files commits nothing (it lists and deletes with the S3 keys). Not granted: TABLE_WRITE_DATA (it
    # implies TABLE_WRITE_PROPERTIES and so every schema, spec, location and property change), TABLE_READ_DATA (no
    # credential vending; metrics reports are off), TABLE_CREATE, TABLE_DROP, TABLE_MANAGE_STRUCTURE, anything on views,
    # other namespaces, the catalog or access. Iceberg's RemovePartitionStatistics has no fine-grained operation in
    # Polaris 1.7.0 (it falls back to UPDATE_TABLE, TABLE_WRITE_PROPERTIES): expiring a snapshot that has partition
    # statistics is refused (docs/operations.md, "Iceberg maintenance").
    "TABLE_LIST",
    "TABLE_READ_PROPERTIES",
    "TABLE_ADD_SNAPSHOT",
    "TABLE_SET_SNAPSHOT_REF",
    "TABLE_REMOVE_SNAPSHOTS",
    "TABLE_REMOVE_SNAPSHOT_REF",
    "TABLE_REMOVE_STATISTICS",
)


def _namespace_parts(namespace: str) -> list[str]:
    return namespace.split(".")


def maintenance_grants(namespaces: Iterable[str]) -> list[dict[str, Any]]:
    """The maintenance catalog role's grants: MAINTENANCE_PRIVILEGES on each configured namespace."""
    return [{"type": "namespace", "namespace": _namespace_parts(ns), "privilege": p}
            for ns in sorted(set(namespaces)) for p in MAINTENANCE_PRIVILEGES]


def maintenance_namespaces(namespaces: Iterable[str]) -> list[list[str]]:
    """The namespaces the setup Job makes sure exist before granting on them: each configured one and its parents,
    parents first (a grant on a missing namespace fails; creating an existing one is a no-op)."""
    wanted = {tuple(_namespace_parts(ns)[:i]) for ns in namespaces for i in range(1, len(_namespace_parts(ns)) + 1)}
    return [list(parts) for parts in sorted(wanted, key=lambda p: (len(p), p))]


def namespace_location(storage: StorageConfig, namespace: str) -> tuple[str, str]:
    """(bucket, prefix) where Polaris places a namespace's tables by default: `gold` (and below it) at the gold
    location, every other namespace under the catalog's base location in the warehouse bucket, one folder per level."""
    parts = _namespace_parts(namespace)
    gold = storage.gold_location()
    if parts[0] == GOLD_NAMESPACE and gold:
        return gold, "/".join(parts) + "/"
    (warehouse,) = buckets_of(storage, "warehouse")
    return warehouse, "/".join(parts) + "/"


def maintenance_policy_document(locations: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The maintenance principal's MinIO policy: list, read, write and delete under each namespace's location only
    (compaction writes and orphan removal lists and deletes there); nothing else of those buckets."""
    by_bucket: dict[str, list[str]] = {}
    for bucket, prefix in sorted(set(locations)):
        by_bucket.setdefault(bucket, []).append(prefix)
    statements: list[dict[str, Any]] = [
        *list_prefixes("ListNamespacePrefixes", by_bucket),
        {"Sid": "NamespaceObjects", "Effect": "Allow", "Action": [*READ_ACTIONS, *WRITE_ACTIONS],
         "Resource": [f"arn:aws:s3:::{b}/{p}*" for b, prefixes in by_bucket.items() for p in prefixes]},
        _no_table_catalog(sorted(by_bucket)),
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def buckets_of(storage: StorageConfig, data_class: str) -> list[str]:
    """The buckets of a data class, by name."""
    return sorted(n for n, b in storage.buckets.items() if b.data_class == data_class)
