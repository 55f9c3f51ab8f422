"""What a MinIO policy lets its user do, as the IAM evaluator finds it (tests/iam_engine.py): every request of a grid
over the site's buckets and every prefix any policy of the site names (so a team's prefix is its neighbours' probe),
the bucket root, and a prefix nobody is given, summed up per bucket and verb as `whole` or the prefixes allowed."""

from __future__ import annotations

import json
import re
from typing import Any

from iam_engine import S3Request, evaluate_many

INTRUDER = "intruder/"
KEY = "part-00000.parquet"
OBJECT_VERBS = {"read": "s3:GetObject", "read-version": "s3:GetObjectVersion", "write": "s3:PutObject",
                "delete": "s3:DeleteObject", "abort-upload": "s3:AbortMultipartUpload", "upload-parts": "s3:ListMultipartUploadParts"}
"""The object actions of the platform's policies (components/data_access.py READ_ACTIONS, WRITE_ACTIONS)."""
BUCKET_VERBS = {"locate": "s3:GetBucketLocation", "list-uploads": "s3:ListBucketMultipartUploads"}


def site_policies(plan) -> dict[str, dict[str, Any]]:
    """MinIO policy name -> document, of every IamPolicy of the plan."""
    return {r["inputs"]["name"]: json.loads(r["inputs"]["policy"]) for r in plan.of_type("minio:index/iamPolicy:IamPolicy")}


def site_buckets(plan) -> list[str]:
    return sorted({r["inputs"]["bucket"] for r in plan.of_type("minio:index/s3Bucket:S3Bucket")})


def named_prefixes(policies: dict[str, dict[str, Any]]) -> list[str]:
    """Every object prefix a policy of the site names, in a Resource or an `s3:prefix` condition."""
    found = set()
    for document in policies.values():
        for statement in document["Statement"]:
            for resource in statement.get("Resource", []):
                if (match := re.match(r"arn:aws:s3:::[^/]+/(.+)\*$", resource)) and match.group(1):
                    found.add(match.group(1))
            for condition in statement.get("Condition", {}).values():
                found |= {value.rstrip("*") for value in condition.get("s3:prefix", [])}
    return sorted(found)


def grid(buckets: list[str], prefixes: list[str], source_ip: str) -> list[tuple[str, str, str, S3Request]]:
    """(bucket, verb, prefix, request) of every probe."""
    probes = []
    for bucket in buckets:
        for verb, action in BUCKET_VERBS.items():
            probes.append((bucket, verb, "", S3Request(action, bucket, source_ip=source_ip)))
        for prefix in ["", *prefixes, INTRUDER]:
            probes.append((bucket, "list", prefix, S3Request("s3:ListBucket", bucket, prefix=prefix or None, source_ip=source_ip)))
            for verb, action in OBJECT_VERBS.items():
                probes.append((bucket, verb, prefix, S3Request(action, bucket, key=f"{prefix}{KEY}", source_ip=source_ip)))
    return probes


def access_of(principals: list[tuple[str, dict[str, Any], str]], buckets: list[str],
              prefixes: list[str]) -> list[tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]]:
    """For each (user, document, source address): {bucket: {verb: "whole" | [prefixes allowed]}} of what the evaluator
    allows the user from that address, and the statements it could not evaluate (MinIO-only); one evaluator run."""
    grids = [grid(buckets, prefixes, source_ip) for _, _, source_ip in principals]
    verdicts = evaluate_many([(user, document, [r for *_, r in probes]) for (user, document, _), probes in zip(principals, grids)])
    found = []
    for probes, verdict in zip(grids, verdicts):
        summary: dict[str, dict[str, Any]] = {}
        for bucket, verb, prefix, request in probes:
            if verdict.allowed[request]:
                summary.setdefault(bucket, {}).setdefault(verb, []).append(prefix)
        for verbs in summary.values():
            for verb, allowed in verbs.items():
                # whole: the bucket root, which no prefix grant gives
                verbs[verb] = "whole" if "" in allowed else allowed
        found.append((summary, verdict.unevaluated))
    return found
