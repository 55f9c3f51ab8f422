"""Hand-built policy arguments, as the Analyzer service builds them, for unit tests of single rules."""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)

GPU_COMPONENT = PolicyResource(
    "fab:gpu:GpuCluster", {}, "urn:pulumi:s::p::fab:gpu:GpuCluster::gpu-gpu", "gpu-gpu",
    PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), []), None, None, [], {},
)


def options(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def provider(name: str) -> PolicyProviderResource:
    return PolicyProviderResource("pulumi:providers:kubernetes", {}, f"urn:pulumi:s::p::pulumi:providers:kubernetes::{name}", name)


def k8s(kind: str, name: str, namespace: str | None = None, api: str = "v1", labels: dict | None = None,
        annotations: dict | None = None, **body: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": api, "kind": kind, "metadata": metadata, **body}


def resource(type_: str, props: dict[str, Any], name: str = "r", cluster: str | None = None, gpu: bool = False,
             protect: bool = False) -> PolicyResource:
    return PolicyResource(
        type_, props, f"urn:pulumi:s::p::{type_}::{name}", name, options(protect),
        provider(cluster) if cluster else None, GPU_COMPONENT if gpu else None, [], {},
    )


def kube(obj: dict[str, Any], cluster: str = "site-a-compute", gpu: bool = False, protect: bool = False) -> PolicyResource:
    api = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    return resource(f"kubernetes:{api}:{obj['kind']}", obj, name=obj["metadata"]["name"], cluster=cluster, gpu=gpu, protect=protect)


def check(policy: Any, target: PolicyResource | list[PolicyResource], config: dict | None = None) -> list[str]:
    """Messages a policy reports for one resource (resource policies) or a stack (stack policies)."""
    messages: list[str] = []
    report = lambda message, urn=None: messages.append(message)  # noqa: E731
    if isinstance(target, list):
        policy.validate(StackValidationArgs(target, config or {}), report)
    else:
        args = ResourceValidationArgs(target.resource_type, target.props, target.urn, target.name, target.opts, target.provider, config or {})
        policy.validate(args, report)
    return messages


def pod(kind: str, name: str, namespace: str, container: dict[str, Any], **pod_spec: Any) -> dict[str, Any]:
    spec = {"containers": [container], **pod_spec}
    return k8s(kind, name, namespace, api="apps/v1" if kind == "Deployment" else "batch/v1", spec={"template": {"spec": spec}})


SAFE = {
    "name": "app",
    "image": "registry.example/app:1.2.3",
    "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
}
