"""Where Spark resolves the Maven packages it is told to load (`spark.jars.packages`): Maven Central, or only the site's
Maven repository on a site with a registry (config `registry.maven`, docs/airgap.md).

Spark 3.5.7 (SparkSubmitUtils, DependencyUtils.resolveMavenDependencies) builds its Ivy chain one of two ways. Without
`spark.jars.ivySettings` (`buildIvySettings`): the local Maven and Ivy caches, then `central`
(https://repo1.maven.org/maven2/) and `spark-packages` (https://repos.spark-packages.org/), and `spark.jars.repositories`
only adds a chain *after* that one, so Central is still asked first for every module. With `spark.jars.ivySettings`
(`loadIvySettings`): exactly the resolvers of that file (a local path), plus `spark.jars.repositories` if set, which the
platform never sets. Spark 4.0 (MavenUtils, the Spark operator's own spark-submit) reads the setting the same way. So the
site's repository is the one resolver of an ivysettings.xml, in the ConfigMap `spark-maven` mounted at `MOUNT_DIR`
wherever Spark resolves packages: the Spark Connect server, the drivers of the platform's SparkApplications, and the
Spark operator's controller, whose spark-submit resolves them once more before it creates the driver (cluster mode).

When the registry has a CA (`registry.ca_bundle`, else the site's `ca_bundle`), the ConfigMap also holds a Java trust
store of it, which every one of those JVMs uses (`JAVA_TOOL_OPTIONS`): the JDK's public CAs are not in it, as nothing
these JVMs reach on a site with a registry is public (docs/airgap.md).

Without `registry.maven` none of this exists: Spark resolves from Maven Central as before.
"""

from __future__ import annotations

import base64
from typing import Any

from components.config.views import read_ca_bundle
from components.jvm_trust import trust_store
from components.registry import Registry

CONFIG_MAP = "spark-maven"
"""The ConfigMap with `ivysettings.xml` (and `truststore.p12`), in every namespace a Spark JVM resolves packages in."""
VOLUME = "spark-maven"
MOUNT_DIR = "/etc/spark-maven"
SETTINGS_KEY = "ivysettings.xml"
TRUST_STORE_KEY = "truststore.p12"
IVY_DIR = "/tmp/ivy"
"""Ivy's cache and the resolved jars: /tmp, the one writable directory of the operator's controller (its chart's
emptyDir; its root filesystem is read-only) and of the platform's Spark pods."""
RESOLVER = "site-maven"


def ivy_settings(maven: str) -> str:
    """An ivysettings.xml whose only resolver is the Maven repository `maven` (Maven 2 layout, POMs for the
    dependencies); no source or javadoc artifacts are looked up, as Spark's own settings do."""
    root = maven.rstrip("/") + "/"
    return (
        "<ivysettings>\n"
        '  <property name="ivy.maven.lookup.sources" value="false"/>\n'
        '  <property name="ivy.maven.lookup.javadoc" value="false"/>\n'
        f'  <settings defaultResolver="{RESOLVER}"/>\n'
        "  <resolvers>\n"
        f'    <ibiblio name="{RESOLVER}" m2compatible="true" usepoms="true" root="{root}"/>\n'
        "  </resolvers>\n"
        "</ivysettings>\n"
    )


def _trusts_ca(registry: Registry) -> bool:
    return registry.maven is not None and bool(registry.trusted_ca_files)


def resolves_from_site(registry: Registry) -> bool:
    """Whether Spark resolves packages from the site's Maven repository (and needs this module's ConfigMap)."""
    return registry.maven is not None


def config_map_data(registry: Registry) -> tuple[dict[str, str], dict[str, str]]:
    """The ConfigMap's `data` and `binaryData` (base64): ivysettings.xml, and the trust store when the registry has a CA."""
    assert registry.maven is not None
    binary = {}
    if _trusts_ca(registry):
        # The site's CA beside the registry's: the store replaces the JDK's, and these JVMs also call the site's endpoints.
        pem = "".join(read_ca_bundle(path) for path in registry.trusted_ca_files)
        binary[TRUST_STORE_KEY] = base64.b64encode(trust_store(pem)).decode()
    return {SETTINGS_KEY: ivy_settings(registry.maven)}, binary


def spark_conf(registry: Registry) -> dict[str, str]:
    """The Spark settings of package resolution: Ivy's cache and jars in IVY_DIR wherever packages are resolved (the
    default, ~/.ivy2, is in the Spark user's home, `/nonexistent`, which no one may create, under a read-only root
    filesystem or not), and with `registry.maven`, the site's repository as the only resolver."""
    site = {"spark.jars.ivySettings": f"{MOUNT_DIR}/{SETTINGS_KEY}"} if registry.maven is not None else {}
    return {**site, "spark.jars.ivy": IVY_DIR}


def java_env(registry: Registry) -> list[dict[str, str]]:
    """The JVM's trust store, when the registry has a CA: every JVM of the container reads JAVA_TOOL_OPTIONS."""
    if not _trusts_ca(registry):
        return []
    return [{"name": "JAVA_TOOL_OPTIONS", "value": f"-Djavax.net.ssl.trustStore={MOUNT_DIR}/{TRUST_STORE_KEY} "
                                                  "-Djavax.net.ssl.trustStoreType=PKCS12"}]


def volumes(registry: Registry) -> list[dict[str, Any]]:
    return [{"name": VOLUME, "configMap": {"name": CONFIG_MAP}}] if resolves_from_site(registry) else []


def volume_mounts(registry: Registry) -> list[dict[str, Any]]:
    return [{"name": VOLUME, "mountPath": MOUNT_DIR, "readOnly": True}] if resolves_from_site(registry) else []


CONTROLLER_TMP = {"volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}],
                  "volumeMounts": [{"name": "tmp", "mountPath": "/tmp", "readOnly": False}]}
"""The Spark operator chart's (2.5.2) own controller volume, which its `controller.volumes` and `.volumeMounts` replace."""


def operator_controller_values(registry: Registry) -> dict[str, Any]:
    """The Spark operator chart's `controller` values that mount the ConfigMap into the controller, whose spark-submit
    resolves an application's packages before it creates the driver (none without `registry.maven`)."""
    if not resolves_from_site(registry):
        return {}
    return {
        "volumes": [*CONTROLLER_TMP["volumes"], *volumes(registry)],
        "volumeMounts": [*CONTROLLER_TMP["volumeMounts"], *volume_mounts(registry)],
        **({"env": java_env(registry)} if java_env(registry) else {}),
    }
