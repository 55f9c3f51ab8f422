"""Host access comes from the stack: `clusters.<key>.host_network_namespaces` is each cluster's allow-list for pods on the
node's namespaces, privileged containers and Pod Security `privileged` namespaces (fab-host-network-allow-listed,
fab-privileged-allow-listed, fab-privileged-namespace-allow-listed, and fab-pod-security's exemption).

The pack reads the list from the stack's config, which the Pulumi CLI passes in PULUMI_CONFIG when it starts the pack;
the unit tests set that variable, the pack tests start the pack as fabctl does (with the render's config).
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from policy_fixtures import SAFE, check, k8s, kube, pod
from rules.workloads import host_network_allow_listed, pod_security, privileged_allow_listed, privileged_namespace_allow_listed
from small_site import small_site

from fabctl.policy import analyze_in_process, analyze_with, pack_environment
from fabctl.render import Plan
from fabctl.stackfile import SITE_KEY

GPU_LIST = "clusters.gpu.host_network_namespaces (gpu-operator, nvidia-network-operator)"
NO_CONFIG = ("the stack's host_network_namespaces (none; the stack's config did not reach the policy pack, which the Pulumi "
             "CLI and fabctl pass in PULUMI_CONFIG)")
PRIVILEGED = {**SAFE, "securityContext": {**SAFE["securityContext"], "privileged": True}}


@pytest.fixture
def stack(monkeypatch):
    """The smallest site as the stack's config, handed to the pack as the CLI hands it (PULUMI_CONFIG); returns the site
    object to change before a check."""
    site = small_site()
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({SITE_KEY: json.dumps(site)}))

    def with_site(changed: dict) -> None:
        monkeypatch.setenv("PULUMI_CONFIG", json.dumps({SITE_KEY: json.dumps(changed)}))

    return site, with_site


def host_pod(namespace: str, container: dict = SAFE, **spec) -> dict:
    return pod("DaemonSet", "agent", namespace, container, **spec)


# fab-host-network-allow-listed ----------------------------------------------------------------

def test_host_network_in_a_namespace_the_cluster_lists_passes(stack):
    assert check(host_network_allow_listed, kube(host_pod("gpu-operator", hostNetwork=True), "site-t-gpu")) == []


def test_fails_when_host_network_is_used_in_a_namespace_the_cluster_does_not_list(stack):
    assert check(host_network_allow_listed, kube(host_pod("inference", hostNetwork=True), "site-t-gpu")) == [
        (f"DaemonSet inference/agent on site-t-gpu sets hostNetwork: true; on site-t-gpu only the namespaces of {GPU_LIST} "
        "may share the node's namespaces")
    ]


def test_fails_when_a_namespace_listed_on_a_gpu_cluster_uses_host_network_on_storage(stack):
    assert check(host_network_allow_listed, kube(host_pod("gpu-operator", hostPID=True, hostIPC=True), "site-t-storage")) == [
        ("DaemonSet gpu-operator/agent on site-t-storage sets hostPID: true, hostIPC: true; on site-t-storage only the "
        "namespaces of clusters.storage.host_network_namespaces (none) may share the node's namespaces")
    ]


def test_a_namespace_the_stack_adds_to_storage_is_allowed_there(stack):
    site, with_site = stack
    site["clusters"]["storage"]["host_network_namespaces"] = ["csi-driver"]
    with_site(site)
    assert check(host_network_allow_listed, kube(host_pod("csi-driver", hostNetwork=True), "site-t-storage")) == []


def test_fails_when_the_pack_gets_no_stack_config(monkeypatch):
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    assert check(host_network_allow_listed, kube(host_pod("gpu-operator", hostNetwork=True), "site-t-gpu")) == [
        (f"DaemonSet gpu-operator/agent on site-t-gpu sets hostNetwork: true; on site-t-gpu only the namespaces of {NO_CONFIG} "
        "may share the node's namespaces")
    ]


def test_fails_when_the_cluster_is_not_one_of_the_stacks(stack):
    assert check(host_network_allow_listed, kube(host_pod("gpu-operator", hostNetwork=True), "site-x-gpu")) == [
        ("DaemonSet gpu-operator/agent on site-x-gpu sets hostNetwork: true; on site-x-gpu only the namespaces of the stack's "
        "host_network_namespaces (none; site-x-gpu is not a cluster of site site-t) may share the node's namespaces")
    ]


# fab-privileged-allow-listed -------------------------------------------------------------------

def test_a_privileged_container_in_a_namespace_the_cluster_lists_passes(stack):
    assert check(privileged_allow_listed, kube(host_pod("nvidia-network-operator", PRIVILEGED), "site-t-gpu")) == []


def test_fails_when_a_container_is_privileged_in_a_namespace_the_cluster_does_not_list(stack):
    assert check(privileged_allow_listed, kube(host_pod("gpu-operator", PRIVILEGED), "site-t-compute")) == [
        ("container app of DaemonSet gpu-operator/agent on site-t-compute is privileged; on site-t-compute only the namespaces "
        "of clusters.compute.host_network_namespaces (none) may run privileged containers")
    ]


# fab-privileged-namespace-allow-listed ---------------------------------------------------------

def privileged_namespace(name: str) -> dict:
    return k8s("Namespace", name, labels={"pod-security.kubernetes.io/enforce": "privileged"})


def test_a_privileged_namespace_the_cluster_lists_passes(stack):
    assert check(privileged_namespace_allow_listed, kube(privileged_namespace("gpu-operator"), "site-t-gpu")) == []


def test_fails_when_a_namespace_is_privileged_on_a_cluster_that_does_not_list_it(stack):
    assert check(privileged_namespace_allow_listed, kube(privileged_namespace("gpu-operator"), "site-t-storage")) == [
        ("namespace gpu-operator on site-t-storage enforces Pod Security privileged; on site-t-storage only the namespaces of "
        "clusters.storage.host_network_namespaces (none) may")
    ]


# fab-pod-security: exempt only where the cluster allows host access ---------------------------

def test_pod_security_exempts_a_namespace_only_on_the_cluster_that_lists_it(stack):
    root = {**SAFE, "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True}}
    assert check(pod_security, kube(host_pod("gpu-operator", root), "site-t-gpu")) == []
    assert check(pod_security, kube(host_pod("gpu-operator", root), "site-t-storage")) == [
        "container app of DaemonSet gpu-operator/agent must run as non-root"
    ]


# On the full small site's render, in process; and through the pack started as the CLI starts it without the stack's
# config (with it, the stacks pass every rule through the service: tests/policies/test_pack.py) -----------------------


def edited(plan: Plan, edit) -> Plan:
    resources = copy.deepcopy(plan.resources)
    edit(resources)
    return dataclasses.replace(plan, resources=resources)


def named(resources: list[dict], name: str) -> dict:
    (match,) = [r for r in resources if r["name"] == name]
    return match


def messages(violations) -> list[tuple[str, str]]:
    return [(v.policy, v.message.splitlines()[-1]) for v in violations]


def test_the_pack_gets_the_stack_config_as_the_cli_passes_it(full_plan):
    env = pack_environment(full_plan)
    assert json.loads(json.loads(env["PULUMI_CONFIG"])[SITE_KEY])["clusters"]["gpu"]["host_network_namespaces"] == [
        "gpu-operator", "nvidia-network-operator"]
    assert (env["PULUMI_PROJECT"], env["PULUMI_STACK"], env["PULUMI_DRY_RUN"]) == ("fab-platform", "site-t", "true")


def test_fails_when_a_serving_pod_takes_the_host_network(full_plan):
    def edit(resources):
        named(resources, "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["spec"]["hostNetwork"] = True

    assert messages(analyze_in_process(edited(full_plan, edit))) == [(
        "fab-host-network-allow-listed",
        (f"Deployment inference/vllm-qwen3-8b on site-t-gpu sets hostNetwork: true; on site-t-gpu only the namespaces of "
        f"{GPU_LIST} may share the node's namespaces"),
    )]


def test_fails_when_a_storage_namespace_is_made_privileged(full_plan):
    def edit(resources):
        named(resources, "storage-ns-polaris")["inputs"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"

    assert messages(analyze_in_process(edited(full_plan, edit))) == [(
        "fab-privileged-namespace-allow-listed",
        ("namespace polaris on site-t-storage enforces Pod Security privileged; on site-t-storage only the namespaces of "
        "clusters.storage.host_network_namespaces (none) may"),
    )]


def test_fails_when_the_gpu_operators_namespace_is_put_on_storage(full_plan):
    def edit(resources):
        namespace = copy.deepcopy(named(resources, "gpu-gpu-ns-gpu-operator"))
        namespace.update(name="storage-ns-gpu-operator", urn=namespace["urn"] + "-storage", parent=named(resources, "storage")["urn"],
                         provider=named(resources, "site-t-storage")["urn"])
        resources.append(namespace)

    assert messages(analyze_in_process(edited(full_plan, edit))) == [(
        "fab-privileged-namespace-allow-listed",
        ("namespace gpu-operator on site-t-storage enforces Pod Security privileged; on site-t-storage only the namespaces of "
        "clusters.storage.host_network_namespaces (none) may"),
    )]


def test_fails_when_a_privileged_container_runs_in_a_team_namespace(full_plan):
    def edit(resources):
        container = named(resources, "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["spec"]["containers"][0]
        container["securityContext"]["privileged"] = True

    assert messages(analyze_in_process(edited(full_plan, edit))) == [(
        "fab-privileged-allow-listed",
        (f"container vllm of Deployment inference/vllm-qwen3-8b on site-t-gpu is privileged; on site-t-gpu only the namespaces "
        f"of {GPU_LIST} may run privileged containers"),
    )]


def test_fails_when_the_pack_is_started_without_the_stacks_config(grpc_pack, full_plan):
    without = dataclasses.replace(full_plan, config={})
    found = {(v.policy, v.message.splitlines()[-1]) for v in analyze_with(grpc_pack, without)}
    assert ("fab-privileged-namespace-allow-listed",
            (f"namespace gpu-operator on site-t-gpu enforces Pod Security privileged; on site-t-gpu only the namespaces of "
            f"{NO_CONFIG} may")) in found
    assert {policy for policy, _ in found} == {"fab-privileged-namespace-allow-listed"}
