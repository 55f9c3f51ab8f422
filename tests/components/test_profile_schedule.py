"""Profiles switched on a schedule (components/profiles.py): what a switch applies equals what `pulumi up` registers
under that profile, exactly the differing objects are switched and left alone by Pulumi, and the switches are confined
to them; the config refuses schedules that cannot be automated safely."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from helpers import config_errors, render_small
from schemas import CrdSchemas, schema_errors
from small_site import add_profile_schedule, small_site

from components import versions
from components.profiles import PROFILE_ANNOTATION, RECORD, SWITCH_ACCOUNT, SWITCH_NAMESPACE

DAY, NIGHT = "day", "night"
QUEUE = "kueue.x-k8s.io/v1beta2:ClusterQueue"
DEPLOYMENT = "apps/v1:Deployment"


def scheduled_site(**grow: Any) -> dict[str, Any]:
    """The smallest site (grown as `small_site` is) with day and night switched on a schedule."""
    site = small_site(**grow)
    add_profile_schedule(site)
    return site


def unscheduled(site: dict[str, Any], active: str) -> dict[str, Any]:
    """The same site switched by hand: no schedule, `active` in force."""
    site = copy.deepcopy(site)
    del site["profile_schedule"]
    site["active_profile"] = active
    return site


def applied(plan, cluster: str, profile: str) -> list[dict[str, Any]]:
    """What the switch to `profile` applies on `cluster` (its ConfigMap's objects)."""
    (content,) = [obj for c, obj, _ in plan.manifests()
                  if c == cluster and obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == f"fab-profile-{profile}"]
    return list(yaml.safe_load_all(content["data"]["objects.yaml"]))


def registered(plan, cluster: str, kind: str, name: str) -> dict[str, Any]:
    (obj,) = [obj for c, obj, _ in plan.manifests() if c == cluster and obj["kind"] == kind and obj["metadata"]["name"] == name]
    return obj


def key(record: dict[str, Any]) -> tuple[str, str, str]:
    return record["provider"].rsplit("::", 1)[-1], record["type"].split(":", 1)[1], record["inputs"]["metadata"]["name"]


@pytest.mark.parametrize("profile", [DAY, NIGHT])
def test_a_switch_applies_what_pulumi_registers_under_its_profile(profile):
    switches = render_small(scheduled_site())
    by_hand = render_small(unscheduled(scheduled_site(), profile))
    objects = applied(switches, "site-t-gpu", profile)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [("ClusterQueue", "team-yield"), ("Deployment", "vllm-qwen3-8b")]
    queue, deployment = objects
    assert queue["spec"] == {"resourceGroups": registered(by_hand, "site-t-gpu", "ClusterQueue", "team-yield")["spec"]["resourceGroups"]}
    assert deployment["spec"] == {"replicas": registered(by_hand, "site-t-gpu", "Deployment", "vllm-qwen3-8b")["spec"]["replicas"]}
    assert {o["metadata"]["annotations"][PROFILE_ANNOTATION] for o in objects} == {profile}


def test_the_switches_change_exactly_what_switching_by_hand_changes():
    day = render_small(unscheduled(scheduled_site(), DAY)).by_urn
    night = render_small(unscheduled(scheduled_site(), NIGHT)).by_urn
    changed = {key(day[u]) for u in day if day[u]["inputs"] != night[u]["inputs"]}
    switched = {(f"site-t-{c}", f"{o['apiVersion']}:{o['kind']}", o["metadata"]["name"])
                for c in ("gpu",) for o in applied(render_small(scheduled_site()), f"site-t-{c}", NIGHT)}
    assert changed
    assert changed == switched == {("site-t-gpu", QUEUE, "team-yield"), ("site-t-gpu", DEPLOYMENT, "vllm-qwen3-8b")}


def test_pulumi_leaves_the_switched_fields_alone():
    ignored = {key(r): r["ignore_changes"] for r in render_small(scheduled_site()).resources
               if r["ignore_changes"] and r["type"].split(":", 1)[1] in (QUEUE, DEPLOYMENT)}
    assert ignored == {("site-t-gpu", QUEUE, "team-yield"): ["spec.resourceGroups"],
                       ("site-t-gpu", DEPLOYMENT, "vllm-qwen3-8b"): ["spec.replicas"]}


def test_without_a_schedule_pulumi_owns_every_field_and_runs_no_switch():
    plan = render_small(unscheduled(scheduled_site(), NIGHT))
    assert not [r["name"] for r in plan.resources if "ProfileSwitches" in r["urn"]]
    assert not [r["name"] for r in plan.resources if r["type"].split(":", 1)[1] in (QUEUE, DEPLOYMENT) and r["ignore_changes"]]


def test_a_queue_whose_quota_no_profile_changes_is_not_switched():
    site = scheduled_site(teams=("yield", "fdc"))
    site["training"]["quotas"]["fdc"] = {"gpu": {"gpus": 0}}
    objects = applied(render_small(site), "site-t-gpu", NIGHT)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [("ClusterQueue", "team-yield"), ("Deployment", "vllm-qwen3-8b")]


def test_the_multikueue_manager_switches_its_summed_quotas_too():
    site = scheduled_site(multikueue=True)
    plan = render_small(site)
    manager = applied(plan, "site-t-compute", NIGHT)
    by_hand = render_small(unscheduled(site, NIGHT))
    assert [(o["kind"], o["metadata"]["name"]) for o in manager] == [("ClusterQueue", "team-yield")]
    assert manager[0]["spec"]["resourceGroups"] == registered(by_hand, "site-t-compute", "ClusterQueue", "team-yield")["spec"]["resourceGroups"]
    assert {c for c, obj, _ in plan.manifests() if obj["kind"] == "CronJob" and obj["metadata"]["namespace"] == SWITCH_NAMESPACE} == {
        "site-t-compute", "site-t-gpu"}


def test_a_switch_may_get_and_patch_only_the_switched_objects():
    plan = render_small(scheduled_site())
    roles = {(obj["kind"], obj["metadata"].get("namespace")): obj["rules"] for c, obj, _ in plan.manifests()
             if c == "site-t-gpu" and obj["kind"] in ("Role", "ClusterRole") and obj["metadata"]["name"] == SWITCH_ACCOUNT}
    assert roles == {
        ("ClusterRole", None): [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "resourceNames": ["team-yield"],
                                 "verbs": ["get", "patch"]}],
        ("Role", "inference"): [{"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["vllm-qwen3-8b"],
                                 "verbs": ["get", "patch"]}],
        ("Role", SWITCH_NAMESPACE): [
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [RECORD], "verbs": ["get", "patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        ],
    }


def test_a_switch_runs_the_pinned_kubectl_unprivileged_with_a_short_lived_token():
    plan = render_small(scheduled_site())
    (job,) = [obj for c, obj, _ in plan.manifests() if obj["kind"] == "CronJob" and obj["metadata"]["name"] == "fab-profile-night"]
    assert (job["spec"]["schedule"], job["spec"]["timeZone"], job["spec"]["suspend"]) == ("0 19 * * *", "Europe/Berlin", False)
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == versions.KUBECTL_IMAGE
    assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == (SWITCH_ACCOUNT, False)
    assert container["securityContext"]["runAsNonRoot"] and container["securityContext"]["readOnlyRootFilesystem"]
    token = next(v for v in pod["volumes"] if v["name"] == "token")["projected"]["sources"][0]["serviceAccountToken"]
    assert token == {"path": "token", "expirationSeconds": 600}
    assert "--field-manager=\"$FIELD_MANAGER\"" in container["command"][2]
    assert {e["name"]: e.get("value") for e in container["env"]}["FIELD_MANAGER"] == SWITCH_ACCOUNT


def test_the_record_starts_with_the_active_profile_and_is_the_switches_afterwards():
    plan = render_small(scheduled_site())
    (record,) = [r for r in plan.resources if r["type"].endswith(":ConfigMap") and r["inputs"]["metadata"]["name"] == RECORD]
    assert (record["inputs"]["data"]["profile"], record["ignore_changes"]) == (DAY, ["data"])


def test_every_switch_object_validates_strictly(crd_dir):
    crds = CrdSchemas(crd_dir)
    plan = render_small(scheduled_site())
    ours = [obj for _, obj, r in plan.manifests() if "ProfileSwitches" in r["urn"]]
    assert ours
    assert {obj["metadata"]["name"]: schema_errors(obj, crds) for obj in ours if schema_errors(obj, crds)} == {}
    for profile in (DAY, NIGHT):
        queue, deployment = applied(plan, "site-t-gpu", profile)
        assert schema_errors(queue, crds) == []
        # A Deployment is applied partially: what the API server validates is the object with the switch's fields merged in.
        live = copy.deepcopy(registered(plan, "site-t-gpu", "Deployment", "vllm-qwen3-8b"))
        live["spec"].update(deployment["spec"])
        live["metadata"].setdefault("annotations", {}).update(deployment["metadata"]["annotations"])
        assert schema_errors(live, crds) == []


# The config ------------------------------------------------------------------------------------------------------

def test_a_scheduled_site_is_accepted():
    from components.config import parse_site

    assert parse_site(scheduled_site()).profile_schedule.switches == {DAY: "0 7 * * 1-5", NIGHT: "0 19 * * *"}


def test_fails_when_a_switch_time_is_not_a_cron_schedule():
    site = scheduled_site()
    site["profile_schedule"]["switches"][NIGHT] = "0 24 * * *"
    assert config_errors(site) == [(
        "fab-platform:site.profile_schedule.switches.night: is not a cron schedule: its hour field '24': 24 is outside 0-23; "
        "write five fields, minute hour day-of-month month day-of-week, such as '0 19 * * 1-5' (got '0 24 * * *')"
    )]


def test_fails_when_a_switch_time_has_four_fields():
    site = scheduled_site()
    site["profile_schedule"]["switches"][NIGHT] = "0 19 * *"
    assert config_errors(site) == [(
        "fab-platform:site.profile_schedule.switches.night: has 4 fields; a cron schedule has five fields, minute hour "
        "day-of-month month day-of-week, such as '0 19 * * 1-5', or is one of @yearly, @annually, @monthly, @weekly, @daily, "
        "@midnight, @hourly (got '0 19 * *')"
    )]


def test_fails_when_the_timezone_is_unknown():
    site = scheduled_site()
    site["profile_schedule"]["timezone"] = "Europe/Atlantis"
    assert config_errors(site) == [(
        "fab-platform:site.profile_schedule.timezone: is not a time zone of the IANA database; use an IANA time zone such as "
        "Europe/Berlin or UTC (got 'Europe/Atlantis')"
    )]


def test_fails_when_a_switch_names_an_unknown_profile():
    site = scheduled_site()
    site["profile_schedule"]["switches"]["weekend"] = "0 0 * * 6"
    assert config_errors(site) == ["fab-platform:site.profile_schedule.switches.weekend: 'weekend' is not a profile; profiles: day, night"]


def test_fails_when_a_schedule_has_one_profile():
    site = scheduled_site()
    del site["profile_schedule"]["switches"][DAY]
    assert config_errors(site) == [(
        "fab-platform:site.profile_schedule.switches: switches to night only; a schedule switches between at least two "
        "profiles: add the one it switches back to"
    )]


def test_fails_when_a_scheduled_profile_moves_nodes():
    site = scheduled_site()
    site["gpu"]["gpu"]["nodes"]["gpu-inf-2"] = {"gpu_type": "h100", "gpus": 8, "pool": "inference"}
    site["profiles"][NIGHT]["node_pools"] = {"gpu": {"gpu-inf-2": "training"}}
    assert config_errors(site) == [(
        "fab-platform:site.profile_schedule.switches.night: profile night moves gpu/gpu-inf-2 (inference -> training) against "
        "the active profile day; a scheduled switch never moves nodes: node-feature-discovery re-taints a node without "
        "draining it, so the pods on it keep its GPUs while the other pool counts them (docs/operations.md, \"Scheduled "
        "switching\"): leave node_pools out of scheduled profiles and move nodes by hand"
    )]


def test_fails_when_profiles_change_replicas_under_argocd_delivery():
    site = scheduled_site()
    site["inference"]["delivery"] = "argocd"
    site["compute"]["argocd"] = {"enabled": True, "serving_repo": {"url": "https://git.site-t.fab.internal/serving.git"}}
    assert config_errors(site) == [(
        "fab-platform:site.profile_schedule.switches.night: profile night serves qwen3-8b with 1 replica against 2 under "
        "the active profile day, but inference.delivery is argocd: the Deployments are the serving repository's, which "
        "Argo CD keeps as committed, so a switch changes queues only; change replicas by a commit there, or leave replicas "
        "out of scheduled profiles"
    )]


def test_fails_when_the_scheduled_profiles_change_nothing():
    site = scheduled_site()
    site["profiles"][NIGHT] = {"description": "the same"}
    assert config_errors(site) == [(
        "fab-platform:site.profile_schedule: profiles day, night set the same queue quotas and replicas as the active profile "
        "day: there is nothing to switch; remove profile_schedule"
    )]


@pytest.mark.parametrize("multikueue", [False, True])
def test_the_deploy_check_finds_nothing_on_a_scheduled_site(chart_dir, helm, multikueue):
    """Order (the roles in the serving namespace wait for it), references and scheduling of the switches."""
    from check_helpers import deploy_of

    assert deploy_of(scheduled_site(multikueue=multikueue), chart_dir, helm).lines() == []
