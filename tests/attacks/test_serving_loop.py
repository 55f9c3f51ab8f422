"""Attacks from a team member's seat on the serving-loop DAG (issue 37, path 2), against both stacks' rendered Airflow.

The attacker is a member of one team's Keycloak group (site-a: team-wafermap, site-b: team-yield) signed in to Airflow,
who may trigger runs with any conf. What the render gives Airflow is what is attacked: the ConfigMap `platform-dags`
(the DAG file and its `platform.json`) loaded by Airflow's own DagBag, the training-submission contract, and the API
server's config (the chart's `apiServerConfig`: the Keycloak groups mapped to roles, the team roles' permissions).

Who may trigger a DAG is the FAB auth manager's rule for a new run (apache-airflow-providers-fab 3.10.2,
FabAuthManager.is_authorized_dag with DagAccessEntity.RUN): `can_create` on "DAG Runs" (or "DAG Run:<dag>") and
`can_edit` on "DAGs" (or "DAG:<dag>"), the per-DAG permissions coming from the DAG's `access_control`. The roles'
permissions besides those are the rendered config's (a team role's, from its `sync_roles`) or the provider's built-in
roles for Admin, User and Viewer, as far as these resources go.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

from airflow_dagbag import airflow_dagbag, needs_airflow

from components.constants import TRAINING_SUBMISSION_CONFIG_MAP

ATTACKER = {"site-a": ("wafermap", "yield"), "site-b": ("yield", "fdc")}
"""Per stack: the attacker's team (one with a serving loop) and the victim team whose namespace and keys it wants."""

VIEWER = [("can_read", "DAGs"), ("can_read", "DAG Runs"), ("can_read", "Task Instances"), ("can_read", "Task Logs")]
USER = [("can_edit", "DAGs"), ("can_delete", "DAGs"), ("can_create", "DAG Runs"), ("can_edit", "Task Instances"),
        ("can_create", "Assets")]
BUILT_IN = {"Viewer": VIEWER, "User": VIEWER + USER, "Public": []}
"""The provider's built-in roles, as far as DAGs, their runs and task instances go (security_manager/override.py)."""


def _config_map(plan, name: str) -> dict[str, str]:
    (found,) = [c for c in plan.objects("ConfigMap", f"{plan.stack}-compute")
                if c["metadata"]["name"] == name and c["metadata"]["namespace"] == "airflow"]
    return found["data"]


class _Fab:
    VIEWER_PERMISSIONS, USER_PERMISSIONS = VIEWER, USER

    def __init__(self):
        self.roles: dict[str, list] = {}

    def sync_roles(self):
        pass

    def bulk_sync_roles(self, roles):
        self.roles.update({r["role"]: r["perms"] for r in roles})


def api_server(plan, monkeypatch) -> dict[str, Any]:
    """The rendered API server config, executed as the API server does (the provider's module stubbed): its role
    mapping, registration role, the team roles it syncs and the role keys it derives from a token's groups."""
    manager = types.ModuleType("flask_appbuilder.security.manager")
    manager.AUTH_OAUTH = 4
    override = types.ModuleType("airflow.providers.fab.auth_manager.security_manager.override")
    override.FabAirflowSecurityManagerOverride = _Fab
    jwt = types.ModuleType("jwt")
    for name, module in {"flask_appbuilder.security.manager": manager, "jwt": jwt, override.__name__: override}.items():
        monkeypatch.setitem(sys.modules, name, module)
    for key in ("OIDC_ISSUER", "OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET"):
        monkeypatch.setenv(key, "https://kc.example/realms/fab")
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "airflow"]
    config: dict[str, Any] = {}
    exec(compile(release["inputs"]["values"]["apiServer"]["apiServerConfig"], "webserver_config.py", "exec"), config)
    security = config["SECURITY_MANAGER_CLASS"]()
    if hasattr(security, "roles"):
        security.sync_roles()
    config["team_roles"] = getattr(security, "roles", {})

    def role_keys(groups: list[str]) -> list[str]:
        jwt.PyJWKClient = lambda url: types.SimpleNamespace(get_signing_key_from_jwt=lambda t: types.SimpleNamespace(key="k"))
        jwt.decode = lambda *a, **k: {"preferred_username": "attacker", "groups": groups}
        return security.get_oauth_user_info("keycloak", {"access_token": "t"})["role_keys"]

    config["role_keys"] = role_keys
    return config


def may_trigger(config: dict[str, Any], dags: dict[str, Any], groups: list[str]) -> list[str]:
    """The DAGs a user of these Keycloak groups may start a run of (FabAuthManager's rule for a new run)."""
    mapping = config["AUTH_ROLES_MAPPING"]
    roles = {role for key in config["role_keys"](groups) for role in mapping.get(key, [])} | {config["AUTH_USER_REGISTRATION_ROLE"]}
    if "Admin" in roles:
        return sorted(dags)
    held = {p for role in roles for p in (config["team_roles"].get(role) or BUILT_IN.get(role, []))}
    allowed = []
    for dag_id, dag in dags.items():
        for role in roles:
            for resource, actions in dag["access_control"].get(role, {}).items():
                held |= {(action, f"{'DAG' if resource == 'DAGs' else 'DAG Run'}:{dag_id}") for action in actions}
        if ({("can_create", "DAG Runs"), ("can_create", f"DAG Run:{dag_id}")} & held
                and {("can_edit", "DAGs"), ("can_edit", f"DAG:{dag_id}")} & held):
            allowed.append(dag_id)
    return sorted(allowed)


_LOADED: dict[str, dict[str, Any]] = {}


def attack(plan, monkeypatch, tmp_path_factory) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The attacker's stack: Airflow's DagBag on the rendered DAGs with the attacker's runs of every DAG the attacker may
    trigger, the API server's config, and those DAGs."""
    config = api_server(plan, monkeypatch)
    own, victim = ATTACKER[plan.stack]
    if plan.stack not in _LOADED:
        files = _config_map(plan, "platform-dags")
        submission = json.loads(_config_map(plan, TRAINING_SUBMISSION_CONFIG_MAP)["submission.json"])
        first = airflow_dagbag(tmp_path_factory.mktemp(f"{plan.stack}-dags"), files, submission)
        targets = may_trigger(config, first["dags"], [f"team-{own}"])
        platform = json.loads(files["platform.json"])
        loop = (platform.get("serving_loop") or {}).get(own, {})
        # A run as the DAG's own params allow it (new: the team's features and a listed image; old: table and SQL).
        valid = {"model": "wafer-llm", "code_revision": "4f2c9e1", "table": f"{own}.features", "feature_sql": "SELECT 1",
                 "spark_image": "apache/spark:3.5.7", "features": next(iter(loop.get("features", {})), "none"),
                 "training_image": f"{next(iter(loop.get('training_images', [])), 'registry/x')}:1.0.0"}
        attacks = {
            "other-team": {"team": victim},
            "own-training-image": {"training_image": "docker.io/attacker/train:1"},
            "own-spark-job": {"spark_image": "docker.io/attacker/spark:1", "feature_job": "s3a://attacker/job.py", "feature_sql": ""},
        }
        runs = {f"{name}@{dag_id}": (dag_id, {**{k: v for k, v in valid.items() if k in first["dags"][dag_id]["params"]}, **change})
                for dag_id in targets for name, change in attacks.items()}
        _LOADED[plan.stack] = airflow_dagbag(tmp_path_factory.mktemp(f"{plan.stack}-runs"), files, submission, runs)
    loaded = _LOADED[plan.stack]
    return loaded, config, may_trigger(config, loaded["dags"], [f"team-{own}"])


def _refusals(loaded: dict[str, Any], targets: list[str], name: str) -> dict[str, Any]:
    return {dag_id: loaded["runs"][f"{name}@{dag_id}"].get("refused", loaded["runs"][f"{name}@{dag_id}"])
            for dag_id in targets}


@needs_airflow
def test_a_team_member_cannot_trigger_another_teams_loop(plan, monkeypatch, tmp_path_factory):
    loaded, config, targets = attack(plan, monkeypatch, tmp_path_factory)
    own, victim = ATTACKER[plan.stack]
    assert targets == [f"serving_loop_{own}"]
    assert may_trigger(config, loaded["dags"], [f"team-{victim}"]) == sorted(
        d for d in loaded["dags"] if d == f"serving_loop_{victim}")


@needs_airflow
def test_a_team_member_cannot_name_another_team(plan, monkeypatch, tmp_path_factory):
    loaded, _, targets = attack(plan, monkeypatch, tmp_path_factory)
    own, victim = ATTACKER[plan.stack]
    assert _refusals(loaded, targets, "other-team") == {d: (
        f"serving_loop_{own} runs for team {own} only: a run may not name team '{victim}' (its members trigger "
        f"serving_loop_{victim})") for d in targets}


@needs_airflow
def test_a_team_member_cannot_pick_its_own_training_image(plan, monkeypatch, tmp_path_factory):
    loaded, _, targets = attack(plan, monkeypatch, tmp_path_factory)
    own, _ = ATTACKER[plan.stack]
    platform = json.loads(_config_map(plan, "platform-dags")["platform.json"])
    repositories = (platform.get("serving_loop") or {}).get(own, {}).get("training_images", [])
    assert _refusals(loaded, targets, "own-training-image") == {d: (
        f"training_image 'docker.io/attacker/train:1' is not an image of team {own}'s training repositories "
        f"({', '.join(repositories)}; teams.{own}.serving_loop.training_images): name one of them with a tag or a digest")
        for d in targets}


@needs_airflow
def test_a_team_member_cannot_run_its_own_spark_image_or_job_as_the_spark_engine(plan, monkeypatch, tmp_path_factory):
    loaded, _, targets = attack(plan, monkeypatch, tmp_path_factory)
    own, _ = ATTACKER[plan.stack]
    assert _refusals(loaded, targets, "own-spark-job") == {d: (
        "a run may not choose feature_job, spark_image: the feature step runs the platform's Spark image and feature job as "
        f"the Spark engine, with the features of teams.{own}.serving_loop.features (name one as `features`)") for d in targets}


@needs_airflow
def test_the_spark_application_of_a_loop_takes_nothing_from_a_run(plan, monkeypatch, tmp_path_factory):
    """Whatever a run's conf holds, the feature step's SparkApplication (the Spark engine's credentials) is the platform's."""
    loaded, _, targets = attack(plan, monkeypatch, tmp_path_factory)
    platform = json.loads(_config_map(plan, "platform-dags")["platform.json"])
    specs = {d: loaded["dags"][d]["feature_spec"]["spec"] for d in targets}
    assert {d: ("params" in json.dumps(s), s["image"], s["mainApplicationFile"]) for d, s in specs.items()} == {
        d: (False, platform["spark"]["image"], "local:///opt/fab/feature_job.py") for d in targets}


def test_no_one_signs_in_to_airflow_with_the_charts_default_admin(plan):
    """The chart creates `admin`/`admin` with the Admin role unless told not to, and Airflow 3's `/auth/token` trades a
    database user's password for an API token whatever the UI's sign-in: from the compute ingress, anyone would be
    Admin. No such account is created; every user comes from Keycloak."""
    (airflow,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "airflow"]
    assert airflow["inputs"]["values"]["createUserJob"]["defaultUser"] == {"enabled": False}
