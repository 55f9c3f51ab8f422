"""Settings: every setting the program delivers reaches the component that reads it, where that component reads it.

A setting written somewhere its reader never looks fails at run time only, and far from its cause: Spark's jobs start
and then fail at their first catalog statement. `settings.read` reports the deliveries whose reader cannot see them:

- A SparkApplication's `sparkConfigMap` whose ConfigMap holds spark-defaults.conf. The Spark operator's webhook mounts it
  at /etc/spark/conf and sets SPARK_CONF_DIR, but the driver starts with `spark-submit --properties-file` (the operator's
  spark.properties), so Spark 3 never reads the defaults file; Spark 4 reads it with `--load-spark-defaults`, which the
  operator (2.x) passes only with its `LoadSparkDefaults` feature gate (kubeflow/spark-operator#1183, #691). The Spark
  version is the image tag's, else `sparkVersion`. SparkApplications inside a ConfigMap (Airflow's template, the
  maintenance DAG's `platform.json`) are read too: the DAGs submit them as they are.
- A configuration folder variable (`CONF_DIRS`: SPARK_CONF_DIR, HADOOP_CONF_DIR) of a container, a SparkApplication's
  driver or executor, or JupyterHub's single-user servers (`singleuser.extraEnv`), naming a folder no volume of the pod
  mounts (nor a folder above it) and that is not the image's own configuration folder: the reader finds no
  configuration there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fabctl.check.findings import Finding
from fabctl.check.mirror import SKIPPED_KINDS, _document, pod_specs
from fabctl.check.picture import Picture, release_placed
from fabctl.check.placed import Placed

SPARK_GROUP = "sparkoperator.k8s.io/"
SPARK_KINDS = ("SparkApplication", "ScheduledSparkApplication")
DEFAULTS_FILE = "spark-defaults.conf"
LOAD_DEFAULTS_GATE = "LoadSparkDefaults"
"""The Spark operator's feature gate that adds `--load-spark-defaults` to spark-submit (Spark 4 only)."""
OPERATOR_CONF_DIRS = {"sparkConfigMap": "/etc/spark/conf", "hadoopConfigMap": "/etc/hadoop/conf"}
"""Where the operator's webhook mounts a SparkApplication's ConfigMaps in its driver and executors (2.5.2 common.DefaultSparkConfDir,
DefaultHadoopConfDir)."""
CONF_DIRS = {"SPARK_CONF_DIR": ("Spark", "/opt/spark/conf"), "HADOOP_CONF_DIR": ("Hadoop", "/opt/hadoop/etc/hadoop")}
"""Configuration folder variables: what reads the folder, and the folder its image ships (not a missing mount)."""
CATALOG_URI = re.compile(r"^spark\.sql\.catalog\.[^.]+\.uri$")
VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def spark_applications(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, application) of every SparkApplication or ScheduledSparkApplication inside a value."""
    if isinstance(node, dict):
        if node.get("kind") in SPARK_KINDS and str(node.get("apiVersion", "")).startswith(SPARK_GROUP):
            yield path, node
            return
        for key, value in node.items():
            yield from spark_applications(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from spark_applications(item, f"{path}[{i}]")


def embedded(placed: Placed) -> Iterator[tuple[str, Any]]:
    """(path, document) of each YAML or JSON text of a ConfigMap's data."""
    if placed.kind != "ConfigMap":
        return
    for key, text in sorted((placed.obj.get("data") or {}).items()):
        if isinstance(text, str):
            document = _document(text)
            if isinstance(document, (dict, list)):
                yield f"data.{key}", document


def _applications(picture: Picture) -> Iterator[tuple[Placed, str, dict[str, Any]]]:
    """(object, where in it, application) of every SparkApplication the picture applies or holds in a ConfigMap."""
    for placed in picture.placed:
        if placed.kind in SPARK_KINDS and placed.group == SPARK_GROUP.rstrip("/"):
            yield placed, "", placed.obj
        for path, document in embedded(placed):
            for inner, app in spark_applications(document):
                yield placed, f"{path} {inner}".strip() if inner else path, app


def _spec(app: dict[str, Any]) -> dict[str, Any]:
    spec = app.get("spec") or {}
    return (spec.get("template") or {}) if app.get("kind") == "ScheduledSparkApplication" else spec


def spark_version(spec: dict[str, Any]) -> tuple[tuple[int, int] | None, str]:
    """(major, minor) of the Spark a SparkApplication runs and where that was read: the image's tag, else `sparkVersion`."""
    image = str(spec.get("image") or "")
    tag = image.rsplit("/", 1)[-1].partition(":")[2].partition("@")[0] if ":" in image.rsplit("/", 1)[-1] else ""
    for value, source in ((tag, f"image {image}"), (str(spec.get("sparkVersion") or ""), "sparkVersion")):
        match = VERSION.match(value)
        if match:
            return (int(match.group(1)), int(match.group(2))), f"{match.group(0).lstrip('v')} ({source})"
    return None, ""


def loads_defaults(picture: Picture, cluster: str) -> bool:
    """Whether a Spark operator on the cluster passes `--load-spark-defaults` (its LoadSparkDefaults gate is on)."""
    for release in picture.release_records():
        inputs = release["inputs"]
        if str(inputs.get("chart") or "").rsplit("/", 1)[-1] != "spark-operator" or picture.plan.cluster(release) != cluster:
            continue
        gates = ((inputs.get("values") or {}).get("controller") or {}).get("featureGates") or []
        if any(isinstance(g, dict) and g.get("name") == LOAD_DEFAULTS_GATE and g.get("enabled") is True for g in gates):
            return True
    return False


def _defaults(picture: Picture, cluster: str, namespace: str, name: str) -> dict[str, str] | None:
    """The settings of spark-defaults.conf in ConfigMap namespace/name, or None if the picture has no such file."""
    for placed in picture.by_name.get((cluster, "ConfigMap", namespace, name), []):
        text = (placed.obj.get("data") or {}).get(DEFAULTS_FILE)
        if isinstance(text, str):
            settings = {}
            for line in text.splitlines():
                key, _, value = line.strip().partition(" ")
                if key and not key.startswith("#"):
                    settings[key] = value.strip()
            return settings
    return None


def _what(settings: dict[str, str]) -> str:
    uris = [f"{k}={v}" for k, v in settings.items() if CATALOG_URI.match(k)]
    shown = uris or list(settings)[:2]
    more = len(settings) - len(shown)
    return ", ".join(shown) + (f" and {more} more settings" if more else "")


def _unread(version: tuple[int, int] | None, source: str, gate: bool) -> str | None:
    """Why the driver does not read spark-defaults.conf, or None if it does."""
    if version is None:
        return ("the application names no image tag or sparkVersion, and neither a Spark 3 driver (it starts with "
                "--properties-file) nor a Spark 4 one without the operator's LoadSparkDefaults gate reads that file")
    if version[0] < 4:
        return f"Spark {source} starts its driver with --properties-file and never reads that file"
    if not gate:
        return (f"Spark {source} reads that file only with --load-spark-defaults, which the Spark operator passes only with "
                f"its {LOAD_DEFAULTS_GATE} feature gate, off on this cluster")
    return None


def spark_defaults_findings(picture: Picture) -> Iterator[Finding]:
    gates: dict[str, bool] = {}
    for placed, where, app in _applications(picture):
        spec = _spec(app)
        config_map = spec.get("sparkConfigMap")
        if not isinstance(config_map, str):
            continue
        metadata = app.get("metadata") or {}
        namespace = metadata.get("namespace") or placed.namespace or "default"
        settings = _defaults(picture, placed.cluster, namespace, config_map)
        if not settings:
            continue
        if placed.cluster not in gates:
            gates[placed.cluster] = loads_defaults(picture, placed.cluster)
        version, source = spark_version(spec)
        reason = _unread(version, source, gates[placed.cluster])
        if reason is None:
            continue
        client = f"{app['kind']} {namespace}/{metadata.get('name') or '(template)'}"
        at = f"{where}: " if where else ""
        yield Finding.of("settings.read", placed, f"{at}{client} gets {DEFAULTS_FILE} ({_what(settings)}) from its sparkConfigMap "
                                       f"{namespace}/{config_map}, but {reason}",
                         "set them in the application's spec.sparkConf (spark-submit --conf), credentials as env:NAME "
                         "references to the Secrets of its envFrom (components/engines/spark.py spark_application_template)")


def _covered(folder: str, mounts: list[str]) -> bool:
    folder = folder.rstrip("/") or "/"
    return any(folder == m or folder.startswith(m.rstrip("/") + "/") for m in (p.rstrip("/") or "/" for p in mounts))


def _env(entries: Any) -> Iterator[tuple[str, str]]:
    """(name, literal value) of an env list (`[{name, value}]`) or mapping (`{name: value}`); values from elsewhere
    (valueFrom) are left out."""
    if isinstance(entries, dict):
        entries = [{"name": k, "value": v} for k, v in entries.items()]
    for entry in entries or []:
        if isinstance(entry, dict) and isinstance(entry.get("value"), str):
            yield str(entry.get("name")), entry["value"]


def _unmounted(env: Any, mounts: list[str]) -> Iterator[tuple[str, str, str]]:
    """(variable, folder, reader) of each configuration folder variable naming a folder nothing mounts."""
    for name, value in _env(env):
        if name in CONF_DIRS:
            reader, image_default = CONF_DIRS[name]
            if value.rstrip("/") != image_default and not _covered(value, mounts):
                yield name, value, reader


def _mount_paths(mounts: Any) -> list[str]:
    if isinstance(mounts, dict):
        mounts = list(mounts.values())
    return [str(m["mountPath"]) for m in mounts or [] if isinstance(m, dict) and m.get("mountPath")]


def _fix(name: str, folder: str, reader: str) -> str:
    return f"mount {reader}'s configuration at {folder} (a ConfigMap volume), or drop {name}"


def conf_dir_findings(picture: Picture) -> Iterator[Finding]:
    for placed in picture.placed:
        if placed.kind in SKIPPED_KINDS:
            continue  # a CRD's spec is documentation, megabytes of it: no pod runs from it
        documents = [("spec", placed.obj.get("spec") or {})] if placed.kind not in SPARK_KINDS else []
        documents += list(embedded(placed))
        for root, document in documents:
            for path, pod in pod_specs(document, root):
                for field in ("initContainers", "containers"):
                    for i, container in enumerate(pod.get(field) or []):
                        mounts = _mount_paths(container.get("volumeMounts"))
                        for name, folder, reader in _unmounted(container.get("env"), mounts):
                            yield Finding.of("settings.read", placed, f"{path}.{field}[{i}] ({container.get('name')}) sets {name}={folder}, a folder "
                                                           f"no volume of the container mounts: {reader} finds no configuration there",
                                             _fix(name, folder, reader))
    for placed, where, app in _applications(picture):
        spec = _spec(app)
        webhook = [folder for field, folder in OPERATOR_CONF_DIRS.items() if spec.get(field)]
        metadata = app.get("metadata") or {}
        client = f"{app['kind']} {metadata.get('namespace') or placed.namespace}/{metadata.get('name') or '(template)'}"
        at = f"{where}: " if where else ""
        for role in ("driver", "executor"):
            part = spec.get(role) or {}
            mounts = [*_mount_paths(part.get("volumeMounts")), *webhook]
            for env in (part.get("env"), part.get("envVars")):
                for name, folder, reader in _unmounted(env, mounts):
                    yield Finding.of("settings.read", placed, f"{at}{client} sets {name}={folder} in its {role}, a folder none of its "
                                                   f"volumeMounts mounts: {reader} finds no configuration there",
                                     _fix(name, folder, reader))
    for release in picture.release_records():
        inputs = release["inputs"]
        if str(inputs.get("chart") or "").rsplit("/", 1)[-1] != "jupyterhub":
            continue
        singleuser = (inputs.get("values") or {}).get("singleuser") or {}
        storage = singleuser.get("storage") or {}
        mounts = _mount_paths(storage.get("extraVolumeMounts"))
        if storage.get("type") != "none":
            mounts.append(str(storage.get("homeMountPath") or "/home/jovyan"))
        for name, folder, reader in _unmounted(singleuser.get("extraEnv"), mounts):
            yield Finding.of("settings.read", release_placed(picture.plan, release),
                             f"values.singleuser.extraEnv sets {name}={folder} in every single-user server, a folder no volume "
                             f"mounts (singleuser.storage.extraVolumeMounts): {reader} finds no configuration there",
                             f"mount {reader}'s configuration there (singleuser.storage.extraVolumes and extraVolumeMounts), "
                             f"or drop {name}")


def settings_findings(picture: Picture) -> Iterator[Finding]:
    yield from spark_defaults_findings(picture)
    yield from conf_dir_findings(picture)
