"""ProfileSwitches: day/night profiles switched on a schedule inside the clusters (DESIGN section 2, inference and
training pools; the design's "first manual, then CronJob or Argo CD"; docs/operations.md, "Scheduled switching").

A switch changes what `pulumi up` with that `active_profile` would change, and nothing else: the teams' ClusterQueue
quotas (`resourceGroups`) on every Kueue cluster and, where Pulumi delivers serving, the vLLM Deployments' replicas.
Only the objects whose fields differ between the scheduled profiles and the active one are switched; each is
rendered here by the same code the components register it with (TrainingPool's queue builders, the site's
`team_quotas` and `model_capacity` under the profile). On each cluster with such objects, a CronJob per profile
applies them server-side from a ConfigMap, as a ServiceAccount that may get and patch exactly those objects by name
and nothing else, and records the switch: the ConfigMap `fab-profile` (profile, when, which Job) and an Event on it.
While a schedule is set, the switched fields carry `ignore_changes`, so that `pulumi up` leaves them where the last
switch put them. Nodes never move on a schedule (a config check refuses it): node-feature-discovery re-taints a node
without draining it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions, yamltext
from components.config import AdoptConfig, ProfileSchedule, SiteConfig, names
from components.gpu import INFERENCE_NAMESPACE, gpu_types
from components.kube import (
    WORKLOAD_SKIPS,
    Adoption,
    checkov_skips,
    namespace,
    restricted_container,
    restricted_pod_security_context,
)
from components.kueue import queue_flavors, queue_resource_groups, team_namespace
from components.providers import ClusterRef
from components.registry import UPSTREAM, Registry

SWITCH_NAMESPACE = "fab-profile"
"""Where the switches run and record themselves, on every cluster that has switched objects."""
SWITCH_ACCOUNT = "fab-profile-switch"
"""The switches' ServiceAccount, and the field manager of what they apply (never `kubectl`, whose fields Pulumi takes over)."""
RECORD = "fab-profile"
"""The ConfigMap holding the last switch: profile, when, by which Job."""
PROFILE_ANNOTATION = "fab.internal/profile"
"""On every switched object: the profile whose values it holds, set by the switch."""
OBJECTS_KEY = "objects.yaml"
KUBECTL_USER = 65532
STARTING_DEADLINE_SEC = 3600
"""A switch missed (controller down, cluster upgrade) still runs within the hour; later, the next one in the schedule does."""
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"

CLUSTER_QUEUE = ("kueue.x-k8s.io", "clusterqueues")
DEPLOYMENT = ("apps", "deployments")


@dataclass(frozen=True)
class SwitchedObject:
    """An object a switch changes, with its values under each scheduled profile."""

    api_version: str
    kind: str
    name: str
    namespace: str | None
    """None for a cluster-scoped object (a ClusterQueue)."""
    field: str
    """The field the switch owns, as `ignore_changes` names it (`spec.resourceGroups`, `spec.replicas`)."""
    resource: tuple[str, str]
    """Its API group and resource, as RBAC names them."""
    values: dict[str, Any]
    """Profile -> the field's value under it (every scheduled profile)."""

    def manifest(self, profile: str) -> dict[str, Any]:
        """What the switch to `profile` applies: the object's identity, the profile annotation and the field."""
        metadata: dict[str, Any] = {"name": self.name, **({"namespace": self.namespace} if self.namespace else {}),
                                    "annotations": {PROFILE_ANNOTATION: profile}}
        head, _, last = self.field.rpartition(".")
        body: dict[str, Any] = {last: self.values[profile]}
        for part in reversed(head.split(".") if head else []):
            body = {part: body}
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": metadata, **body}

    @property
    def where(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


def profile_fields(site: SiteConfig, profile: str | None) -> dict[str, dict[tuple[str, str | None, str], tuple[SwitchedObject, Any]]]:
    """Cluster -> (kind, namespace, name) -> the object and its profile-dependent field's value under `profile`: every
    team's ClusterQueue on every Kueue cluster and, where Pulumi delivers serving, every vLLM Deployment's replicas.

    Peers' teams (`federation.peers.<peer>.remote_training`) are left out: profiles do not change their queues.
    """
    out: dict[str, dict[tuple[str, str | None, str], tuple[SwitchedObject, Any]]] = {}
    mk = site.training.multikueue
    manager = site.multikueue_manager() if mk.enabled else None
    types = {key: gpu_types(spec) for key, spec in site.gpu.items()}
    quotas = site.team_quotas(profile)
    for cluster in sorted({*site.gpu, *([manager] if manager else [])}):
        flavors = queue_flavors(cluster, manager, mk.workers, types)
        for team in sorted(site.teams):
            name = team_namespace(team)
            obj = SwitchedObject(versions.KUEUE_API, "ClusterQueue", name, None, "spec.resourceGroups", CLUSTER_QUEUE, {})
            out.setdefault(cluster, {})[obj.kind, None, name] = (obj, queue_resource_groups(flavors, quotas.get(team, {})))
    inference = site.inference
    if inference is not None and inference.delivery == "pulumi":
        for model, size in sorted(site.model_capacity(profile).items()):
            obj = SwitchedObject("apps/v1", "Deployment", names.VLLM(model), INFERENCE_NAMESPACE, "spec.replicas", DEPLOYMENT, {})
            out.setdefault(inference.cluster, {})[obj.kind, obj.namespace, obj.name] = (obj, size.replicas)
    return out


def switched_objects(site: SiteConfig) -> dict[str, list[SwitchedObject]]:
    """Cluster -> the objects whose field differs between the scheduled profiles and the active one (the only ones a
    switch touches and Pulumi leaves alone), with each scheduled profile's value. Empty without a schedule."""
    schedule = site.profile_schedule
    if schedule is None:
        return {}
    active = profile_fields(site, site.active_profile)
    scheduled = {profile: profile_fields(site, profile) for profile in sorted(schedule.switches)}
    out: dict[str, list[SwitchedObject]] = {}
    for cluster, objects in sorted(active.items()):
        for key, (obj, value) in sorted(objects.items(), key=lambda item: (item[0][0], item[0][1] or "", item[0][2])):
            values = {profile: fields[cluster][key][1] for profile, fields in scheduled.items()}
            if any(v != value for v in values.values()):
                out.setdefault(cluster, []).append(SwitchedObject(**{**vars(obj), "values": values}))
    return out


def leave_to_schedule(switched: dict[str, list[SwitchedObject]], providers: dict[str, k8s.Provider]) -> pulumi.ResourceTransformation:
    """A transformation for the components that register switched objects (TrainingPool, InferencePool): each of them
    gets `ignore_changes` on its switched field, so that `pulumi up` never sets it back (Pulumi still creates it with
    the active profile's value). Objects are matched by cluster (their provider, or their parent's), kind, namespace
    and name, wherever the component registers them."""
    fields = {(cluster, o.kind, o.namespace, o.name): o.field for cluster, objects in switched.items() for o in objects}
    clusters = {id(provider): key for key, provider in providers.items()}

    def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        props, opts = args.props or {}, args.opts
        metadata = props.get("metadata")
        if not fields or not isinstance(metadata, dict) or not isinstance(props.get("kind"), str):
            return None
        provider = opts.provider or (opts.parent.get_provider(args.type_) if opts.parent is not None else None)
        field = fields.get((clusters.get(id(provider)), props["kind"], metadata.get("namespace"), metadata.get("name")))
        if field is None:
            return None
        ignored = [*(opts.ignore_changes or []), field]
        return pulumi.ResourceTransformationResult(props, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(ignore_changes=ignored)))

    return transform


SWITCH_SCRIPT = """\
set -euo pipefail
kubectl apply --server-side --force-conflicts --field-manager="$FIELD_MANAGER" -f /profile/objects.yaml
now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
by="system:serviceaccount:$NAMESPACE:$FIELD_MANAGER (Job $JOB_NAME of CronJob $CRONJOB_NAME)"
kubectl apply --server-side --force-conflicts --field-manager="$FIELD_MANAGER" -f - <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: $RECORD
  namespace: $NAMESPACE
data:
  profile: "$PROFILE"
  switched_at: "$now"
  switched_by: "$by"
  objects: "$OBJECTS"
EOF
kubectl create -f - <<EOF
apiVersion: v1
kind: Event
metadata:
  generateName: $RECORD-
  namespace: $NAMESPACE
involvedObject:
  apiVersion: v1
  kind: ConfigMap
  name: $RECORD
  namespace: $NAMESPACE
type: Normal
reason: ProfileSwitched
message: "Switched to profile $PROFILE by $by: $OBJECTS"
source:
  component: $FIELD_MANAGER
firstTimestamp: "$now"
lastTimestamp: "$now"
count: 1
EOF
echo "switched to profile $PROFILE at $now: $OBJECTS"
"""
"""What a switch runs (bash in the pinned kubectl image): apply the profile's objects, then record the switch."""


def switch_rules(objects: list[SwitchedObject]) -> dict[str | None, list[dict[str, Any]]]:
    """RBAC rules of the switch on one cluster, by namespace (None: cluster-wide): get and patch exactly the switched
    objects by name, and in its own namespace its record and Events. Never create (it changes only what Pulumi made),
    list, delete or any other object."""
    named: dict[tuple[str | None, str, str], list[str]] = {}
    for obj in objects:
        named.setdefault((obj.namespace, *obj.resource), []).append(obj.name)
    rules: dict[str | None, list[dict[str, Any]]] = {}
    for (ns, group, resource), object_names in sorted(named.items(), key=lambda item: (item[0][0] or "", item[0][1], item[0][2])):
        rules.setdefault(ns, []).append(
            {"apiGroups": [group], "resources": [resource], "resourceNames": sorted(object_names), "verbs": ["get", "patch"]}
        )
    rules.setdefault(SWITCH_NAMESPACE, []).extend([
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [RECORD], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ])
    return rules


def switch_pod(profile: str, objects: list[SwitchedObject], registry: Registry = UPSTREAM) -> dict[str, Any]:
    """The pod of a switch to `profile`: the pinned kubectl (from the cluster's `registry`) as an unprivileged user on a
    read-only root, with a short-lived token of the switch's ServiceAccount (no automounted one) and the profile's objects
    from its ConfigMap."""
    env = {
        "PROFILE": profile,
        "CRONJOB_NAME": names.PROFILE_SWITCH(profile),
        "FIELD_MANAGER": SWITCH_ACCOUNT,
        "NAMESPACE": SWITCH_NAMESPACE,
        "RECORD": RECORD,
        "OBJECTS": ", ".join(obj.where for obj in objects),
        "HOME": "/tmp",  # kubectl's discovery cache
    }
    return {
        "restartPolicy": "Never",
        "serviceAccountName": SWITCH_ACCOUNT,
        "automountServiceAccountToken": False,
        "securityContext": restricted_pod_security_context(),
        **registry.pod_fields(),
        "containers": [restricted_container(
            "switch", registry.image(versions.KUBECTL_IMAGE), KUBECTL_USER,
            command=["/bin/bash", "-c", SWITCH_SCRIPT],
            env=[*({"name": k, "value": v} for k, v in env.items()),
                 {"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}}],
            volumeMounts=[
                {"name": "objects", "mountPath": "/profile", "readOnly": True},
                {"name": "token", "mountPath": TOKEN_PATH, "readOnly": True},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
        )],
        "volumes": [
            {"name": "objects", "configMap": {"name": names.PROFILE_SWITCH(profile)}},
            {"name": "token", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 600}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ]}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
    }


@dataclass(frozen=True)
class ProfileSwitchesArgs:
    schedule: ProfileSchedule
    """The `profile_schedule` section: time zone, when each profile takes over, suspended or not."""
    active_profile: str | None
    """The profile Pulumi created the switched objects with (`active_profile`), recorded until the first switch."""
    switched: dict[str, list[SwitchedObject]]
    """Cluster -> the objects the switches change there (`switched_objects`)."""
    clusters: dict[str, ClusterRef]
    """The site's clusters by key; a switch runs on each that has switched objects."""
    adopt: AdoptConfig
    """Declares the namespaces that exist already."""
    registered_by: list[pulumi.Resource]
    """The components that register the switched objects (TrainingPool, InferencePool): everything here waits for them,
    the roles in their namespaces as well as the switches."""


class ProfileSwitches(pulumi.ComponentResource):
    """The profile switches of a site: per cluster with switched objects, a CronJob per scheduled profile."""

    switches: pulumi.Output[dict[str, Any]]
    """Cluster -> profile -> its CronJob (namespace/name), schedule and what it switches."""

    def __init__(self, name: str, args: ProfileSwitchesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:profiles:ProfileSwitches", name, None, opts)
        schedule = args.schedule
        out: dict[str, Any] = {}
        for cluster, objects in sorted(args.switched.items()):
            ref = args.clusters[cluster]
            # A switch patches objects those components register (it may not create them), and the Roles go in their namespaces.
            on = pulumi.ResourceOptions(parent=self, provider=ref.provider, depends_on=args.registered_by)
            prefix = f"{name}-{cluster}"
            ns = namespace(f"{prefix}-ns", SWITCH_NAMESPACE, on, adopt=Adoption(args.adopt, cluster), registry=ref.registry)
            account = k8s.core.v1.ServiceAccount(
                f"{prefix}-account", metadata={"name": SWITCH_ACCOUNT, "namespace": SWITCH_NAMESPACE},
                # the namespace must exist before anything is created in it
                automount_service_account_token=False, opts=_after(on, ns),
            )
            subjects = [{"kind": "ServiceAccount", "name": SWITCH_ACCOUNT, "namespace": SWITCH_NAMESPACE}]
            grants: list[pulumi.Resource] = []
            for ns_name, rules in switch_rules(objects).items():
                if ns_name is None:
                    role = k8s.rbac.v1.ClusterRole(f"{prefix}-role", metadata={"name": SWITCH_ACCOUNT}, rules=rules, opts=on)
                    grants += [role, k8s.rbac.v1.ClusterRoleBinding(
                        f"{prefix}-binding", metadata={"name": SWITCH_ACCOUNT}, subjects=subjects,
                        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SWITCH_ACCOUNT},
                        # the ClusterRole first: binding a role the API server cannot resolve takes the `bind` verb
                        opts=_after(on, role, account),
                    )]
                    continue
                # The other namespaces (the serving one) are their components', which this one depends on.
                role = k8s.rbac.v1.Role(f"{prefix}-role-{ns_name}", metadata={"name": SWITCH_ACCOUNT, "namespace": ns_name},
                                        # its own namespace must exist first
                                        rules=rules, opts=_after(on, ns) if ns_name == SWITCH_NAMESPACE else on)
                grants += [role, k8s.rbac.v1.RoleBinding(
                    f"{prefix}-binding-{ns_name}", metadata={"name": SWITCH_ACCOUNT, "namespace": ns_name}, subjects=subjects,
                    role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SWITCH_ACCOUNT},
                    # the Role first: binding a Role the API server cannot resolve takes the `bind` verb
                    opts=_after(on, role, account),
                )]
            # The switches own its data from their first run; Pulumi only creates it.
            record = k8s.core.v1.ConfigMap(
                f"{prefix}-record", metadata={"name": RECORD, "namespace": SWITCH_NAMESPACE},
                data={"profile": args.active_profile or "(base config)", "switched_by": "pulumi up (active_profile)"},
                # the namespace must exist before anything is created in it
                opts=pulumi.ResourceOptions.merge(_after(on, ns), pulumi.ResourceOptions(ignore_changes=["data"])),
            )
            out[cluster] = {}
            for profile, when in sorted(schedule.switches.items()):
                job = names.PROFILE_SWITCH(profile)
                content = k8s.core.v1.ConfigMap(
                    f"{prefix}-objects-{profile}", metadata={"name": job, "namespace": SWITCH_NAMESPACE},
                    data={OBJECTS_KEY: yamltext.dump_all([obj.manifest(profile) for obj in objects])},
                    # the namespace must exist before anything is created in it
                    opts=_after(on, ns),
                )
                k8s.batch.v1.CronJob(
                    f"{prefix}-switch-{profile}",
                    metadata={"name": job, "namespace": SWITCH_NAMESPACE, "annotations": checkov_skips(*WORKLOAD_SKIPS),
                              "labels": {PROFILE_ANNOTATION: profile}},
                    spec={
                        "schedule": when,
                        "timeZone": schedule.timezone,
                        "suspend": schedule.suspend,
                        "concurrencyPolicy": "Forbid",
                        "startingDeadlineSeconds": STARTING_DEADLINE_SEC,
                        "successfulJobsHistoryLimit": 3,
                        "failedJobsHistoryLimit": 3,
                        "jobTemplate": {"spec": {
                            "backoffLimit": 3,
                            "activeDeadlineSeconds": 600,
                            "template": {"metadata": {"labels": {PROFILE_ANNOTATION: profile}}, "spec": switch_pod(profile, objects, ref.registry)},
                        }},
                    },
                    # a switch mounts `content`, patches `record` (it may not create it) and needs its rights (`grants`)
                    opts=_after(on, content, record, *grants),
                )
                out[cluster][profile] = {"cronjob": f"{SWITCH_NAMESPACE}/{job}", "schedule": when, "timezone": schedule.timezone,
                                         "switches": [obj.where for obj in objects]}
        self.switches = pulumi.Output.from_input(out)
        self.register_outputs({"switches": self.switches})


def _after(on: pulumi.ResourceOptions, *deps: pulumi.Resource) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=list(deps)))
