"""`fabctl access`, S3 area (fabctl/access/s3.py): the Python evaluation of MinIO policies, proven equal to AWS's own
logic (tests/iam_engine.py) on every policy of both stacks, and what a team's and a vendor's keys allow."""

from __future__ import annotations

import pytest

from fabctl.access import s3
from fabctl.access.model import Principal
from iam_engine import S3Request, aws_document, evaluate_many

VENDOR_IP, OUTSIDER_IP = "192.0.2.17", "203.0.113.99"


def doc(*statements):
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(action, resource, **extra):
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def verdict(document, request, user="u"):
    return s3.evaluate([document], user, request)


def test_an_explicit_deny_wins_over_an_allow():
    document = doc(allow("s3:*", "arn:aws:s3:::b/*"), {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::b/*"})
    assert verdict(document, s3.Request("s3:DeleteObject", "b", key="k")) == "ExplicitlyDenied"


def test_a_request_no_statement_allows_is_implicitly_denied():
    assert verdict(doc(allow("s3:GetObject", "arn:aws:s3:::b/*")), s3.Request("s3:PutObject", "b", key="k")) == "ImplicitlyDenied"


def test_wildcards_match_actions_case_insensitively_and_resources_case_sensitively():
    document = doc(allow("S3:Get*", "arn:aws:s3:::b/team-?/*"))
    assert verdict(document, s3.Request("s3:GetObjectVersion", "b", key="team-a/x")) == "Allowed"
    assert verdict(document, s3.Request("s3:GetObject", "b", key="TEAM-a/x")) == "ImplicitlyDenied"


def test_a_prefix_condition_limits_a_listing_to_its_prefix():
    document = doc(allow("s3:ListBucket", "arn:aws:s3:::b", Condition={"StringLike": {"s3:prefix": ["yield/*"]}}))
    assert verdict(document, s3.Request("s3:ListBucket", "b", prefix="yield/")) == "Allowed"
    assert verdict(document, s3.Request("s3:ListBucket", "b", prefix="fdc/")) == "ImplicitlyDenied"
    assert verdict(document, s3.Request("s3:ListBucket", "b")) == "ImplicitlyDenied"


def test_a_source_address_condition_admits_its_range_only():
    document = doc(allow("s3:GetObject", "arn:aws:s3:::b/*", Condition={"IpAddress": {"aws:SourceIp": ["192.0.2.16/28"]}}))
    assert verdict(document, s3.Request("s3:GetObject", "b", key="k", source_ip=VENDOR_IP)) == "Allowed"
    assert verdict(document, s3.Request("s3:GetObject", "b", key="k", source_ip=OUTSIDER_IP)) == "ImplicitlyDenied"


def test_a_negated_condition_holds_when_its_key_is_absent():
    document = doc(allow("s3:ListBucket", "arn:aws:s3:::b", Condition={"StringNotLike": {"s3:prefix": ["secret/*"]}}))
    assert verdict(document, s3.Request("s3:ListBucket", "b")) == "Allowed"
    assert verdict(document, s3.Request("s3:ListBucket", "b", prefix="secret/x")) == "ImplicitlyDenied"


def test_a_minio_admin_statement_is_reported_on_its_own_scope():
    access = s3.user_accesses("m", ["fab-metrics"], [doc({"Effect": "Allow", "Action": ["admin:Prometheus"]})], ["b"], s3.INSIDE, "inside")
    assert [(a.scope, a.allowed, a.escalation) for a in access] == [("admin", "admin:Prometheus", "")]


def _requests(document, buckets):
    """The probes of one policy: its buckets and one it does not name, its prefixes, from inside (and, when it has an
    address condition, from a vendor's range and from elsewhere)."""
    named = sorted({b for b in buckets if f"arn:aws:s3:::{b}" in str(document)})
    others = [b for b in buckets if b not in named][:1]
    prefixes = s3.named_prefixes([document])
    addresses = (s3.INSIDE, VENDOR_IP, OUTSIDER_IP) if "aws:SourceIp" in str(document) else (s3.INSIDE,)
    return [r for ip in addresses for _, _, r in s3.probes(named + others, prefixes, ip)]


def test_the_evaluation_agrees_with_aws_on_every_policy_of_the_stack(plan):
    documents, buckets = s3.policies(plan), s3.buckets(plan)
    assert documents
    groups, ours = [], []
    for name, document in sorted(documents.items()):
        adapted, _ = aws_document(document)  # the MinIO-only statements AWS does not know, left out of both
        requests = _requests(document, buckets)
        groups.append((name, adapted, [S3Request(r.action, r.bucket, r.key, r.prefix, r.source_ip) for r in requests]))
        ours.append([s3.evaluate([adapted], name, r) == "Allowed" for r in requests])
    verdicts = evaluate_many(groups)
    disagreements = {(name, str(request)): ours_ for (name, _, requests), mine, theirs in zip(groups, ours, verdicts)
                     for request, ours_ in zip(requests, mine) if theirs.allowed[request] != ours_}
    assert sum(len(r) for _, _, r in groups) > 1000
    assert disagreements == {}


def _team(plan) -> str:
    teams = sorted(r["inputs"]["tags"]["fab.internal/team"] for r in plan.of_type("minio:index/iamUser:IamUser")
                   if r["inputs"]["tags"].get("fab.internal/engine") == "training")
    assert teams
    return teams[0]


def test_a_teams_training_user_writes_only_its_own_prefixes(plan):
    team = _team(plan)
    access = s3.accesses(plan, Principal("team", team, minio_users=(f"fab-training-{team}",)))
    writable = {a.scope for a in access if "s3:PutObject" in a.allowed.split(",")}
    assert writable
    assert {scope.split("/", 1)[1] for scope in writable} == {f"{team}/*"}


def test_a_teams_training_user_lists_another_teams_prefix_nowhere(plan):
    team = _team(plan)
    access = s3.accesses(plan, Principal("team", team, minio_users=(f"fab-training-{team}",)))
    others = {r["inputs"]["tags"].get("fab.internal/team") for r in plan.of_type("minio:index/iamUser:IamUser")} - {team, None}
    assert [a for a in access if any(f"/{other}/" in a.scope for other in others)] == []


@pytest.mark.parametrize("cidr, reads", [("192.0.2.16/28", True), ("203.0.113.96/28", False)])
def test_a_vendors_keys_read_its_shared_tables_from_its_range_only(plan_a, cidr, reads):
    access = s3.accesses(plan_a, Principal("vendor", "etch-tools", minio_users=("fab-vendor-etch-tools",), source_cidrs=(cidr,)))
    assert [(a.scope, a.allowed) for a in access] == (
        [("site-a-gold/gold/etch_tools_chamber_health/*", "s3:GetObject,s3:GetObjectVersion,s3:ListBucket")] if reads else [])
