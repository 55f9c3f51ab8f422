"""No GPU work outside GPU clusters, whatever the route (DESIGN section 2: compute "never requests GPUs").

A workload on a storage or compute cluster can get GPUs in four ways, each its own rule: a pod template's resources
(`fab-no-gpu-outside-gpu-clusters`, rules/gpu.py), a Spark application's driver or executor (`gpu`, or a GPU in
their pod templates, node selectors or tolerations), a Helm chart's values (a GPU resource key anywhere, such as a
JupyterHub profile's `extra_resource_limits`, or a GPU node selector or toleration), and Spark's own GPU scheduling
and RAPIDS settings wherever Spark reads its configuration (ConfigMaps, Helm values, a SparkApplication's
`sparkConf`). GPU clusters are the clusters a GpuCluster component manages (`gpu_providers`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from rules._k8s import HELM_RELEASE, UNKNOWN, gpu_providers, name_of, namespace_of, objects, plain, provider_name, undecided
from rules._policy import stack_rule
from rules._props import configs

GPU_RESOURCE = re.compile(r"^(?:(?:requests|limits)\.)?nvidia\.com/(?:gpu(?:\.shared)?|mig-[\w.-]+)$")
"""A GPU as a resource name: whole GPUs, time-slices (`gpu.shared`, the device plugin's renamed shares) and MIG slices,
bare or as a quota's `requests.`/`limits.` form."""
GPU_NODE_KEY = re.compile(r"^(?:nvidia\.com/(?:gpu|mig)(?:[./-].*)?|feature\.node\.kubernetes\.io/pci-10de\..*|fab\.internal/gpu-pool)$")
"""Node labels and taints that mark GPU nodes: the GPU Operator's, node-feature-discovery's NVIDIA PCI vendor, the
platform's own pool label and taint."""
SPARK_KINDS = {"SparkApplication", "ScheduledSparkApplication"}
SPARK_GPU_AMOUNT = re.compile(r"^spark\.(?:executor|driver|task)\.resource\.gpu\.amount$")
RAPIDS_PLUGIN = "com.nvidia.spark.SQLPlugin"


def not_gpu(cluster: str) -> str:
    return f"{cluster} is not a GPU cluster, GPU work runs on GPU clusters only"


def _zero(quantity: Any) -> bool:
    try:
        return float(str(quantity).strip()) == 0
    except ValueError:
        return False


def _shown(quantity: Any) -> str:
    """A quantity as written: the engine sends numbers as doubles, so 1 arrives as 1.0."""
    return str(int(quantity)) if isinstance(quantity, float) and quantity.is_integer() else str(quantity)


def gpu_asks(value: Any, path: str) -> Iterator[str]:
    """What in a plain value asks for GPUs: a GPU resource key with a quantity other than zero, a GPU node label as a
    selector key, or a toleration or selector expression on a GPU key. Unknown quantities count as asking."""
    if isinstance(value, dict):
        key = value.get("key")
        if isinstance(key, str) and GPU_NODE_KEY.match(key):
            yield f"{path} tolerates or selects the GPU node key {key}"
        for name, item in value.items():
            here = f"{path}.{name}"
            if GPU_RESOURCE.match(str(name)) and not isinstance(item, (dict, list)):
                if item is UNKNOWN or not _zero(item):
                    yield f"{here} asks for {'an unknown number of' if item is UNKNOWN else _shown(item)} {name}"
            elif GPU_NODE_KEY.match(str(name)) and not isinstance(item, (dict, list)):
                yield f"{here} selects GPU nodes ({name}={_shown(item)})"
            else:
                yield from gpu_asks(item, here)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from gpu_asks(item, f"{path}[{i}]")


# fab-no-gpu-spark-applications -------------------------------------------------------------------------------------

def _spark_spec(obj: dict[str, Any]) -> Any:
    spec = obj.get("spec")
    return spec.get("template") if obj["kind"] == "ScheduledSparkApplication" and isinstance(spec, dict) else spec


@stack_rule("fab-no-gpu-spark-applications",
            "No Spark application on a storage or compute cluster gives its driver or executors GPUs.",
            place=20,
            docs="no SparkApplication or ScheduledSparkApplication on a storage or compute cluster gives its driver or executors "
                 "GPUs (`gpu`, GPU resources in their pod templates, GPU node selectors or tolerations)")
def no_gpu_spark_applications(args: StackValidationArgs, report: ReportViolation) -> None:
    """Reads `gpu` of the driver and executor (SparkApplication, and a ScheduledSparkApplication's template), and GPU
    resources, node selectors and tolerations anywhere in the spec (their pod templates, sidecars, affinity).

    Unknown values: a spec, or a driver's or executor's `gpu`, that is unknown fails closed."""
    gpu = gpu_providers(args.resources)
    for resource, obj in objects(args.resources):
        if obj["kind"] not in SPARK_KINDS or not obj["apiVersion"].startswith("sparkoperator.k8s.io/") or provider_name(resource) in gpu:
            continue
        cluster = provider_name(resource) or "an unknown cluster"
        where = f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)} on {cluster}"
        spec = _spark_spec(obj)
        deciding = spec if spec is UNKNOWN else {role: (spec or {}).get(role, {}) for role in ("driver", "executor")}
        deciding = deciding if deciding is UNKNOWN else {r: v if v is UNKNOWN else (v or {}).get("gpu") for r, v in deciding.items()}
        if problem := undecided(where, deciding, ".spec"):
            report(problem, resource.urn)
            continue
        for role, asked in deciding.items():
            if isinstance(asked, dict) and not _zero(asked.get("quantity", 0)):
                report(f"{where} gives its {role} {_shown(asked.get('quantity'))} {asked.get('name')}; {not_gpu(cluster)}", resource.urn)
        for ask in gpu_asks(spec, "spec"):
            report(f"{where}: {ask}; {not_gpu(cluster)}", resource.urn)


# fab-no-gpu-helm-values --------------------------------------------------------------------------------------------

@stack_rule("fab-no-gpu-helm-values",
            "No Helm release on a storage or compute cluster asks for GPUs in its values (GPU resources, node selectors, tolerations).",
            place=30,
            docs="no Helm release on a storage or compute cluster asks for GPUs in its values: a GPU resource key anywhere (e.g. "
                 "a JupyterHub profile's `extra_resource_limits`), a GPU node selector or toleration")
def no_gpu_helm_values(args: StackValidationArgs, report: ReportViolation) -> None:
    """Reads every key of the values, whatever the chart: a GPU resource key (JupyterHub's
    `singleuser.profileList[].kubespawner_override.extra_resource_limits`, a chart's `resources`), a GPU node label
    as a selector key, a toleration or selector expression on a GPU key.

    Unknown values: values that are unknown as a whole, or an unknown GPU quantity, fail closed; other unknown values
    are skipped (they are never GPU keys, which are literal text in the program)."""
    gpu = gpu_providers(args.resources)
    for resource in args.resources:
        if resource.resource_type != HELM_RELEASE or provider_name(resource) in gpu:
            continue
        cluster = provider_name(resource) or "an unknown cluster"
        where = f"Helm release {resource.name} on {cluster}"
        values = plain(resource.props).get("values")
        if values is UNKNOWN:
            report(undecided(where, values, ".values") or "", resource.urn)
            continue
        for ask in gpu_asks(values, "values"):
            report(f"{where}: {ask}; {not_gpu(cluster)}", resource.urn)


# fab-no-gpu-spark-conf ---------------------------------------------------------------------------------------------

@stack_rule("fab-no-gpu-spark-conf",
            "No Spark configuration on a storage or compute cluster schedules GPUs or loads RAPIDS.",
            place=40,
            docs="no Spark configuration on a storage or compute cluster (ConfigMaps, Helm values, `sparkConf`) sets a GPU "
                 "amount, `spark.rapids.*` or the RAPIDS plugin")
def no_gpu_spark_conf(args: StackValidationArgs, report: ReportViolation) -> None:
    """Reads `spark.executor.resource.gpu.amount`, `spark.driver.resource.gpu.amount`, `spark.task.resource.gpu.amount`
    (other than 0), every `spark.rapids.*` setting and `spark.plugins` (RAPIDS' com.nvidia.spark.SQLPlugin), in
    ConfigMaps, Secrets, Helm values and custom resources (a SparkApplication's `sparkConf`).

    Unknown values: an unknown GPU amount or plugin list fails closed; `spark.rapids.*` keys are refused whatever
    their value."""
    gpu = gpu_providers(args.resources)
    for config in configs(args.resources):
        if provider_name(config.resource) in gpu:
            continue
        for prop in config.props:
            where = config.where(prop.source)
            deciding = SPARK_GPU_AMOUNT.match(prop.key) or prop.key == "spark.plugins"
            if deciding and (problem := undecided(where, prop.value, f".{prop.key}")):
                report(problem, config.resource.urn)
                continue
            if SPARK_GPU_AMOUNT.match(prop.key) and not _zero(prop.value):
                report(f"{where} sets {prop.key}={prop.value}; {not_gpu(config.cluster)}", config.resource.urn)
            elif prop.key.startswith("spark.rapids."):
                report(f"{where} sets the Spark RAPIDS setting {prop.key}={prop.value}; {not_gpu(config.cluster)}", config.resource.urn)
            elif prop.key == "spark.plugins" and RAPIDS_PLUGIN in str(prop.value):
                report(f"{where} loads Spark RAPIDS (spark.plugins={prop.value}); {not_gpu(config.cluster)}", config.resource.urn)
