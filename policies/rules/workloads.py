"""Rules on what runs: host access only where the stack allows it, pinned versions, Pod Security restricted, no plaintext secrets."""

from __future__ import annotations

import re
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from rules._k8s import (
    HELM_RELEASE,
    containers,
    field,
    k8s_object,
    name_of,
    namespace_of,
    plain,
    pod_fields,
    pod_spec,
    provider_name,
    skip_unknown,
    undecided,
)
from rules._policy import resource_rule
from rules._stack import host_access

EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")
CREDENTIAL_KEY = re.compile(r"(password|passwd|secret|token|access[_-]?key|credential|license|private[_-]?key)", re.I)
REFERENCE_KEY = re.compile(r"(name|ref|url|uri|path|file|env|key_?name)$", re.I)
REFERENCE = re.compile(r"^(\$\{.+\}|\$\(.+\)|\$[A-Za-z_][A-Za-z0-9_]*|\[secret\]|[A-Z][A-Z0-9_]*)$")
KNOWN_SECRETS = re.compile(
    r"(-----BEGIN [A-Z ]*PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b|\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\."
    r"|\b(password|passwd|secret|token|secret_key|access_key)\s*[=:]\s*[\"'][^\"'$\s{}()]{8,}[\"'])",
    re.I,
)
"""Credentials in text: private keys, AWS-style access keys, JWTs, and quoted literal password assignments."""


def looks_secret(value: str) -> bool:
    """A literal that could be a password or key: long, no spaces, not a name, path or reference, letters and digits."""
    if REFERENCE.match(value) or len(value) < 12 or any(c.isspace() for c in value) or any(c in value for c in "/.:@"):
        return False
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


ALLOWED_SECRET_PATHS = ["tls.ca.key", "tls.ca.cert", "license", "secrets.secretKey", "secrets.accessKey"]
"""Helm values that are Pulumi secrets handed to a chart that stores them in its own Secret."""


HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
"""Pod fields that share a node's namespaces with the pod: Cilium cannot see or police such a pod's traffic."""
PRIVILEGED_LEVEL = "pod-security.kubernetes.io/enforce"


@resource_rule("fab-host-network-allow-listed",
               "Pods share the node's network, PID or IPC namespace only in namespaces their cluster's "
               "host_network_namespaces (stack config) lists.",
               place=180,
               docs="pods share the node's network, PID or IPC namespace only in namespaces their cluster's "
                    "`host_network_namespaces` lists (the stack's config, see below)")
def host_network_allow_listed(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a pod template with unknown host fields (outside the allow-list) fails closed."""
    obj = k8s_object(args.resource_type, args.props)
    pod = pod_spec(obj) if obj else None
    if pod is None:
        return
    allowed = host_access(provider_name(args))
    if allowed.allows(namespace_of(obj)):
        return
    where = f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)} on {allowed.cluster}"
    if problem := undecided(where, pod_fields(pod, HOST_NAMESPACES, ()), ".pod"):
        report(problem)
        return
    used = [key for key in HOST_NAMESPACES if pod.get(key)]
    if used:
        report(f"{where} sets {', '.join(f'{key}: true' for key in used)}; on {allowed.cluster} only the namespaces of "
               f"{allowed.describe()} may share the node's namespaces")


@resource_rule("fab-privileged-allow-listed",
               "Privileged containers run only in namespaces their cluster's host_network_namespaces (stack config) lists.",
               place=190,
               docs="privileged containers run only in namespaces their cluster's `host_network_namespaces` lists")
def privileged_allow_listed(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a pod template with unknown security contexts (outside the allow-list) fails closed."""
    obj = k8s_object(args.resource_type, args.props)
    pod = pod_spec(obj) if obj else None
    if pod is None:
        return
    allowed = host_access(provider_name(args))
    if allowed.allows(namespace_of(obj)):
        return
    where = f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)} on {allowed.cluster}"
    if problem := undecided(where, pod_fields(pod, (), ("securityContext",)), ".pod"):
        report(problem)
        return
    for container in containers(pod):
        if (container.get("securityContext") or {}).get("privileged"):
            report(f"container {container.get('name')} of {where} is privileged; on {allowed.cluster} only the namespaces "
                   f"of {allowed.describe()} may run privileged containers")


@resource_rule("fab-privileged-namespace-allow-listed",
               "A namespace is Pod Security privileged only where its cluster's host_network_namespaces (stack config) "
               "lists it.",
               place=200,
               docs="a namespace is Pod Security `privileged` only where its cluster's `host_network_namespaces` lists it")
def privileged_namespace_allow_listed(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a namespace with unknown labels fails closed."""
    obj = k8s_object(args.resource_type, args.props)
    if obj is None or obj["kind"] != "Namespace":
        return
    allowed = host_access(provider_name(args))
    where = f"namespace {name_of(obj)} on {allowed.cluster}"
    if problem := undecided(where, field(obj, "metadata", "labels"), ".labels"):
        report(problem)
        return
    level = (field(obj, "metadata", "labels") or {}).get(PRIVILEGED_LEVEL)
    if level == "privileged" and not allowed.allows(name_of(obj)):
        report(f"{where} enforces Pod Security privileged; on {allowed.cluster} only the namespaces of "
               f"{allowed.describe()} may")


@resource_rule("fab-pinned-versions", "Every Helm chart has an exact version and no image uses latest.",
               place=470,
               docs="every Helm chart has an exact version and no image is untagged or `latest`")
def pinned_versions(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: an unknown chart version or container image fails closed."""
    if args.resource_type == HELM_RELEASE:
        version = plain(args.props).get("version") or ""
        if problem := undecided(f"Helm release {args.name}", version, ".version"):
            report(problem)
        elif not EXACT_VERSION.match(str(version)):
            report(f"Helm release {args.name} must pin an exact chart version, got {version!r}")
        return
    obj = k8s_object(args.resource_type, args.props)
    pod = pod_spec(obj) if obj else None
    if pod is not None and (problem := undecided(f"{obj['kind']} {name_of(obj)}", pod_fields(pod, (), ("image",)), ".pod")):
        report(problem)
        return
    for container in containers(pod or {}):
        image = container.get("image") or ""
        tag = image.rsplit("/", 1)[-1].partition(":")[2] if "@" not in image else "digest"
        if not tag or tag == "latest":
            report(f"container {container.get('name')} of {obj['kind']} {name_of(obj)} uses the unpinned image {image!r}")


@resource_rule("fab-pod-security", "Outside the host-access allow-list (the cluster's host_network_namespaces), containers "
               "run as non-root, no privilege escalation, read-only root filesystem, with requests and limits.",
               place=480,
               docs="outside the host-access allow-list (the cluster's `host_network_namespaces`), containers run as non-root, "
                    "without privilege escalation, with a read-only root filesystem, requests and limits")
def pod_security(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a pod template with unknown parts (outside the allow-list) fails closed."""
    obj = k8s_object(args.resource_type, args.props)
    pod = pod_spec(obj) if obj else None
    if pod is None or host_access(provider_name(args)).allows(namespace_of(obj)):
        return
    deciding = pod_fields(pod, ("securityContext",), ("securityContext", "resources"))
    if problem := undecided(f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)}", deciding, ".pod"):
        report(problem)
        return
    pod_context = pod.get("securityContext") or {}
    for container in containers(pod):
        context = container.get("securityContext") or {}
        where = f"container {container.get('name')} of {obj['kind']} {namespace_of(obj)}/{name_of(obj)}"
        if not (context.get("runAsNonRoot") or pod_context.get("runAsNonRoot")):
            report(f"{where} must run as non-root")
        if context.get("allowPrivilegeEscalation") is not False:
            report(f"{where} must set allowPrivilegeEscalation: false")
        if context.get("readOnlyRootFilesystem") is not True:
            report(f"{where} must have a read-only root filesystem")
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            missing = [r for r in ("cpu", "memory") if r not in (resources.get(part) or {})]
            if missing:
                report(f"{where} must set {part} for {', '.join(missing)}")


def _literal_credentials(value: Any, path: str = "") -> list[str]:
    """Paths where a credential is written in clear: a credential-named key with a secret-looking literal, or a known form."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if (isinstance(item, str) and CREDENTIAL_KEY.search(str(key)) and not REFERENCE_KEY.search(str(key))
                    and looks_secret(item)):
                found.append(sub)
            else:
                found += _literal_credentials(item, sub)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _literal_credentials(item, f"{path}[{i}]")
    elif isinstance(value, str) and KNOWN_SECRETS.search(value):
        found.append(path)
    return found


@resource_rule("fab-no-plaintext-secrets", "No credential-looking value in ConfigMaps or Helm values; Secrets' data are Pulumi secrets.",
               settings={"allowedHelmSecretPaths": {"type": "array", "items": {"type": "string"}, "default": ALLOWED_SECRET_PATHS}},
               place=490,
               docs="no credential-looking literal in ConfigMaps or Helm values (Pulumi secrets handed to charts on listed paths "
                    "excepted)")
def no_plaintext_secrets(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: skipped, since a value computed from another resource is never a literal written in the program."""
    allowed = set(args.get_config().get("allowedHelmSecretPaths", ALLOWED_SECRET_PATHS))
    if args.resource_type == HELM_RELEASE:
        for path in _literal_credentials(skip_unknown(plain(args.props).get("values")) or {}):
            if path not in allowed:
                report(f"Helm release {args.name} has a credential-looking value at {path}; read it from a Secret")
        return
    obj = skip_unknown(k8s_object(args.resource_type, args.props))
    if obj is not None and obj["kind"] == "ConfigMap":
        for path in _literal_credentials(obj.get("data") or {}):
            report(f"ConfigMap {namespace_of(obj)}/{name_of(obj)} has a credential-looking value at {path}; use a Secret")
