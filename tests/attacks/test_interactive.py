"""Attacks from a notebook user's seat on the interactive engines (issue 37, path 5 "Spark Connect has no authentication",
and the low finding "Ray token auth is opt-in and a team member can mount another pod's ray-token"), against both
rendered stacks.

The attacker is a platform user with a JupyterHub server on compute: a member of one team, or of none. Their server is
a pod of `jupyterhub` labelled as KubeSpawner and the hub's teams hook label it (components/engines/jupyterhub.py); the
hook's own code is run with the attacker's Keycloak groups. Cilium rules are judged from the rendered policies with
Kubernetes label-selector semantics (a deny that selects the source refuses it; otherwise an allow must select it). A
team member on a GPU cluster acts with the RBAC of their Keycloak group and is judged by the rendered admission
policies (tests/admission.py's CEL engine).
"""

from __future__ import annotations

from typing import Any

import pytest
from admission import Request, admit, policies_in
from jupyter_hook import SERVER_LABELS, run_teams_hook

from components.config import names
from components.ray import TOKEN_AUTH_POLICY, ray_cluster_template

NS = "k8s:io.kubernetes.pod.namespace"
CLUSTER = "k8s:io.cilium.k8s.policy.cluster"
ENGINE_SECRETS = {"s3-spark", "polaris-spark"}
"""The Spark engine's keys: write on raw and warehouse, catalog writer."""
WORKLOAD_RESOURCES = {"pods", "jobs", "cronjobs", "deployments", "replicasets", "statefulsets", "daemonsets", "jobsets",
                      "rayclusters", "rayjobs", "rayservices", "trainjobs", "pytorchjobs", "mpijobs", "sparkapplications",
                      "notebooks", "*"}
"""What makes pods that may mount a Secret of their namespace."""


# --- the attacker's server -------------------------------------------------------------------------------------


def hub_hook(plan, compute: str) -> str:
    (release,) = [r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")
                  if plan.cluster(r) == compute and r["inputs"]["name"] == "jupyterhub"]
    (hook,) = release["values"]["hub"]["extraConfig"].values()
    return hook


MALLORY_SERVER = {**SERVER_LABELS, "hub.jupyter.org/username": "mallory"}
"""KubeSpawner's labels on the attacker's own server."""


def identity(pod_labels: dict[str, str], namespace: str, cluster: str) -> dict[str, str]:
    """A pod's Cilium identity labels (source `k8s`)."""
    return {**{f"k8s:{k}": v for k, v in pod_labels.items()}, NS: namespace, CLUSTER: cluster}


# --- Cilium selectors ------------------------------------------------------------------------------------------


def _value(labels: dict[str, str], key: str) -> str | None:
    """The value a selector's key finds: `k8s:x` the k8s label x, `x` or `any:x` a label x of any source."""
    source, _, name = key.partition(":") if ":" in key and not key.startswith("any:") else ("any", "", key.removeprefix("any:"))
    if source == "any":
        found = [v for k, v in labels.items() if k.split(":", 1)[-1] == name]
        return found[0] if found else None
    return labels.get(key)


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if _value(labels, key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        found, op, values = _value(labels, expression["key"]), expression["operator"], expression.get("values") or []
        if not {"In": found in values, "NotIn": found not in values, "Exists": found is not None,
                "DoesNotExist": found is None}[op]:
            return False
    return True


def _port_covered(rule: dict[str, Any], port: int) -> bool:
    ports = [p for to in rule.get("toPorts") or [] for p in to.get("ports") or []]
    return not ports or any(str(p["port"]) == str(port) for p in ports)


def verdict(policies: list[dict[str, Any]], target: dict[str, str], source: dict[str, str], port: int) -> str:
    """`denied`, `allowed` or `no rule` for `source` reaching `target` on `port`, under the policies that select the target."""
    selecting = [p["spec"] for p in policies if selects(p["spec"].get("endpointSelector") or {}, target)]
    for spec in selecting:
        for rule in spec.get("ingressDeny") or []:
            if any(selects(s, source) for s in rule.get("fromEndpoints") or []) and _port_covered(rule, port):
                return "denied"
    for spec in selecting:
        for rule in spec.get("ingress") or []:
            if (any(selects(s, source) for s in rule.get("fromEndpoints") or []) or "all" in (rule.get("fromEntities") or [])) \
                    and _port_covered(rule, port):
                return "allowed"
    return "no rule"


def cilium_policies(plan, cluster: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """The CiliumNetworkPolicies of `namespace` (their selectors scoped to it) and every clusterwide one, on `cluster`."""
    found = []
    for c, obj, _ in plan.manifests():
        if c != cluster:
            continue
        if obj["kind"] == "CiliumClusterwideNetworkPolicy":
            # a policy of several rules (`specs`) is each of its rules
            found += [{**obj, "spec": spec} for spec in obj.get("specs") or [obj["spec"]]]
        elif obj["kind"] == "CiliumNetworkPolicy" and obj["metadata"]["namespace"] == namespace:
            selector = obj["spec"].get("endpointSelector") or {}
            scoped = {**selector, "matchLabels": {**(selector.get("matchLabels") or {}), NS: namespace}}
            found.append({**obj, "spec": {**obj["spec"], "endpointSelector": scoped}})
    return found


# --- the plan's Spark Connect servers and teams -------------------------------------------------------------------


def connect_servers(plan) -> list[tuple[str, dict[str, Any]]]:
    """(cluster, Deployment) of every Spark Connect server."""
    found = [(c, o) for c, o, _ in plan.manifests() if o["kind"] == "Deployment" and o["metadata"]["name"] == "spark-connect"]
    assert found, "the stack runs no Spark Connect server"
    return found


def namespace_team(plan, cluster: str, namespace: str) -> str | None:
    (ns,) = [o for c, o, _ in plan.manifests() if c == cluster and o["kind"] == "Namespace" and o["metadata"]["name"] == namespace]
    return (ns["metadata"].get("labels") or {}).get("fab.internal/team")


def site_teams(plan) -> list[str]:
    teams = sorted({(o["metadata"].get("labels") or {})["fab.internal/team"] for o in plan.objects("Namespace")
                    if o["metadata"]["name"].startswith("team-") and "fab.internal/team" in (o["metadata"].get("labels") or {})})
    assert teams
    return teams


def server_of(plan, monkeypatch, compute: str, groups: list[str]) -> dict[str, str]:
    pod = run_teams_hook(monkeypatch, hub_hook(plan, compute), groups, MALLORY_SERVER)
    return identity(pod.metadata.labels, "jupyterhub", compute)


# --- Spark Connect ---------------------------------------------------------------------------------------------


def test_a_platform_user_in_no_team_cannot_reach_any_spark_connect(plan, monkeypatch):
    for cluster, server in connect_servers(plan):
        namespace = server["metadata"]["namespace"]
        target = identity(server["spec"]["template"]["metadata"]["labels"], namespace, cluster)
        mallory = server_of(plan, monkeypatch, cluster, ["platform-users"])
        assert verdict(cilium_policies(plan, cluster, namespace), target, mallory, 15002) == "denied", namespace


def test_a_member_of_another_team_cannot_reach_a_teams_spark_connect(plan, monkeypatch):
    teams = site_teams(plan)
    for cluster, server in connect_servers(plan):
        namespace = server["metadata"]["namespace"]
        owner = namespace_team(plan, cluster, namespace)
        assert owner in teams, f"Spark Connect in {namespace} serves no team: it acts for whoever reaches it"
        target = identity(server["spec"]["template"]["metadata"]["labels"], namespace, cluster)
        policies = cilium_policies(plan, cluster, namespace)
        for other in [t for t in teams if t != owner]:
            mallory = server_of(plan, monkeypatch, cluster, ["platform-users", names.TEAM_GROUP(other)])
            assert verdict(policies, target, mallory, 15002) == "denied", (namespace, other)
        member = server_of(plan, monkeypatch, cluster, ["platform-users", names.TEAM_GROUP(owner)])
        assert verdict(policies, target, member, 15002) != "denied", namespace


def test_a_udf_on_spark_connect_finds_no_spark_engine_keys(plan):
    """A UDF runs in an executor (or the driver) and reads its environment and mounts: neither holds the engine's Secrets,
    and the server's namespace has none to hand out."""
    for cluster, server in connect_servers(plan):
        namespace = server["metadata"]["namespace"]
        held = {s["metadata"]["name"] for s in plan.objects("Secret", cluster) if s["metadata"]["namespace"] == namespace}
        assert held, namespace
        assert not held & ENGINE_SECRETS, namespace
        pod = server["spec"]["template"]["spec"]
        named = {ref["secretRef"]["name"] for c in pod["containers"] for ref in c.get("envFrom") or [] if "secretRef" in ref}
        assert named and not named & ENGINE_SECRETS, namespace


def test_a_teams_spark_connect_holds_only_that_teams_credentials(plan):
    for cluster, server in connect_servers(plan):
        namespace = server["metadata"]["namespace"]
        owner = namespace_team(plan, cluster, namespace)
        credentials = [s for s in plan.objects("Secret", cluster)
                       if s["metadata"]["namespace"] == namespace and "fab.internal/engine" in (s["metadata"].get("labels") or {})]
        assert credentials
        assert {(s["metadata"]["labels"]["fab.internal/engine"], s["metadata"]["labels"].get("fab.internal/team"))
                for s in credentials} == {("training", owner)}, namespace


# --- Ray -------------------------------------------------------------------------------------------------------


def kuberay_clusters(plan) -> list[str]:
    found = sorted({plan.cluster(r) for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "kuberay-operator"})
    assert found
    return found


def _namespace_object(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The Namespace as the cluster holds it (the API server hands its labels to the policies' namespaceSelector)."""
    found = [o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == name]
    return found[0] if found else {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {}}}


def test_a_team_cannot_start_a_ray_cluster_without_token_auth(plan):
    template = ray_cluster_template("pool")
    template["spec"].pop("authOptions")
    for cluster in kuberay_clusters(plan):
        team = site_teams(plan)[0]
        objects = [o for c, o, _ in plan.manifests() if c == cluster]
        request = Request(operation="CREATE", group="ray.io", version="v1", resource="rayclusters", kind="RayCluster",
                          name="open", namespace=names.TEAM_NAMESPACE(team), username="oidc:mallory",
                          groups=(f"oidc:{names.TEAM_GROUP(team)}", "system:authenticated"), object=template,
                          namespace_object=_namespace_object(objects, names.TEAM_NAMESPACE(team)))
        verdicts = [admit(policy, binding, request) for policy, bindings in policies_in(objects).values() for binding in bindings]
        refusals = [v.message for v in verdicts if not v.allowed]
        assert refusals, f"{cluster} admits a Ray cluster without token authentication"
        assert TOKEN_AUTH_POLICY in {name for name, (_, bindings) in policies_in(objects).items() if bindings}


def test_a_team_cannot_switch_token_auth_off_on_its_ray_job(plan):
    for cluster in kuberay_clusters(plan):
        team = site_teams(plan)[0]
        spec = {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": {**ray_cluster_template("pool")["spec"],
                                                                         "authOptions": {"mode": "disabled"}}}
        job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "open"}, "spec": spec}
        objects = [o for c, o, _ in plan.manifests() if c == cluster]
        request = Request(operation="CREATE", group="ray.io", version="v1", resource="rayjobs", kind="RayJob", name="open",
                          namespace=names.TEAM_NAMESPACE(team), username="oidc:mallory", object=job,
                          namespace_object=_namespace_object(objects, names.TEAM_NAMESPACE(team)))
        assert any(not admit(p, b, request).allowed for p, bs in policies_in(objects).values() for b in bs), cluster


def _creates_workloads(role: dict[str, Any]) -> bool:
    return any(({"create", "*"} & set(rule.get("verbs") or [])) and (WORKLOAD_RESOURCES & set(rule.get("resources") or []))
               for rule in role.get("rules") or [])


def pod_makers(plan, cluster: str, namespace: str) -> set[tuple[str, str]]:
    """(kind, name) of every subject that may make pods in `namespace` on `cluster`, hence mount its Secrets."""
    objects = [o for c, o, _ in plan.manifests() if c == cluster]
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects if o["kind"] in ("Role", "ClusterRole")}
    makers = set()
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if binding["kind"] == "RoleBinding" and binding["metadata"]["namespace"] != namespace:
            continue
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], binding["metadata"].get("namespace") if ref["kind"] == "Role" else None, ref["name"]))
        if role is not None and _creates_workloads(role):
            makers |= {(s["kind"], s["name"]) for s in binding.get("subjects") or []}
    return makers


def test_a_member_of_another_team_cannot_mount_a_teams_ray_token_on_a_gpu_cluster(plan):
    """The Secret `ray-token` of a team namespace is mountable by whoever may make pods there: the team's own group, and
    no other team's (platform ServiceAccounts are not a tenant's seat)."""
    tokens = [(c, o) for c, o, _ in plan.manifests() if o["kind"] == "Secret" and o["metadata"]["name"] == "ray-token"]
    assert tokens
    for cluster, secret in tokens:
        namespace, owner = secret["metadata"]["namespace"], secret["metadata"]["labels"]["fab.internal/team"]
        assert namespace_team(plan, cluster, namespace) == owner
        groups = {name for kind, name in pod_makers(plan, cluster, namespace) if kind in ("Group", "User")}
        assert groups, (cluster, namespace)
        assert all(name.endswith(names.TEAM_GROUP(owner)) for name in groups), (cluster, namespace, groups)


def test_a_member_of_another_team_gets_no_copy_of_a_teams_ray_token_from_jupyterhub(plan, monkeypatch):
    copies = [(c, o) for c, o, _ in plan.manifests() if o["kind"] == "Secret" and o["metadata"]["namespace"] == "jupyterhub"
              and o["metadata"]["name"].startswith("ray-token-")]
    assert copies
    teams = site_teams(plan)
    for cluster, secret in copies:
        owner = secret["metadata"]["labels"]["fab.internal/team"]
        for other in [t for t in teams if t != owner] + [None]:
            groups = ["platform-users", *([names.TEAM_GROUP(other)] if other else [])]
            pod = run_teams_hook(monkeypatch, hub_hook(plan, cluster), groups, MALLORY_SERVER)
            mounted = {v["secret"]["secret_name"] for v in pod.spec.volumes or []}
            assert secret["metadata"]["name"] not in mounted, (owner, other)
        # No one in jupyterhub but the hub may make pods there.
        assert {name for kind, name in pod_makers(plan, cluster, "jupyterhub") if kind in ("Group", "User")} == set()


def test_a_member_of_another_team_cannot_reach_a_teams_ray_heads(plan, monkeypatch):
    teams = site_teams(plan)
    (compute,) = {c for c, _ in connect_servers(plan)}
    for cluster in [c for c in kuberay_clusters(plan) if c != compute]:
        for owner in teams:
            head = identity({"ray.io/node-type": "head", "ray.io/cluster": "interactive"}, names.TEAM_NAMESPACE(owner), cluster)
            policies = cilium_policies(plan, cluster, names.TEAM_NAMESPACE(owner))
            member = server_of(plan, monkeypatch, compute, ["platform-users", names.TEAM_GROUP(owner)])
            assert verdict(policies, head, member, 10001) == "allowed", (cluster, owner)
            for other in [t for t in teams if t != owner] + [None]:
                groups = ["platform-users", *([names.TEAM_GROUP(other)] if other else [])]
                mallory = server_of(plan, monkeypatch, compute, groups)
                assert verdict(policies, head, mallory, 10001) != "allowed", (cluster, owner, other)


@pytest.mark.parametrize("key", ["k8s:component", "component", "any:component"])
def test_the_selector_reading_follows_cilium(key):
    labels = identity({"component": "singleuser-server"}, "jupyterhub", "c")
    assert selects({"matchLabels": {key: "singleuser-server"}}, labels)
    assert not selects({"matchExpressions": [{"key": key, "operator": "NotIn", "values": ["singleuser-server"]}]}, labels)
    assert selects({"matchExpressions": [{"key": "k8s:fab.internal/member-of-x", "operator": "NotIn", "values": ["member"]}]}, labels)
