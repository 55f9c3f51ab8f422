"""What an equipment vendor may read (DESIGN use case "sharing with equipment vendors": a restricted Polaris principal and
views; issue 23 item 3). Pure functions of `storage.vendors`: StorageCluster creates the principals and keys, the
`polaris-setup` script applies the grants, VendorCatalog exposes the catalog API.

Per vendor, `fab-vendor-<name>` is a Polaris principal with its own principal role and catalog role, which holds exactly
the grants below and nothing on the namespace or the catalog, and a MinIO user whose policy reads only the folders of
the vendor's tables in the gold bucket. Polaris' credential vending is not used: it needs STS on AIStor and a role for
Polaris to assume, which no proof of concept has verified yet (DESIGN: "verify in a PoC"), so the vendor's tables are
read with these prefix-scoped read-only keys, and the vendor's principal lacks TABLE_READ_DATA, without which Polaris
vends no credentials (RbacOperationSemantics, Polaris 1.7.0: LOAD_TABLE_WITH_READ_DELEGATION needs TABLE_READ_DATA).
"""

from __future__ import annotations

from typing import Any

from components.config import StorageConfig, VendorConfig, names
from components.config.schema.storage import GOLD_NAMESPACE
from components.data_access import READ_ACTIONS, bucket_arn

TABLE_PRIVILEGES = ("TABLE_READ_PROPERTIES",)
"""What a vendor holds on each of its tables: LOAD_TABLE (the table's metadata, hence its files' locations; Polaris 1.7.0
RbacOperationSemantics). Its data files are read from S3 with the vendor's own keys."""
VIEW_PRIVILEGES = ("VIEW_READ_PROPERTIES",)
"""What a vendor holds on each of its views: LOAD_VIEW (the view's definition, which the reader runs)."""
VENDOR_CREDENTIALS_ENV = "VENDOR"
"""The environment prefix of the vendor principal's credentials in its setup Job (`VENDOR_CLIENT_ID`, `VENDOR_CLIENT_SECRET`)."""

# The keys of the Secret `vendor-<name>` (in Polaris' namespace), which operators hand to the vendor.
VENDOR_CLIENT_ID = "client-id"
VENDOR_CLIENT_SECRET = "client-secret"
VENDOR_ACCESS_KEY = "s3-access-key"
VENDOR_SECRET_KEY = "s3-secret-key"


def _name(qualified: str) -> str:
    """`gold.<name>` -> `<name>` (the config allows the gold namespace only)."""
    return qualified.partition(".")[2]


def vendor_grants(vendor: VendorConfig) -> list[dict[str, Any]]:
    """The vendor's catalog role's grants: read properties of each listed table and view, nothing else."""
    return [
        *({"type": "table", "namespace": [GOLD_NAMESPACE], "tableName": _name(table), "privilege": privilege}
          for table in sorted(vendor.tables) for privilege in TABLE_PRIVILEGES),
        *({"type": "view", "namespace": [GOLD_NAMESPACE], "viewName": _name(view), "privilege": privilege}
          for view in sorted(vendor.views) for privilege in VIEW_PRIVILEGES),
    ]


def vendor_setup_plan(catalog: str, vendor_name: str, vendor: VendorConfig) -> dict[str, Any]:
    """What a vendor's setup Job applies (desired state, no secrets): its catalog role with exactly these grants (others
    are revoked), its principal role holding that catalog role, and its principal."""
    principal = names.VENDOR_PRINCIPAL(vendor_name)
    return {
        "catalog_name": catalog,
        "vendor": {
            "name": principal, "principal_role": principal, "catalog_role": principal,
            "grants": vendor_grants(vendor), "credentials_env": VENDOR_CREDENTIALS_ENV,
        },
    }


def table_prefix(table: str) -> str:
    """The folder of a gold table in the gold bucket: Polaris puts a table created without a location at `<namespace
    location>/<table>` (DEFAULT_UNIQUE_TABLE_LOCATION_ENABLED off, its default), and the gold namespace's location is
    `s3://<gold bucket>/gold/`."""
    return f"{GOLD_NAMESPACE}/{_name(table)}/"


def vendor_policy_document(gold_bucket: str, vendor: VendorConfig) -> dict[str, Any]:
    """A vendor's MinIO policy: list and read the folders of its tables in the gold bucket, from its own ranges only
    (`aws:SourceIp`), and nothing else (no write, no other folder or bucket); AIStor's own table catalog denied, as for
    every principal of the platform. The source condition is a second fence behind the flow `vendor-s3`: MinIO takes
    the address from forwarding headers when a request carries them."""
    prefixes = [table_prefix(table) for table in sorted(vendor.tables)]
    source = {"IpAddress": {"aws:SourceIp": [str(cidr) for cidr in vendor.source_cidrs]}}
    statements: list[dict[str, Any]] = []
    if prefixes:
        statements += [
            {"Sid": "ListSharedTables", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn(gold_bucket)],
             "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in prefixes]}, **source}},
            {"Sid": "ReadSharedTables", "Effect": "Allow", "Action": list(READ_ACTIONS),
             "Resource": [f"arn:aws:s3:::{gold_bucket}/{prefix}*" for prefix in prefixes], "Condition": source},
        ]
    statements.append({
        "Sid": "NoTableCatalog", "Effect": "Deny", "Action": ["s3tables:*"],
        "Resource": [f"arn:aws:s3tables:::bucket/{gold_bucket}", f"arn:aws:s3tables:::bucket/{gold_bucket}/*"],
    })
    return {"Version": "2012-10-17", "Statement": statements}


def vendor_rows(storage: StorageConfig) -> list[dict[str, str]]:
    """Every grant of every vendor, one row per vendor, object and privilege (the plan report's "Vendor grants" and
    docs/vendor-sharing.md): the Polaris privilege, the S3 prefix its keys read for a table, and the vendor's source
    ranges, the only addresses it is admitted from."""
    gold = storage.gold_location() or ""
    rows = []
    for vendor_name, vendor in sorted(storage.vendors.items()):
        principal = names.VENDOR_PRINCIPAL(vendor_name)
        sources = ", ".join(str(cidr) for cidr in vendor.source_cidrs)
        for grant in vendor_grants(vendor):
            kind = grant["type"]
            obj = f"{GOLD_NAMESPACE}.{grant['tableName'] if kind == 'table' else grant['viewName']}"
            rows.append({"vendor": vendor_name, "principal": principal, "kind": kind, "object": obj,
                         "privilege": grant["privilege"], "s3": f"s3://{gold}/{table_prefix(obj)}" if kind == "table" else "",
                         "sources": sources})
    return rows

