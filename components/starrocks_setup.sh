#!/usr/bin/env bash
# StarRocks setup, run by the starrocks-setup Job; idempotent. Credentials come only from the environment
# (Secrets starrocks-root, polaris-starrocks, s3-starrocks), never from this file; the program writes the
# catalog's Polaris URI in (engines/starrocks.py, setup_script), where the policy pack checks it.
#   1. give root its password (first run: root has none yet);
#   2. the shared-data storage volume on the olap bucket, as the default;
#   3. the Iceberg catalog on Polaris (REST, OAuth2 client credentials, vended S3 credentials).
set -euo pipefail

sql() { mysql -h "$STARROCKS_HOST" -P 9030 -u root "$@"; }
as_root() { sql -p"$STARROCKS_ROOT_PASSWORD" "$@"; }
answers() { "$@" -e 'SELECT 1' >/dev/null 2>&1; }

until answers as_root || answers sql; do
  echo "waiting for the StarRocks FE at $STARROCKS_HOST"; sleep 10
done
if ! answers as_root; then
  sql -e "SET PASSWORD FOR 'root' = PASSWORD('$STARROCKS_ROOT_PASSWORD');"
  echo "ok: root password set"
fi

# How StarRocks reaches AIStor, for the storage volume and the catalog's data files alike.
S3_ACCESS=$(cat <<PROPERTIES
  "aws.s3.endpoint" = "$AWS_ENDPOINT_URL_S3",
  "aws.s3.enable_path_style_access" = "true",
  "aws.s3.region" = "$AWS_REGION"
PROPERTIES
)

as_root <<SQL
CREATE STORAGE VOLUME IF NOT EXISTS fab_olap TYPE = S3 LOCATIONS = ("$OLAP_LOCATION") PROPERTIES (
$S3_ACCESS,
  "enabled" = "true",
  "aws.s3.use_aws_sdk_default_behavior" = "false",
  "aws.s3.use_instance_profile" = "false",
  "aws.s3.access_key" = "$AWS_ACCESS_KEY_ID",
  "aws.s3.secret_key" = "$AWS_SECRET_ACCESS_KEY"
);
SET fab_olap AS DEFAULT STORAGE VOLUME;
CREATE EXTERNAL CATALOG IF NOT EXISTS polaris PROPERTIES (
  "type" = "iceberg",
  "iceberg.catalog.type" = "rest",
  "iceberg.catalog.uri" = "@POLARIS_CATALOG_URI@",
  "iceberg.catalog.warehouse" = "$POLARIS_WAREHOUSE",
  "iceberg.catalog.security" = "oauth2",
  "iceberg.catalog.oauth2.credential" = "$POLARIS_CLIENT_ID:$POLARIS_CLIENT_SECRET",
  "iceberg.catalog.oauth2.scope" = "PRINCIPAL_ROLE:ALL",
  "iceberg.catalog.vended-credentials-enabled" = "true",
$S3_ACCESS
);
SQL
echo "ok: storage volume fab_olap and catalog polaris"
