"""What the pack does with values that can't be known during a preview, through its Analyzer service once, then in process.

The engine sends such values as sentinels; the SDK's proxies raise on them, which would turn a
mandatory rule into an advisory "can't run during preview" and let the preview pass. Mandatory rules
whose decision rests on an unknown value fail closed; rules that look for literal text skip them.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
from helpers import render_small
from policy_fixtures import SAFE, check, kube, pod, resource
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_OBJECT_VALUE
from rules._k8s import UNKNOWN, plain, unknown_paths
from rules.storage import bucket_least_privilege
from rules.workloads import no_plaintext_secrets, pod_security
from small_site import small_site

from fabctl._mockrun import UNKNOWN_VALUE
from fabctl.policy import analyze_in_process, analyze_with
from fabctl.render import Plan


def with_edit(edit) -> Plan:
    """The smallest site's render (which passes every policy) with one edit."""
    plan = render_small(small_site())
    resources = copy.deepcopy(plan.resources)
    edit({r["name"]: r for r in resources})
    return dataclasses.replace(plan, resources=resources)


def unknown_image(by_name):
    by_name["compute-starrocks-setup-job"]["inputs"]["spec"]["template"]["spec"]["containers"][0]["image"] = UNKNOWN_VALUE


def test_an_unknown_image_reaches_the_analyzer_service_as_the_engines_sentinel(grpc_pack):
    """Through gRPC as the CLI sends it: the service reports what the in-process analysis reports."""
    plan = with_edit(unknown_image)
    assert analyze_with(grpc_pack, plan) == analyze_in_process(plan)


def test_an_unknown_image_fails_the_pinned_versions_rule_closed():
    violations = analyze_in_process(with_edit(unknown_image))
    assert [(v.policy, v.level, v.message.splitlines()[-1]) for v in violations] == [(
        "fab-pinned-versions", "mandatory",
        "Job starrocks-setup: .pod.containers[0].image can't be known during preview, and this rule decides on it, so it fails closed; "
        "compute the value in the program instead of from another resource's output",
    )]


def test_an_unknown_secret_in_helm_values_passes_the_literal_checks():
    def edit(by_name):
        by_name["network-gpu-cilium"]["inputs"]["values"]["tls"]["ca"]["key"] = UNKNOWN_VALUE
        by_name["network-gpu-cilium"]["inputs"]["values"]["hubble"]["peerService"] = UNKNOWN_VALUE

    assert analyze_in_process(with_edit(edit)) == []


def test_plain_marks_unknowns_without_raising():
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

    value = plain(unknown_checking_proxy({"a": [UNKNOWN_STRING_VALUE, "b"], "c": {"d": UNKNOWN_STRING_VALUE}}))
    assert (value, unknown_paths(value)) == ({"a": [UNKNOWN, "b"], "c": {"d": UNKNOWN}}, [".a[0]", ".c.d"])


def test_pod_security_fails_closed_on_an_unknown_security_context():
    container = {**SAFE, "securityContext": UNKNOWN_OBJECT_VALUE}
    assert check(pod_security, kube(pod("Deployment", "app", "team-yield", container))) == [
        "Deployment team-yield/app: .pod.containers[0].securityContext can't be known during preview, and this rule "
        "decides on it, so it fails closed; compute the value in the program instead of from another resource's output"
    ]


def test_least_privilege_fails_closed_on_an_unknown_policy_document():
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    target = resource("minio:index/iamPolicy:IamPolicy", {"name": "fab-spark", "policy": UNKNOWN_STRING_VALUE}, name="storage-spark-policy")
    assert check(bucket_least_privilege, target) == [
        "MinIO policy storage-spark-policy: .policy can't be known during preview, and this rule decides on it, so it fails "
        "closed; compute the value in the program instead of from another resource's output"
    ]


def test_plaintext_check_skips_an_unknown_config_value():
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"},
                  "data": {"password": UNKNOWN_STRING_VALUE}}
    assert check(no_plaintext_secrets, kube(config_map)) == []


CASES = {
    "fab-pinned-versions": ("kubernetes:apps/v1:Deployment", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
        "spec": {"template": {"spec": {"containers": UNKNOWN_ARRAY_VALUE}}},
    }),
    "fab-host-network-allow-listed": ("kubernetes:apps/v1:Deployment", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
        "spec": {"template": UNKNOWN_OBJECT_VALUE},
    }),
    "fab-privileged-allow-listed": ("kubernetes:apps/v1:Deployment", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
        "spec": {"template": {"spec": {"containers": UNKNOWN_ARRAY_VALUE}}},
    }),
    "fab-privileged-namespace-allow-listed": ("kubernetes:core/v1:Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": UNKNOWN_OBJECT_VALUE}),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_a_wholly_unknown_map_or_list_fails_closed_without_crashing(rule):
    from rules.workloads import (
        host_network_allow_listed,
        pinned_versions,
        privileged_allow_listed,
        privileged_namespace_allow_listed,
    )

    policies = (pinned_versions, host_network_allow_listed, privileged_allow_listed, privileged_namespace_allow_listed)
    policy = {p.name: p for p in policies}[rule]
    type_, props = CASES[rule]
    (message,) = check(policy, resource(type_, props, name="x"))
    assert "can't be known during preview, and this rule decides on it, so it fails closed" in message


def test_the_routes_rule_fails_closed_on_an_unknown_spec():
    from rules.network import routes_authenticated

    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "r", "namespace": "inference"},
             "spec": UNKNOWN_OBJECT_VALUE}
    messages = check(routes_authenticated, [kube(route, cluster="site-a-gpu", gpu=True)])
    assert messages == [
        "HTTPRoute inference/r: .targetRefs, .jwt, .rateLimit can't be known during preview, and this rule decides on it, so it "
        "fails closed; compute the value in the program instead of from another resource's output"
    ]


def test_the_versioning_rule_fails_closed_on_an_unknown_setting_without_crashing():
    from rules.storage import versioned_artifacts

    versioning = resource("minio:index/s3BucketVersioning:S3BucketVersioning",
                          {"bucket": "site-a-models", "versioningConfiguration": UNKNOWN_OBJECT_VALUE}, name="v")
    assert check(versioned_artifacts, [versioning]) == [
        "S3BucketVersioning v: .versioningConfiguration can't be known during preview, and this rule decides on it, so it fails "
        "closed; compute the value in the program instead of from another resource's output"
    ]


def test_the_flow_rule_fails_closed_on_an_unknown_port():
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE
    from rules.network import flow_direction

    rule = {"apiVersion": "cilium.io/v2", "kind": "CiliumClusterwideNetworkPolicy", "metadata": {"name": "fab-flow-s3"},
            "spec": {"endpointSelector": {}, "ingress": [{"fromEntities": ["world"],
                                                           "toPorts": [{"ports": [{"port": UNKNOWN_STRING_VALUE}]}]}]}}
    assert check(flow_direction, [kube(rule, cluster="site-a-storage")]) == [
        "CiliumClusterwideNetworkPolicy fab-flow-s3 on site-a-storage: .spec.ingress[0].toPorts[0].ports[0].port can't be known "
        "during preview, and this rule decides on it, so it fails closed; compute the value in the program instead of from "
        "another resource's output"
    ]


RULE_STOPPED_MIDWAY = '''
from pulumi.runtime.rpc import UNKNOWN
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy
from pulumi_policy.proxy import UnknownValueError

PACK_NAME = "fab-order"


def validate(args, report_violation):
    if args.resource_type == "pulumi:providers:keycloak":
        report_violation("found before the unknown value")
        raise UnknownValueError(UNKNOWN, ["clientSecret"])


POLICIES = [ResourceValidationPolicy(name="fab-stops-midway", description="Reports, then reads an unknown value.",
                                     validate=validate, enforcement_level=EnforcementLevel.ADVISORY)]
'''


def test_a_rule_stopped_by_an_unknown_value_keeps_what_it_reported_before_the_diagnostic(tmp_path, small_plan):
    """The servicer appends the "can't run" diagnostic after what the rule reported; in process, alike."""
    import importlib.util
    import sys

    from pulumi_policy.policy import EnforcementLevel, _PolicyAnalyzerServicer

    from fabctl.policy import POLICIES_DIR, _analyzed_in_process, _InProcessPack, analyzer

    (tmp_path / "order_rules.py").write_text(RULE_STOPPED_MIDWAY)
    (tmp_path / "__main__.py").write_text("import sys\nsys.path.insert(0, '.')\nfrom pulumi_policy import PolicyPack\n"
                                          "from order_rules import PACK_NAME, POLICIES\nPolicyPack(name=PACK_NAME, policies=POLICIES)\n")
    (tmp_path / "PulumiPolicy.yaml").write_text(f"runtime:\n  name: python\n  options:\n    virtualenv: {(POLICIES_DIR / '../venv').resolve()}\n")
    spec = importlib.util.spec_from_file_location("order_rules", tmp_path / "order_rules.py")
    rules = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rules)
    in_process = _analyzed_in_process(_InProcessPack(rules.PACK_NAME, tuple(rules.POLICIES), _PolicyAnalyzerServicer(
        rules.PACK_NAME, "0.0.1", list(rules.POLICIES), EnforcementLevel.ADVISORY)), small_plan)
    with analyzer(tmp_path) as packs:
        served = analyze_with(packs, small_plan)
    assert [v.message.splitlines()[-1] for v in in_process] == [
        "found before the unknown value",
        "can't run policy 'fab-stops-midway' from policy pack 'fab-order@v0.0.1' during preview: "
        "string value at .clientSecret can't be known during preview",
    ]
    assert in_process == served
    assert "order_rules" not in sys.modules
