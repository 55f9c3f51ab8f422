"""The credential rules: each engine reads only its own credential Secrets (fab-engine-reads-own-credentials), and Airflow's
GPU-job submitter reads none (fab-submitter-no-secrets) and is granted nothing by wildcard (fab-submitter-no-wildcards), a team
namespace holds only its team's credentials (fab-team-namespace-own-credentials) and a team's MinIO policy reaches checkpoints
and models only under its prefix (fab-team-policy-own-prefixes).

Unit tests build what the program renders by hand: StorageCluster's credential Secrets (`s3-<engine>`, `polaris-<engine>`,
labelled `fab.internal/engine`), the namespaces labelled with the engine whose workloads run there, and the readers: pod
templates, custom resources and Helm releases that name a Secret. The pack tests break the full small site's render.
"""

from __future__ import annotations

import copy
import dataclasses
import json

from policy_fixtures import SAFE, check, k8s, kube, pod, resource
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_OBJECT_VALUE, UNKNOWN_STRING_VALUE
from rules.credentials import (
    engine_reads_own_credentials,
    submitter_no_secrets,
    submitter_no_wildcards,
    team_namespace_own_credentials,
    team_policy_own_prefixes,
)

from components.data_access import team_policy_document
from fabctl.policy import analyze_in_process
from fabctl.render import Plan

COMPUTE, STORAGE = "site-a-compute", "site-a-storage"
FAILS_CLOSED = ("can't be known during preview, and this rule decides on it, so it fails closed; compute the value in the "
                "program instead of from another resource's output")


def credential(name: str, namespace: str, engine: str) -> dict:
    return k8s("Secret", name, namespace, labels={"fab.internal/engine": engine}, type="Opaque")


def engine_namespace(name: str, engine: str | None = None) -> dict:
    return k8s("Namespace", name, labels={"fab.internal/engine": engine} if engine else None)


def job(namespace: str, labels: dict | None = None, **container: object) -> dict:
    obj = pod("Job", "setup", namespace, {**SAFE, **container})
    if labels:
        obj["metadata"]["labels"] = labels
    return obj


def release(namespace: str, values: dict, cluster: str = COMPUTE) -> object:
    return resource("kubernetes:helm.sh/v3:Release", {"name": namespace, "namespace": namespace, "chart": namespace, "values": values},
                    name=f"compute-{namespace}", cluster=cluster)


SITE = [
    kube(engine_namespace("starrocks", "starrocks")),
    kube(engine_namespace("trino", "trino")),
    kube(credential("s3-starrocks", "starrocks", "starrocks")),
    kube(credential("polaris-starrocks", "starrocks", "starrocks")),
    kube(credential("s3-trino", "trino", "trino")),
    kube(credential("polaris-trino", "trino", "trino")),
]
"""Two engines on compute, each with its namespace and its two credential Secrets there."""


def reads(*secrets: str) -> dict:
    """A container that reads these Secrets as environment."""
    return {"envFrom": [{"secretRef": {"name": s}} for s in secrets]}


def test_an_engines_workload_reading_its_own_credentials_passes():
    assert check(engine_reads_own_credentials, [*SITE, kube(job("starrocks", **reads("s3-starrocks", "polaris-starrocks")))]) == []


def test_fails_when_a_workload_reads_another_engines_credentials_as_environment():
    assert check(engine_reads_own_credentials, [*SITE, kube(credential("s3-trino", "starrocks", "trino")),
                                                kube(job("starrocks", **reads("s3-starrocks", "s3-trino")))]) == [
        ("Job starrocks/setup on site-a-compute reads Secret starrocks/s3-trino, trino's credentials, but runs as starrocks "
        "(by the fab.internal/engine label of namespace starrocks); an engine reads only its own credential Secrets "
        "(s3-starrocks, polaris-starrocks)")
    ]


def test_fails_when_a_workload_reads_one_key_of_another_engines_credentials():
    env = [{"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "polaris-trino", "key": "POLARIS_CLIENT_SECRET"}}}]
    assert check(engine_reads_own_credentials, [*SITE, kube(job("starrocks", env=env))]) == [
        ("Job starrocks/setup on site-a-compute reads Secret starrocks/polaris-trino, trino's credentials, but runs as starrocks "
        "(by the fab.internal/engine label of namespace starrocks); an engine reads only its own credential Secrets "
        "(s3-starrocks, polaris-starrocks)")
    ]


def test_fails_when_a_workload_mounts_another_engines_credentials():
    mounted = job("starrocks")
    mounted["spec"]["template"]["spec"]["volumes"] = [{"name": "keys", "secret": {"secretName": "s3-trino"}}]
    assert check(engine_reads_own_credentials, [*SITE, kube(mounted)]) == [
        ("Job starrocks/setup on site-a-compute reads Secret starrocks/s3-trino, trino's credentials, but runs as starrocks "
        "(by the fab.internal/engine label of namespace starrocks); an engine reads only its own credential Secrets "
        "(s3-starrocks, polaris-starrocks)")
    ]


def test_fails_when_a_helm_release_names_another_engines_credentials_in_its_values():
    values = {"envFrom": [{"secretRef": {"name": "s3-trino"}}], "auth": {"existingSecret": "s3-starrocks"}}
    assert check(engine_reads_own_credentials, [*SITE, release("trino", values)]) == [
        ("Helm release trino/trino on site-a-compute reads Secret trino/s3-starrocks, starrocks's credentials, but runs as trino "
        "(by the fab.internal/engine label of namespace trino); an engine reads only its own credential Secrets (s3-trino, polaris-trino)")
    ]


# Two principals in one namespace: Polaris and its database's backups.

POLARIS = [
    kube(engine_namespace("polaris", "polaris"), STORAGE),
    kube(credential("s3-polaris", "polaris", "polaris"), STORAGE),
    kube(credential("s3-postgres-backup", "polaris", "postgres-backup"), STORAGE),
]


def database(engine: str) -> dict:
    """CloudNativePG's Cluster, whose backups read the keys it names."""
    return k8s("Cluster", "polaris-db", "polaris", api="postgresql.cnpg.io/v1", labels={"fab.internal/engine": engine}, spec={
        "backup": {"barmanObjectStore": {"s3Credentials": {"accessKeyId": {"name": "s3-postgres-backup", "key": "AWS_ACCESS_KEY_ID"}}}},
    })


def test_an_objects_own_engine_label_decides_over_its_namespaces():
    assert check(engine_reads_own_credentials, [*POLARIS, kube(database("postgres-backup"), STORAGE),
                                                release("polaris", {"storage": {"secret": {"name": "s3-polaris"}}}, STORAGE)]) == []


def test_fails_when_a_custom_resource_reads_credentials_of_another_engine_than_its_own_label():
    assert check(engine_reads_own_credentials, [*POLARIS, kube(database("polaris"), STORAGE)]) == [
        ("Cluster polaris/polaris-db on site-a-storage reads Secret polaris/s3-postgres-backup, postgres-backup's credentials, but "
        "runs as polaris (by its own fab.internal/engine label); an engine reads only its own credential Secrets (s3-polaris, "
        "polaris-polaris)")
    ]


def test_fails_when_a_reader_declares_no_engine():
    unlabelled = kube(engine_namespace("tools"))
    assert check(engine_reads_own_credentials, [*SITE, unlabelled, kube(job("tools", **reads("s3-trino")))]) == [
        ("Job tools/setup on site-a-compute reads Secret tools/s3-trino, trino's credentials, but neither it nor namespace tools "
        "carries a fab.internal/engine label; label it with the engine it runs as, which may read only its own credential Secrets")
    ]


def test_secrets_storage_cluster_did_not_deliver_are_not_credentials():
    own = kube(k8s("Secret", "starrocks-root", "starrocks", type="Opaque"))
    assert check(engine_reads_own_credentials, [*SITE, own, kube(job("trino", **reads("starrocks-root")))]) == []


def test_fails_closed_when_a_pod_templates_environment_sources_are_unknown():
    assert check(engine_reads_own_credentials, [*SITE, kube(job("starrocks", envFrom=UNKNOWN_ARRAY_VALUE))]) == [
        f"Job starrocks/setup on site-a-compute: .pod.containers[0].envFrom {FAILS_CLOSED}"
    ]


def test_fails_closed_when_the_namespace_of_a_credential_reader_has_unknown_labels():
    namespace = engine_namespace("starrocks")
    namespace["metadata"]["labels"] = UNKNOWN_OBJECT_VALUE
    site = [kube(namespace), *SITE[2:], kube(job("starrocks", **reads("s3-starrocks")))]
    assert check(engine_reads_own_credentials, site) == [
        (f"Job starrocks/setup on site-a-compute (reads Secret starrocks/s3-starrocks): the fab.internal/engine label of namespace "
        f"starrocks {FAILS_CLOSED}")
    ]


# Through the pack's Analyzer service, on the full small site's render.

def broken(plan: Plan, edit) -> Plan:
    resources = copy.deepcopy(plan.resources)
    edit({r["name"]: r for r in resources})
    return dataclasses.replace(plan, resources=resources)


def test_fails_when_the_starrocks_setup_job_reads_trinos_keys(full_plan):
    def edit(by_name):
        container = by_name["compute-starrocks-setup-job"]["inputs"]["spec"]["template"]["spec"]["containers"][0]
        container["envFrom"].append({"secretRef": {"name": "s3-trino"}})

    assert [(v.policy, v.level, v.message.splitlines()[-1]) for v in analyze_in_process(broken(full_plan, edit))] == [(
        "fab-engine-reads-own-credentials", "mandatory",
        ("Job starrocks/starrocks-setup on site-t-compute reads Secret starrocks/s3-trino, trino's credentials, but runs as "
        "starrocks (by the fab.internal/engine label of namespace starrocks); an engine reads only its own credential Secrets "
        "(s3-starrocks, polaris-starrocks)"),
    )]


def test_fails_when_the_polaris_release_reads_the_backup_keys(full_plan):
    def edit(by_name):
        by_name["storage-polaris"]["inputs"]["values"]["storage"]["secret"]["name"] = "s3-postgres-backup"

    assert [(v.policy, v.message.splitlines()[-1]) for v in analyze_in_process(broken(full_plan, edit))] == [(
        "fab-engine-reads-own-credentials",
        ("Helm release polaris/polaris on site-t-storage reads Secret polaris/s3-postgres-backup, postgres-backup's credentials, "
        "but runs as polaris (by the fab.internal/engine label of namespace polaris); an engine reads only its own credential "
        "Secrets (s3-polaris, polaris-polaris)"),
    )]


# fab-submitter-no-secrets and fab-submitter-no-wildcards: the RBAC of Airflow's GPU-job submitter, as TrainingPool renders
# it on each GPU cluster (a ClusterRole bound in each team namespace to the ServiceAccount fab-access/airflow-submitter).

GPU = "site-a-gpu"
JOBS = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "get", "list", "watch"]}


def submitter_rbac(*rules: dict, subject: str = "airflow-submitter") -> list:
    role = k8s("ClusterRole", "fab-airflow-submitter", api="rbac.authorization.k8s.io/v1", rules=list(rules))
    binding = k8s("RoleBinding", "airflow-submitter", "team-yield", api="rbac.authorization.k8s.io/v1",
                  roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "fab-airflow-submitter"},
                  subjects=[{"kind": "ServiceAccount", "name": subject, "namespace": "fab-access"}])
    return [kube(role, GPU, gpu=True), kube(binding, GPU, gpu=True)]


def test_a_submitter_that_manages_jobs_only_passes():
    assert check(submitter_no_secrets, submitter_rbac(JOBS)) == []
    assert check(submitter_no_wildcards, submitter_rbac(JOBS)) == []


def test_fails_when_the_submitter_may_get_secrets():
    secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    assert check(submitter_no_secrets, submitter_rbac(JOBS, secrets)) == [
        ("ClusterRole fab-airflow-submitter on site-a-gpu, bound to the submitter fab-access/airflow-submitter, lets it get "
         "Secrets (rule 1: apiGroups [''], resources ['secrets'], verbs ['get']); the submitter creates, watches and deletes jobs "
         "and never reads Secrets")
    ]


def test_fails_when_the_submitter_may_list_every_core_resource():
    everything = {"apiGroups": [""], "resources": ["*"], "verbs": ["list", "watch"]}
    assert check(submitter_no_secrets, submitter_rbac(JOBS, everything)) == [
        ("ClusterRole fab-airflow-submitter on site-a-gpu, bound to the submitter fab-access/airflow-submitter, lets it list, "
         "watch Secrets (rule 1: apiGroups [''], resources ['*'], verbs ['list', 'watch']); the submitter creates, watches and "
         "deletes jobs and never reads Secrets")
    ]


def test_a_role_that_may_create_secrets_only_does_not_read_them():
    create = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}
    assert check(submitter_no_secrets, submitter_rbac(create)) == []


def test_roles_of_other_service_accounts_are_not_the_submitters():
    secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    assert check(submitter_no_secrets, submitter_rbac(secrets, subject="multikueue")) == []


def test_the_configured_submitter_is_the_one_checked():
    secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["watch"]}
    (message,) = check(submitter_no_secrets, submitter_rbac(secrets, subject="dag-runner"), {"submitter": "fab-access/dag-runner"})
    assert message.startswith("ClusterRole fab-airflow-submitter on site-a-gpu, bound to the submitter fab-access/dag-runner, lets it watch")


def test_fails_when_the_submitter_is_bound_to_a_role_the_stack_does_not_define():
    binding = submitter_rbac(JOBS)[1]
    binding.props["roleRef"]["name"] = "edit"
    assert check(submitter_no_secrets, [binding]) == [
        ("the submitter fab-access/airflow-submitter is bound to ClusterRole edit on site-a-gpu, which the stack does not define, "
         "so its rules can't be checked; bind it only to roles the program defines")
    ]


def test_fails_when_the_submitters_role_aggregates_others():
    role, binding = submitter_rbac()
    role.props["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}]}
    assert check(submitter_no_secrets, [role, binding]) == [
        ("ClusterRole fab-airflow-submitter on site-a-gpu, bound to the submitter fab-access/airflow-submitter, aggregates other "
         "roles, whose rules can't be checked here; give it its rules directly")
    ]


def test_fails_closed_when_a_bindings_subjects_are_unknown():
    role, binding = submitter_rbac(JOBS)
    binding.props["subjects"] = UNKNOWN_ARRAY_VALUE
    assert check(submitter_no_secrets, [role, binding]) == [f"RoleBinding team-yield/airflow-submitter on site-a-gpu: .subjects {FAILS_CLOSED}"]


def test_fails_when_the_submitter_is_granted_every_verb():
    assert check(submitter_no_wildcards, submitter_rbac({**JOBS, "verbs": ["*"]})) == [
        ("ClusterRole fab-airflow-submitter on site-a-gpu, bound to the submitter fab-access/airflow-submitter, grants the "
         "wildcard verbs ['*'] in rule 0; name the API groups, resources and verbs the submitter needs")
    ]


def test_fails_when_the_submitter_is_granted_every_resource_of_a_group():
    assert check(submitter_no_wildcards, submitter_rbac({**JOBS, "resources": ["*"]})) == [
        ("ClusterRole fab-airflow-submitter on site-a-gpu, bound to the submitter fab-access/airflow-submitter, grants the "
         "wildcard resources ['*'] in rule 0; name the API groups, resources and verbs the submitter needs")
    ]


def test_fails_when_the_rendered_submitter_role_may_read_secrets(full_plan):
    def edit(by_name):
        by_name["training-gpu-train-role-airflow-submitter"]["inputs"]["rules"].append(
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]})

    assert [(v.policy, v.level, v.message.splitlines()[-1]) for v in analyze_in_process(broken(full_plan, edit))] == [(
        "fab-submitter-no-secrets", "mandatory",
        ("ClusterRole fab-airflow-submitter on site-t-gpu-train, bound to the submitter fab-access/airflow-submitter, lets it get, "
         "list Secrets (rule 4: apiGroups [''], resources ['secrets'], verbs ['get', 'list']); the submitter creates, watches and "
         "deletes jobs and never reads Secrets"),
    )]


# fab-team-namespace-own-credentials: TrainingPool's team namespaces and the training Secrets StorageCluster delivers there.

def team_namespace(team: str) -> dict:
    return k8s("Namespace", f"team-{team}", labels={"fab.internal/team": team, "fab.internal/engine": "training"})


def training_secret(name: str, namespace: str, team: str | None, engine: str = "training") -> dict:
    labels = {"fab.internal/engine": engine, **({"fab.internal/team": team} if team else {})}
    return k8s("Secret", name, namespace, labels=labels, type="Opaque")


TEAMS = [kube(team_namespace("yield"), GPU, gpu=True), kube(team_namespace("fdc"), GPU, gpu=True)]


def test_team_namespaces_holding_their_own_teams_credentials_pass():
    held = [kube(training_secret(n, f"team-{t}", t), GPU, gpu=True) for t in ("yield", "fdc") for n in ("s3-training", "polaris-training")]
    assert check(team_namespace_own_credentials, TEAMS + held) == []


def test_fails_when_a_team_namespace_holds_another_teams_credentials():
    assert check(team_namespace_own_credentials, TEAMS + [kube(training_secret("s3-training", "team-yield", "fdc"), GPU)]) == [
        ("Secret team-yield/s3-training on site-a-gpu holds team fdc's training credentials in team yield's namespace; a team "
         "namespace holds only its own team's credential Secrets (fab.internal/team=yield)")
    ]


def test_fails_when_a_team_namespace_holds_credentials_of_no_team():
    assert check(team_namespace_own_credentials, TEAMS + [kube(training_secret("s3-spark", "team-fdc", None, "spark"), GPU)]) == [
        ("Secret team-fdc/s3-spark on site-a-gpu holds no team's (no fab.internal/team label) spark credentials in team fdc's "
         "namespace; a team namespace holds only its own team's credential Secrets (fab.internal/team=fdc)")
    ]


def test_a_teams_own_secrets_that_are_not_credentials_pass():
    assert check(team_namespace_own_credentials, TEAMS + [kube(k8s("Secret", "wandb", "team-yield", type="Opaque"), GPU)]) == []


def test_namespaces_of_no_team_are_not_checked():
    assert check(team_namespace_own_credentials, [kube(training_secret("s3-training", "inference", "fdc"), GPU)]) == []


def test_fails_closed_when_a_credential_secrets_team_label_is_unknown():
    secret = training_secret("s3-training", "team-yield", "yield")
    secret["metadata"]["labels"] = {"fab.internal/engine": "training", "fab.internal/team": UNKNOWN_STRING_VALUE}
    assert check(team_namespace_own_credentials, TEAMS + [kube(secret, GPU)]) == [
        f"Secret team-yield/s3-training on site-a-gpu: .team {FAILS_CLOSED}"
    ]


def test_fails_when_a_rendered_team_namespace_holds_another_teams_keys(full_plan):
    def edit(by_name):
        by_name["storage-s3-training-gpu-train-team-yield"]["inputs"]["metadata"]["labels"]["fab.internal/team"] = "fdc"

    assert [(v.policy, v.level, v.message.splitlines()[-1]) for v in analyze_in_process(broken(full_plan, edit))] == [(
        "fab-team-namespace-own-credentials", "mandatory",
        ("Secret team-yield/s3-training on site-t-gpu-train holds team fdc's training credentials in team yield's namespace; a "
         "team namespace holds only its own team's credential Secrets (fab.internal/team=yield)"),
    )]


# fab-team-policy-own-prefixes: a training team's MinIO user (tagged with its team), its policy and their attachment.

BUCKETS = {"site-a-checkpoints": "checkpoints", "site-a-models": "models", "site-a-datasets": "datasets", "site-a-warehouse": "warehouse"}
TAGS = [resource("pulumi-python:dynamic/storage:BucketTags", {"bucket": b, "tags": {"fab.internal/class": c}}, name=f"tags-{b}")
        for b, c in BUCKETS.items()]


def team_minio(team: str, document: dict, tags: dict | None = None) -> list:
    name = f"fab-training-{team}"
    return [
        resource("minio:index/iamUser:IamUser", {"name": name, "tags": tags or {"fab.internal/team": team}}, name=f"{name}-user"),
        resource("minio:index/iamPolicy:IamPolicy", {"name": name, "policy": json.dumps(document)}, name=f"{name}-policy"),
        resource("minio:index/iamUserPolicyAttachment:IamUserPolicyAttachment", {"userName": name, "policyName": name},
                 name=f"{name}-attachment"),
    ]


def allow(actions: list[str], *arns: str, **condition: object) -> dict:
    statement = {"Effect": "Allow", "Action": actions, "Resource": list(arns)}
    return {**statement, **({"Condition": condition} if condition else {})}


def document(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


OWN_LIST = allow(["s3:ListBucket"], "arn:aws:s3:::site-a-checkpoints", "arn:aws:s3:::site-a-models", StringLike={"s3:prefix": ["yield/*"]})
OWN_OBJECTS = allow(["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], "arn:aws:s3:::site-a-checkpoints/yield/*",
                    "arn:aws:s3:::site-a-models/yield/*")
READ_DATA = allow(["s3:GetObject"], "arn:aws:s3:::site-a-datasets/*", "arn:aws:s3:::site-a-warehouse/*")


def test_the_programs_team_policy_passes():
    program = team_policy_document("yield", ["site-a-datasets", "site-a-warehouse"], ["site-a-checkpoints", "site-a-models"])
    assert check(team_policy_own_prefixes, TAGS + team_minio("yield", program)) == []


def test_fails_when_a_team_may_write_the_whole_checkpoint_bucket():
    whole = allow(["s3:PutObject"], "arn:aws:s3:::site-a-checkpoints/*")
    assert check(team_policy_own_prefixes, TAGS + team_minio("yield", document(OWN_LIST, whole))) == [
        ("MinIO policy fab-training-yield of team yield's user fab-training-yield grants s3:PutObject on "
         "arn:aws:s3:::site-a-checkpoints/*, outside the team's prefix yield/ of site-a-checkpoints; a team reaches the "
         "checkpoint and model buckets only under its own prefix")
    ]


FDC = team_minio("fdc", document())
"""Another team of the site: its prefix is no path every team may read."""


def test_fails_when_a_team_may_read_another_teams_models():
    other = allow(["s3:GetObject"], "arn:aws:s3:::site-a-models/fdc/*")
    assert check(team_policy_own_prefixes, TAGS + FDC + team_minio("yield", document(OWN_OBJECTS, other))) == [
        ("MinIO policy fab-training-yield of team yield's user fab-training-yield grants s3:GetObject on "
         "arn:aws:s3:::site-a-models/fdc/*, outside the team's prefix yield/ of site-a-models; a team reaches the checkpoint and "
         "model buckets only under its own prefix")
    ]


def test_the_programs_team_policy_with_the_served_weights_passes():
    program = team_policy_document("yield", ["site-a-datasets"], ["site-a-checkpoints", "site-a-models"],
                                   ("site-a-models/qwen/qwen3-8b/",))
    assert check(team_policy_own_prefixes, TAGS + FDC + team_minio("yield", program)) == []


def test_fails_when_a_team_may_write_the_served_weights():
    write = allow(["s3:PutObject"], "arn:aws:s3:::site-a-models/qwen/qwen3-8b/*")
    assert check(team_policy_own_prefixes, TAGS + team_minio("yield", document(write))) == [
        ("MinIO policy fab-training-yield of team yield's user fab-training-yield grants s3:PutObject on "
         "arn:aws:s3:::site-a-models/qwen/qwen3-8b/*, outside the team's prefix yield/ of site-a-models; a team reaches the "
         "checkpoint and model buckets only under its own prefix")
    ]


def test_fails_when_a_team_may_read_the_whole_model_bucket():
    whole = allow(["s3:GetObject"], "arn:aws:s3:::site-a-models/*")
    (message,) = check(team_policy_own_prefixes, TAGS + team_minio("yield", document(whole)))
    assert "grants s3:GetObject on arn:aws:s3:::site-a-models/*, outside the team's prefix yield/" in message


def test_fails_when_a_team_may_read_checkpoints_outside_its_prefix():
    shared = allow(["s3:GetObject"], "arn:aws:s3:::site-a-checkpoints/qwen/qwen3-8b/*")
    (message,) = check(team_policy_own_prefixes, TAGS + team_minio("yield", document(shared)))
    assert "grants s3:GetObject on arn:aws:s3:::site-a-checkpoints/qwen/qwen3-8b/*, outside the team's prefix yield/" in message


def test_fails_when_a_teams_prefix_is_not_closed_by_a_slash():
    # `yield*` also reaches a team `yieldx`.
    loose = allow(["s3:PutObject"], "arn:aws:s3:::site-a-checkpoints/yield*")
    (message,) = check(team_policy_own_prefixes, TAGS + team_minio("yield", document(loose)))
    assert "grants s3:PutObject on arn:aws:s3:::site-a-checkpoints/yield*, outside the team's prefix yield/" in message


def test_fails_when_a_team_may_list_a_checkpoint_bucket_without_confining_the_prefix():
    listing = allow(["s3:ListBucket"], "arn:aws:s3:::site-a-checkpoints")
    assert check(team_policy_own_prefixes, TAGS + team_minio("yield", document(listing, OWN_OBJECTS))) == [
        ("MinIO policy fab-training-yield of team yield's user fab-training-yield grants s3:ListBucket on bucket "
         "site-a-checkpoints beyond the team's prefix (only s3:ListBucket with s3:prefix under yield/); a team reaches the "
         "checkpoint and model buckets only under its own prefix")
    ]


def test_fails_when_a_team_may_list_another_teams_prefix():
    listing = allow(["s3:ListBucket"], "arn:aws:s3:::site-a-models", StringLike={"s3:prefix": ["yield/*", "fdc/*"]})
    (message,) = check(team_policy_own_prefixes, TAGS + FDC + team_minio("yield", document(listing)))
    assert message.startswith("MinIO policy fab-training-yield of team yield's user fab-training-yield grants s3:ListBucket on "
                              "bucket site-a-models beyond the team's prefix")


def test_fails_when_a_wildcard_bucket_reaches_the_checkpoint_bucket():
    wildcard = allow(["s3:GetObject"], "arn:aws:s3:::site-a-*/*")
    (message,) = check(team_policy_own_prefixes, TAGS + team_minio("yield", document(wildcard)))
    assert message.startswith("MinIO policy fab-training-yield of team yield's user fab-training-yield grants s3:GetObject on "
                              "arn:aws:s3:::site-a-*/*, outside the team's prefix yield/ of site-a-checkpoints, site-a-models;")


def test_fails_when_a_team_may_write_training_data():
    write = allow(["s3:PutObject"], "arn:aws:s3:::site-a-datasets/*")
    assert check(team_policy_own_prefixes, TAGS + team_minio("yield", document(READ_DATA, write))) == [
        ("MinIO policy fab-training-yield of team yield's user fab-training-yield grants s3:PutObject on "
         "arn:aws:s3:::site-a-datasets/*; a team writes only under its own prefix of the checkpoint and model buckets")
    ]


def test_policies_of_users_of_no_team_are_not_checked():
    engine = allow(["s3:PutObject"], "arn:aws:s3:::site-a-checkpoints/*")
    assert check(team_policy_own_prefixes, TAGS + team_minio("yield", document(engine), tags={"fab.internal/engine": "spark"})) == []


def test_fails_closed_when_an_attachments_user_is_unknown():
    user, policy, attachment = team_minio("yield", document(OWN_OBJECTS))
    attachment.props["userName"] = UNKNOWN_STRING_VALUE
    assert check(team_policy_own_prefixes, TAGS + [user, policy, attachment]) == [
        f"MinIO policy attachment fab-training-yield-attachment: .userName {FAILS_CLOSED}"
    ]


def test_fails_when_a_rendered_teams_policy_reaches_the_whole_checkpoint_bucket(full_plan):
    def edit(by_name):
        policy = by_name["storage-training-yield-policy"]["inputs"]
        document = json.loads(policy["policy"])
        (objects,) = [s for s in document["Statement"] if s.get("Sid") == "TeamObjects"]
        objects["Resource"] = ["arn:aws:s3:::site-t-checkpoints/*", "arn:aws:s3:::site-t-models/yield/*"]
        policy["policy"] = json.dumps(document)

    assert [(v.policy, v.level, v.message.splitlines()[-1]) for v in analyze_in_process(broken(full_plan, edit))] == [(
        "fab-team-policy-own-prefixes", "mandatory",
        ("MinIO policy fab-training-yield of team yield's user fab-training-yield grants s3:GetObject, s3:GetObjectVersion, "
         "s3:PutObject, s3:DeleteObject, s3:AbortMultipartUpload, s3:ListMultipartUploadParts on arn:aws:s3:::site-t-checkpoints/*, "
         "outside the team's prefix yield/ of site-t-checkpoints; a team reaches the checkpoint and model buckets only under its "
         "own prefix"),
    )]
