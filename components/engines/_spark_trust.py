"""The site's CA in the JVMs of Spark that read S3 over TLS (docs/operations.md, "Trusting the site's PKI").

Spark reads S3 with two clients: Iceberg's S3FileIO (AWS SDK v2) and Hadoop's S3A (`spark.hadoop.fs.s3a.*`). Neither
has a setting of its own for a CA at the pinned versions (Iceberg 1.10 `s3.*`, Hadoop 3.3.4 `fs.s3a.*`): both verify
against the JVM's default trust store. So on a site with `ca_bundle` whose internal S3 endpoint is TLS
(`storage.object_store.tls`), every Spark JVM that reads S3 (the drivers and executors of every SparkApplication the
program ships, the Spark Connect server and its executors) is given a PKCS#12 trust store in `JAVA_TOOL_OPTIONS`,
from the ConfigMap `spark-trust` mounted at MOUNT_DIR (by the operator's webhook for SparkApplications).

`-Djavax.net.ssl.trustStore` replaces the JDK's cacerts, so the store holds what else these JVMs reach over TLS: the
registry's CA when Spark resolves packages from the site's Maven repository (`_spark_packages`; this store then takes
the place of that one's in the JVMs here, one JAVA_TOOL_OPTIONS), else, as Spark resolves from Maven Central, the public
CAs of Mozilla's bundle as certifi (pinned in requirements.txt) ships it.
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass
from typing import Any

from components.config.views import PEM_CERTIFICATE, read_ca_bundle
from components.engines import _spark_packages as packages
from components.jvm_trust import public_cas, trust_store
from components.registry import Registry

CONFIG_MAP = "spark-trust"
VOLUME = "spark-trust"
MOUNT_DIR = "/etc/spark-trust"
TRUST_STORE_KEY = "truststore.p12"
TRUST_STORE = f"{MOUNT_DIR}/{TRUST_STORE_KEY}"


@dataclass(frozen=True)
class SparkTrust:
    """What Spark's JVMs must trust beyond the registry: the site's CA (PEM) when it issued the S3 endpoint's certificate."""

    site_ca_pem: str | None = None

    @classmethod
    def of(cls, site_ca_pem: str | None, s3_tls: bool) -> SparkTrust:
        return cls(site_ca_pem if s3_tls else None)

    @property
    def needed(self) -> bool:
        return self.site_ca_pem is not None


NONE = SparkTrust()


def certificates(trust: SparkTrust, registry: Registry) -> str:
    """The PEM of the store: the site's CA, and the registry's CA when Spark resolves from the site's repository and it has
    one (`registry.ca_bundle`, else the site's), else the public CAs."""
    assert trust.site_ca_pem is not None
    if packages.resolves_from_site(registry) and registry.trusted_ca_files:
        others = "".join(read_ca_bundle(path) for path in registry.trusted_ca_files)
    else:
        others = public_cas()
    # Each certificate once (the registry's bundle may repeat the site's).
    return "\n".join(dict.fromkeys(PEM_CERTIFICATE.findall(trust.site_ca_pem + others))) + "\n"


@functools.lru_cache(maxsize=8)
def _store(pem: str) -> str:
    return base64.b64encode(trust_store(pem)).decode()


def config_map_binary(trust: SparkTrust, registry: Registry) -> dict[str, str]:
    """The ConfigMap's `binaryData`: the trust store (base64)."""
    return {TRUST_STORE_KEY: _store(certificates(trust, registry))}


def java_env(trust: SparkTrust, registry: Registry) -> list[dict[str, str]]:
    """JAVA_TOOL_OPTIONS of a Spark JVM: this module's store when the site's CA is needed (it holds the registry's CA too),
    else the registry's (`_spark_packages.java_env`), else nothing."""
    if not trust.needed:
        return packages.java_env(registry)
    return [{"name": "JAVA_TOOL_OPTIONS", "value": f"-Djavax.net.ssl.trustStore={TRUST_STORE} -Djavax.net.ssl.trustStoreType=PKCS12"}]


def volumes(trust: SparkTrust) -> list[dict[str, Any]]:
    return [{"name": VOLUME, "configMap": {"name": CONFIG_MAP}}] if trust.needed else []


def volume_mounts(trust: SparkTrust) -> list[dict[str, Any]]:
    return [{"name": VOLUME, "mountPath": MOUNT_DIR, "readOnly": True}] if trust.needed else []
