"""fab-remote-training-replica-only: a peer's team that trains here reaches the peer's replica and its own checkpoint
prefix, nothing else of the site (DESIGN section 2: remote-site GPUs are used only for data replicated there)."""

from __future__ import annotations

import copy
import json
from typing import Any

from policy_fixtures import check, resource
from pulumi_policy.proxy import UNKNOWN_OBJECT_VALUE
from rules.federation import remote_training_replica_only

USER = "fab-remote-site-u-yield"
REPLICA, CHECKPOINTS, WAREHOUSE = "site-t-replica-site-u", "site-t-checkpoints", "site-t-warehouse"
PREFIX = "remote-site-u-yield"

COMPLIANT = {"Version": "2012-10-17", "Statement": [
    {"Sid": "LocateBuckets", "Effect": "Allow", "Action": ["s3:GetBucketLocation"],
     "Resource": [f"arn:aws:s3:::{CHECKPOINTS}", f"arn:aws:s3:::{REPLICA}"]},
    {"Sid": "ListReplica", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:aws:s3:::{REPLICA}"]},
    {"Sid": "ReadReplica", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"], "Resource": [f"arn:aws:s3:::{REPLICA}/*"]},
    {"Sid": "ListOwnPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:aws:s3:::{CHECKPOINTS}"],
     "Condition": {"StringLike": {"s3:prefix": [f"{PREFIX}/", f"{PREFIX}/*"]}}},
    {"Sid": "OwnPrefix", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
     "Resource": [f"arn:aws:s3:::{CHECKPOINTS}/{PREFIX}/*"]},
    {"Sid": "NoTableCatalog", "Effect": "Deny", "Action": ["s3tables:*"], "Resource": [f"arn:aws:s3tables:::bucket/{REPLICA}"]},
]}


def tags(bucket: str, data_class: str, residency: str) -> Any:
    return resource("pulumi-python:dynamic/storage:BucketTags",
                    {"bucket": bucket, "tags": {"fab.internal/class": data_class, "fab.internal/residency": residency}}, name=f"{bucket}-tags")


def stack(document: dict[str, Any], engine: Any = "remote-training") -> list[Any]:
    return [
        tags(REPLICA, "gold", "replica"), tags(CHECKPOINTS, "checkpoints", "site-local"), tags(WAREHOUSE, "warehouse", "site-local"),
        resource("minio:index/iamUser:IamUser", {"name": USER, "tags": engine if engine is UNKNOWN_OBJECT_VALUE else {"fab.internal/engine": engine}},
                 name="user"),
        resource("minio:index/iamUserPolicyAttachment:IamUserPolicyAttachment", {"userName": USER, "policyName": USER}, name="attachment"),
        resource("minio:index/iamPolicy:IamPolicy", {"name": USER, "policy": json.dumps(document)}, name="policy"),
    ]


def with_statement(statement: dict[str, Any]) -> dict[str, Any]:
    document = copy.deepcopy(COMPLIANT)
    document["Statement"].append(statement)
    return document


def test_the_replica_and_the_teams_own_prefix_pass():
    assert check(remote_training_replica_only, stack(COMPLIANT)) == []


def test_other_principals_are_not_judged_here():
    document = with_statement({"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"arn:aws:s3:::{WAREHOUSE}/*"]})
    assert check(remote_training_replica_only, stack(document, engine="training")) == []


def test_fails_when_a_peers_team_reads_site_data():
    document = with_statement({"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"arn:aws:s3:::{WAREHOUSE}/*"]})
    assert check(remote_training_replica_only, stack(document)) == [
        f"MinIO policy {USER} of a peer's team that trains here allows s3:GetObject on arn:aws:s3:::{WAREHOUSE}/* (class "
        "warehouse, residency site-local); a peer's team may read replica buckets and list, read and write its own prefix "
        "of the checkpoints bucket, nothing else"
    ]


def test_fails_when_a_peers_team_writes_the_whole_checkpoints_bucket():
    document = with_statement({"Effect": "Allow", "Action": ["s3:PutObject"], "Resource": [f"arn:aws:s3:::{CHECKPOINTS}/*"]})
    assert check(remote_training_replica_only, stack(document)) == [
        f"MinIO policy {USER} of a peer's team that trains here allows s3:PutObject on arn:aws:s3:::{CHECKPOINTS}/* (class "
        "checkpoints, residency site-local); a peer's team may read replica buckets and list, read and write its own prefix "
        "of the checkpoints bucket, nothing else"
    ]


def test_fails_when_a_peers_team_lists_every_checkpoint():
    document = with_statement({"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:aws:s3:::{CHECKPOINTS}"]})
    assert check(remote_training_replica_only, stack(document)) == [
        f"MinIO policy {USER} of a peer's team that trains here allows s3:ListBucket on arn:aws:s3:::{CHECKPOINTS} (class "
        "checkpoints, residency site-local); a peer's team may read replica buckets and list, read and write its own prefix "
        "of the checkpoints bucket, nothing else"
    ]


def test_fails_when_a_peers_team_writes_the_replica():
    document = with_statement({"Effect": "Allow", "Action": ["s3:PutObject"], "Resource": [f"arn:aws:s3:::{REPLICA}/*"]})
    assert check(remote_training_replica_only, stack(document)) == [
        f"MinIO policy {USER} of a peer's team that trains here allows s3:PutObject on arn:aws:s3:::{REPLICA}/* (class "
        "gold, residency replica); a peer's team may read replica buckets and list, read and write its own prefix of the "
        "checkpoints bucket, nothing else"
    ]


def test_fails_closed_when_a_users_tags_are_unknown():
    assert check(remote_training_replica_only, stack(COMPLIANT, engine=UNKNOWN_OBJECT_VALUE)) == [
        "MinIO user user: .tags can't be known during preview, and this rule decides on it, so it fails closed; compute the "
        "value in the program instead of from another resource's output"
    ]
