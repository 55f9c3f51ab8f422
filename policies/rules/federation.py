"""Rules on federation: a peer's team that trains here reaches replicated data only (DESIGN section 2: remote-site GPUs
are used only for data that was replicated there; raw and detailed data stay in their site)."""

from __future__ import annotations

import json
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from rules._k8s import UNKNOWN, plain, undecided
from rules._policy import stack_rule
from rules.storage import BUCKET_TAGS, CLASS_TAG, IAM_POLICY, RESIDENCY_TAG

IAM_USER = "minio:index/iamUser:IamUser"
ATTACHMENT = "minio:index/iamUserPolicyAttachment:IamUserPolicyAttachment"
ENGINE_TAG = "fab.internal/engine"
REMOTE_TRAINING = "remote-training"
"""The engine tag of a peer's team's MinIO user (components/federation.py)."""
READS = {"s3:GetObject", "s3:GetObjectVersion"}
WRITES = {"s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"}


def _tags(resources: list[Any]) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Bucket -> its tags, and the buckets whose tags are unknown."""
    tags: dict[str, dict[str, Any]] = {}
    unknown: set[str] = set()
    for resource in resources:
        if resource.resource_type == BUCKET_TAGS:
            props = plain(resource.props)
            if props.get("tags") is UNKNOWN:
                unknown.add(str(props.get("bucket")))
            elif isinstance(props.get("tags"), dict):
                tags[props.get("bucket")] = props["tags"]
    return tags, unknown


def _remote_policies(resources: list[Any], report: ReportViolation) -> set[str]:
    """Names of the MinIO policies attached to users tagged remote-training. The platform names a principal's user and
    policy alike; an attachment whose names are unknown in preview is read by that convention."""
    users = set()
    for resource in resources:
        if resource.resource_type == IAM_USER:
            props = plain(resource.props)
            if problem := undecided(f"MinIO user {resource.name}", {"name": props.get("name"), "tags": props.get("tags")}):
                report(problem, resource.urn)
            elif (props.get("tags") or {}).get(ENGINE_TAG) == REMOTE_TRAINING:
                users.add(props.get("name"))
    policies = set(users)
    for resource in resources:
        if resource.resource_type == ATTACHMENT:
            props = plain(resource.props)
            if props.get("userName") in users and props.get("policyName") is not UNKNOWN:
                policies.add(props.get("policyName"))
    return policies


def _allowed(action: str, arn: str, statement: dict[str, Any], tags: dict[str, dict[str, Any]]) -> bool:
    """Whether a peer's team may do `action` on `arn`: read replicas; list, read and write its own prefix of checkpoints."""
    bucket, _, key = arn.removeprefix("arn:aws:s3:::").partition("/")
    replica = tags.get(bucket, {}).get(RESIDENCY_TAG) == "replica"
    checkpoints = tags.get(bucket, {}).get(CLASS_TAG) == "checkpoints"
    own_prefix = checkpoints and key.endswith("/*") and key.strip("/*") != ""
    if action == "s3:GetBucketLocation":
        return replica or checkpoints
    if action == "s3:ListBucket":
        prefixes = ((statement.get("Condition") or {}).get("StringLike") or {}).get("s3:prefix") or []
        return (replica and key == "") or (checkpoints and key == "" and bool(prefixes) and all(p.strip("/*") for p in prefixes))
    if action in READS:
        return (replica and key == "*") or own_prefix
    if action in WRITES:
        return own_prefix
    return False


@stack_rule("fab-remote-training-replica-only",
            "A peer's team that trains here reads replica buckets only and writes only its own prefix of the checkpoints bucket.",
            place=300,
            docs="a peer's team that trains here (its MinIO user tagged `remote-training`) reads replica buckets only and lists, "
                 "reads and writes only its own prefix of the checkpoints bucket")
def remote_training_replica_only(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a MinIO user whose name or tags are unknown, a policy document of a peer's team that is unknown, or
    a bucket it names whose tags are unknown fail closed."""
    tags, unknown_tags = _tags(args.resources)
    remote = _remote_policies(args.resources, report)
    for resource in args.resources:
        if resource.resource_type != IAM_POLICY:
            continue
        props = plain(resource.props)
        if props.get("name") not in remote:
            continue
        if problem := undecided(f"MinIO policy {props.get('name')}", props.get("policy"), ".policy"):
            report(problem, resource.urn)
            continue
        for statement in json.loads(props.get("policy") or "{}").get("Statement", []):
            if statement.get("Effect") != "Allow":
                continue
            actions = statement.get("Action", [])
            arns = statement.get("Resource", [])
            for action in [actions] if isinstance(actions, str) else actions:
                for arn in [arns] if isinstance(arns, str) else arns:
                    bucket = arn.removeprefix("arn:aws:s3:::").split("/", 1)[0]
                    if bucket in unknown_tags:
                        report(f"MinIO policy {props.get('name')}: the tags of bucket {bucket} can't be known during preview, and "
                               "this rule decides on them, so it fails closed", resource.urn)
                        continue
                    if not _allowed(action, arn, statement, tags):
                        of = tags.get(bucket, {})
                        report(
                            f"MinIO policy {props.get('name')} of a peer's team that trains here allows {action} on {arn} "
                            f"(class {of.get(CLASS_TAG, 'unknown')}, residency {of.get(RESIDENCY_TAG, 'unknown')}); a peer's "
                            "team may read replica buckets and list, read and write its own prefix of the checkpoints bucket, "
                            "nothing else",
                            resource.urn,
                        )
