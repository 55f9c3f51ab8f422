"""Per-team training credentials: each team its own MinIO user, policy and keys, confined to its prefixes of the checkpoint
and model buckets, and its own Polaris principal, delivered only into its own namespaces (DESIGN section 1, training)."""

from __future__ import annotations

import json

from helpers import render_small
from small_site import full_site

from components.data_access import team_prefix

IAM_POLICY, IAM_USER = "minio:index/iamPolicy:IamPolicy", "minio:index/iamUser:IamUser"
READ = ["s3:GetObject", "s3:GetObjectVersion"]
OWN = [*READ, "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]


def team_policy(plan, team: str) -> dict:
    (policy,) = [r for r in plan.of_type(IAM_POLICY) if r["inputs"]["name"] == f"fab-training-{team}"]
    return json.loads(policy["inputs"]["policy"])


def allowed(policy: dict) -> list[tuple[tuple[str, ...], tuple[str, ...], str]]:
    """(actions, resources, condition) of each Allow statement."""
    return [(tuple(s["Action"]), tuple(s["Resource"]), json.dumps(s.get("Condition"), sort_keys=True))
            for s in policy["Statement"] if s["Effect"] == "Allow"]


def delivered(plan, name: str) -> dict[tuple[str, str], dict]:
    """(cluster, namespace) -> the Secret `name` StorageCluster delivered there."""
    return {(plan.cluster(r), r["inputs"]["metadata"]["namespace"]): r for r in plan.of_type("kubernetes:core/v1:Secret")
            if r["inputs"]["metadata"]["name"] == name and r["name"].startswith("storage-")}


def test_each_team_has_its_own_minio_user_tagged_with_the_team(full_plan):
    users = {r["inputs"]["name"]: r["inputs"]["tags"] for r in full_plan.of_type(IAM_USER) if r["inputs"]["name"].startswith("fab-training")}
    assert users == {
        f"fab-training-{team}": {"fab.internal/engine": "training", "fab.internal/team": team, "fab.internal/site": "site-t"}
        for team in ("fdc", "yield")
    }


def test_a_teams_policy_reads_the_training_data_and_reaches_checkpoints_and_models_under_its_prefix_only(full_plan):
    assert allowed(team_policy(full_plan, "yield")) == [
        (("s3:GetBucketLocation", "s3:ListBucket"), ("arn:aws:s3:::site-t-datasets", "arn:aws:s3:::site-t-warehouse"), "null"),
        (tuple(READ), ("arn:aws:s3:::site-t-datasets/*", "arn:aws:s3:::site-t-warehouse/*"), "null"),
        (("s3:ListBucket",), ("arn:aws:s3:::site-t-checkpoints", "arn:aws:s3:::site-t-models"),
         json.dumps({"StringLike": {"s3:prefix": ["yield/*"]}})),
        (tuple(OWN), ("arn:aws:s3:::site-t-checkpoints/yield/*", "arn:aws:s3:::site-t-models/yield/*"), "null"),
        # Offline batch inference (on in phase 5): the served weights, listed and read, never written.
        (("s3:ListBucket",), ("arn:aws:s3:::site-t-models",), json.dumps({"StringLike": {"s3:prefix": ["qwen/qwen3-8b/*"]}})),
        (tuple(READ), ("arn:aws:s3:::site-t-models/qwen/qwen3-8b/*",), "null"),
    ]


def test_a_teams_policy_still_denies_the_object_stores_table_catalog(full_plan):
    (deny,) = [s for s in team_policy(full_plan, "fdc")["Statement"] if s["Effect"] == "Deny"]
    assert deny["Action"] == ["s3tables:*"]
    assert "arn:aws:s3tables:::bucket/site-t-checkpoints/*" in deny["Resource"]


def test_no_training_user_is_shared_between_teams(full_plan):
    names = [r["inputs"]["name"] for r in full_plan.of_type(IAM_USER)]
    assert "fab-training-yield" in names
    assert "fab-training" not in names


def test_each_team_namespace_receives_its_own_teams_keys_and_prefixes(full_plan):
    secrets = delivered(full_plan, "s3-training")
    # the team namespaces where jobs train, and on compute the team's Spark Connect namespace
    assert sorted(secrets) == sorted([("site-t-compute", f"spark-team-{t}") for t in ("fdc", "yield")]
                                     + [(c, f"team-{t}") for c in ("site-t-gpu", "site-t-gpu-train") for t in ("fdc", "yield")])
    for (_, namespace), secret in secrets.items():
        team = namespace.split("team-", 1)[1]
        assert secret["inputs"]["metadata"]["labels"] == {"fab.internal/engine": "training", "fab.internal/team": team}
        keys = [d for d in secret["dependencies"] if "IamServiceAccount" in d or "IamUserPolicyAttachment" in d]
        assert [d.rsplit("::", 1)[-1] for d in keys] == [f"storage-training-{team}-keys", f"storage-training-{team}-policy-attachment"]
        assert {"CHECKPOINT_URI", "MODEL_URI"} <= set(secret["inputs"]["stringData"])


def test_a_teams_prefix_is_its_key_under_the_bucket():
    assert team_prefix("site-t-checkpoints", "defect-vision") == "s3://site-t-checkpoints/defect-vision/"


def test_each_team_namespace_receives_its_own_teams_polaris_principal_once_its_setup_ran(full_plan):
    secrets = delivered(full_plan, "polaris-training")
    assert len(secrets) == 6  # two teams: two training clusters and compute's Spark Connect namespaces
    for (_, namespace), secret in secrets.items():
        team = namespace.split("team-", 1)[1]
        own = sorted(d.rsplit("::", 1)[-1] for d in secret["dependencies"] if "::storage-" in d)
        assert own == [f"storage-job-polaris-team-{team}", f"storage-polaris-training-{team}-id", f"storage-polaris-training-{team}-secret"]


def test_each_teams_principal_is_set_up_by_its_own_job_after_the_sites_setup(full_plan):
    jobs = {j["metadata"]["name"]: j for j in full_plan.objects("Job", "site-t-storage")}
    assert {"polaris-team-fdc", "polaris-team-yield"} <= set(jobs)
    (job,) = [r for r in full_plan.of_type("kubernetes:batch/v1:Job") if r["name"] == "storage-job-polaris-team-yield"]
    (site_setup,) = [r for r in full_plan.of_type("kubernetes:batch/v1:Job") if r["name"] == "storage-job-polaris-setup"]
    assert site_setup["urn"] in job["dependencies"]
    env = {e["name"]: e for e in jobs["polaris-team-yield"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env["PLAN_JSON"]["value"]) == {"catalog_name": "fab", "principals": [{
        "name": "fab-training-yield", "principal_role": "fab-training-yield", "catalog_roles": ["reader"], "credentials_env": "TEAM",
    }]}
    assert env["TEAM_CLIENT_SECRET"]["valueFrom"] == {"secretKeyRef": {"name": "polaris-team-yield", "key": "client-secret"}}


def test_a_removed_team_takes_only_its_own_credentials_with_it(full_plan):
    site = full_site()
    del site["teams"]["fdc"]
    del site["training"]["quotas"]["fdc"]
    del site["inference"]["team_requests_per_minute"]
    after = {r["urn"] for r in render_small(site).resources}
    gone = sorted(r["name"] for r in full_plan.resources if r["urn"] not in after and r["name"].startswith("storage-"))
    assert gone == sorted([
        "storage-job-polaris-team-fdc", "storage-polaris-training-fdc-id", "storage-polaris-training-fdc-secret",
        "storage-polaris-training-compute-spark-team-fdc", "storage-s3-training-compute-spark-team-fdc",
        "storage-polaris-training-gpu-team-fdc", "storage-polaris-training-gpu-train-team-fdc", "storage-s3-training-gpu-team-fdc",
        "storage-s3-training-gpu-train-team-fdc", "storage-secret-polaris-team-fdc", "storage-training-fdc-keys",
        "storage-training-fdc-names-free", "storage-training-fdc-policy", "storage-training-fdc-policy-attachment",
        "storage-training-fdc-user",
    ])
