"""The RBAC area of `fabctl access`: the Kubernetes rights of a principal, per cluster and namespace, from the Roles,
ClusterRoles (aggregated ones too), RoleBindings and ClusterRoleBindings of the rendered plan, and where they lead.

The principal's own subjects (its groups, `system:authenticated`) and the ServiceAccounts it runs pods as are evaluated
first; every grant that hands it another identity is marked (`escalation`) and that identity's rights join, until
nothing new is reached (the closure):

- running pods (create, or update/patch, of pods or of any workload controller: Jobs, JobSets, TrainJobs, RayJobs,
  SparkApplications, ...) in a namespace: every Secret of the namespace is mountable and every ServiceAccount usable;
- reading Secrets (`get`, `list`, `watch`): a ServiceAccount token among them is that account;
- `serviceaccounts/token` create: a token of any ServiceAccount of the namespace;
- `pods/exec`, `pods/attach`, `pods/portforward`, `pods/ephemeralcontainers`: the ServiceAccounts of the pods running there;
- `impersonate`; `nodes/proxy` (the kubelet's API: exec in any pod of the node, which no admission policy sees);
- `bind` and `escalate` on roles: any right, which the closure cannot bound (marked, not followed);
- wildcard verbs or resources: every right of the group, including those added later.

An identity a ValidatingAdmissionPolicy keeps to dry runs (`request.dryRun == true` for its user name, as the preview
identity's) runs no pod: its write grants are shown but lead nowhere. Not seen: the RBAC objects of Helm charts (only
what the program applies is in the plan), Kubernetes' built-in roles but for `cluster-admin`, `admin`, `edit` and
`view` (approximated), and other admission policies or webhooks that may refuse a request RBAC allows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from fabctl.access.model import Access, Principal
from fabctl.access.principal import service_account_id
from fabctl.render import Plan

CLUSTER_WIDE = "*"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
RUN_VERBS = ("create", "update", "patch")
"""What runs a pod of one's own choosing: creating it, or changing the pod template (or a pod's image)."""
READ_VERBS = ("get", "list", "watch")
WORKLOADS = (
    ("", "pods"), ("", "replicationcontrollers"), ("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"),
    ("apps", "daemonsets"), ("batch", "jobs"), ("batch", "cronjobs"), ("jobset.x-k8s.io", "jobsets"),
    ("trainer.kubeflow.org", "trainjobs"), ("kubeflow.org", "pytorchjobs"), ("ray.io", "rayjobs"), ("ray.io", "rayclusters"),
    ("ray.io", "rayservices"), ("sparkoperator.k8s.io", "sparkapplications"), ("sparkoperator.k8s.io", "scheduledsparkapplications"),
    ("leaderworkerset.x-k8s.io", "leaderworkersets"), ("serving.kserve.io", "inferenceservices"),
)
"""Pods and the controllers that start pods from a template their author writes."""
ENTER_POD = ("pods/exec", "pods/attach", "pods/portforward", "pods/ephemeralcontainers")
IMPERSONABLE = ("users", "groups", "serviceaccounts", "uids", "userextras")
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
BUILT_IN = {
    "cluster-admin": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}],
    "admin": [
        {"apiGroups": ["", "apps", "batch", "autoscaling", "policy", "networking.k8s.io"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["*"]},
    ],
    "edit": [
        {"apiGroups": ["", "apps", "batch", "autoscaling", "policy", "networking.k8s.io"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
    ],
    "view": [{"apiGroups": ["", "apps", "batch", "autoscaling", "policy", "networking.k8s.io"],
              "resources": ["pods", "services", "configmaps", "endpoints", "persistentvolumeclaims", "deployments", "replicasets",
                            "statefulsets", "daemonsets", "jobs", "cronjobs", "events"], "verbs": ["get", "list", "watch"]}],
}
"""Kubernetes' default ClusterRoles a binding may name without the program defining them, approximated (no plan holds
them): enough to mark what they lead to."""
NOT_SEEN = ("the RBAC objects Helm charts install: only the objects the program applies are in the plan",
            "admission policies and webhooks other than dry-run-only ones, which may refuse what RBAC allows")


@dataclass(frozen=True)
class Identity:
    """Who a request runs as on one cluster: the seat itself (its subjects), or a ServiceAccount."""

    cluster: str
    user: str
    """`system:serviceaccount:<ns>:<name>`, or "" for the seat's own subjects."""
    subjects: tuple[tuple[str, str], ...] = ()
    how: str = ""
    """How the seat reached it: empty for its own subjects."""

    @property
    def account(self) -> tuple[str, str] | None:
        if not self.user.startswith("system:serviceaccount:"):
            return None
        ns, name = self.user.split(":")[2:4]
        return ns, name

    def matches(self, subject: dict[str, Any], binding_ns: str | None) -> bool:
        kind, name = subject.get("kind"), subject.get("name")
        account = self.account
        if account is None:
            return (kind, name) in self.subjects
        ns, sa = account
        if kind == "ServiceAccount":
            return name == sa and (subject.get("namespace") or binding_ns) == ns
        if kind == "User":
            return name == self.user
        return kind == "Group" and name in ("system:authenticated", "system:serviceaccounts", f"system:serviceaccounts:{ns}")


@dataclass
class Cluster:
    """What one cluster's RBAC is made of, in the plan."""

    name: str
    roles: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    cluster_roles: dict[str, dict[str, Any]] = field(default_factory=dict)
    bindings: list[dict[str, Any]] = field(default_factory=list)
    namespaces: set[str] = field(default_factory=set)
    accounts: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    secrets: dict[str, dict[str, str | None]] = field(default_factory=lambda: defaultdict(dict))
    """namespace -> Secret name -> the ServiceAccount whose token it holds (None: not a token)."""
    dry_run_only: dict[str, str] = field(default_factory=dict)
    """user -> the ValidatingAdmissionPolicy that keeps it to dry runs."""

    def cluster_role_rules(self, name: str) -> list[dict[str, Any]] | None:
        role = self.cluster_roles.get(name)
        if role is None:
            return BUILT_IN.get(name)
        rules = list(role.get("rules") or [])
        for selector in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
            wanted = selector.get("matchLabels") or {}
            for other, obj in self.cluster_roles.items():
                labels = obj.get("metadata", {}).get("labels") or {}
                if other != name and wanted and all(labels.get(k) == v for k, v in wanted.items()):
                    rules += obj.get("rules") or []
        return rules


def clusters_of(plan: Plan) -> dict[str, Cluster]:
    out: dict[str, Cluster] = {}
    policies: dict[tuple[str, str], dict[str, Any]] = {}
    bound: set[tuple[str, str]] = set()
    for name, obj, _ in plan.manifests():
        cluster = out.setdefault(name, Cluster(name))
        kind, meta = obj["kind"], obj.get("metadata") or {}
        ns = meta.get("namespace")
        if ns:
            cluster.namespaces.add(ns)
        if kind == "Namespace":
            cluster.namespaces.add(meta["name"])
        elif kind == "Role":
            cluster.roles[ns, meta["name"]] = list(obj.get("rules") or [])
        elif kind == "ClusterRole":
            cluster.cluster_roles[meta["name"]] = obj
        elif kind in ("RoleBinding", "ClusterRoleBinding"):
            cluster.bindings.append(obj)
        elif kind == "ServiceAccount":
            cluster.accounts[ns].add(meta["name"])
        elif kind == "Secret":
            token = obj.get("type") == SERVICE_ACCOUNT_TOKEN
            cluster.secrets[ns][meta["name"]] = (meta.get("annotations") or {}).get("kubernetes.io/service-account.name") if token else None
        elif kind == "ValidatingAdmissionPolicy":
            policies[name, meta["name"]] = obj.get("spec") or {}
        elif kind == "ValidatingAdmissionPolicyBinding":
            spec = obj.get("spec") or {}
            if "Deny" in (spec.get("validationActions") or []) and not spec.get("matchResources"):
                bound.add((name, spec.get("policyName")))
    for (name, policy), spec in policies.items():
        user = _dry_run_user(spec)
        if user and (name, policy) in bound:
            out[name].dry_run_only[user] = policy
    for cluster in out.values():
        for ns in cluster.namespaces:
            cluster.accounts[ns].add("default")  # every namespace has one
    return out


def _dry_run_user(spec: dict[str, Any]) -> str | None:
    """The user a policy keeps to dry runs on every write and connection (exec, attach, port-forward), if it is such a
    policy."""
    if spec.get("failurePolicy") != "Fail" or [v.get("expression", "").replace(" ", "") for v in spec.get("validations") or []] != ["request.dryRun==true"]:
        return None
    rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
    if not any("*" in r.get("resources", []) and "*" in r.get("apiGroups", []) and {"CREATE", "UPDATE", "CONNECT"} <= set(r.get("operations", [])) for r in rules):
        return None
    users = [c.get("expression", "").replace(" ", "") for c in spec.get("matchConditions") or []]
    if len(users) == 1 and users[0].startswith("request.userInfo.username=='") and users[0].endswith("'"):
        return users[0][len("request.userInfo.username=='"):-1]
    return None


def _allows(rule: dict[str, Any], group: str, resource: str, verbs: tuple[str, ...]) -> bool:
    groups, resources, granted = rule.get("apiGroups") or [], rule.get("resources") or [], rule.get("verbs") or []
    top = resource.split("/")[0]
    return ((group in groups or "*" in groups)
            and (resource in resources or "*" in resources or ("/" in resource and f"{top}/*" in resources)
                 or ("/" not in resource and f"*/{resource}" in resources))
            and ("*" in granted or any(v in granted for v in verbs)))


def _any(rules: list[dict[str, Any]], group: str, resource: str, verbs: tuple[str, ...]) -> list[dict[str, Any]]:
    return [r for r in rules if _allows(r, group, resource, verbs)]


def _resource_label(group: str, resource: str) -> str:
    return f"{group}/{resource}" if group else resource


def summary(rules: list[dict[str, Any]]) -> str:
    """The rules as `verbs: resources` clauses, rules with the same verbs together: `create,get: batch/jobs pods`."""
    by_verbs: dict[str, list[str]] = defaultdict(list)
    for rule in rules:
        verbs = ",".join(sorted(rule.get("verbs") or []))
        if rule.get("nonResourceURLs"):
            by_verbs[verbs] += [f"url:{url}" for url in rule["nonResourceURLs"]]
            continue
        for group in rule.get("apiGroups") or [""]:
            for resource in rule.get("resources") or []:
                label = _resource_label(group, resource)
                if rule.get("resourceNames"):
                    label += f"[{','.join(rule['resourceNames'])}]"
                by_verbs[verbs].append(label)
    return "; ".join(f"{verbs}: {' '.join(sorted(dict.fromkeys(resources)))}" for verbs, resources in sorted(by_verbs.items()))


@dataclass
class Finding:
    """What a grant leads to in one scope: its escalation notes and the identities it reaches."""

    notes: list[str] = field(default_factory=list)
    reached: list[tuple[str, str]] = field(default_factory=list)
    """(ServiceAccount user, how)."""


def escalations(cluster: Cluster, scope: str, rules: list[dict[str, Any]], dry_run_only: str | None) -> Finding:
    """What `rules`, granted in `scope` (a namespace, or CLUSTER_WIDE) of `cluster`, lead to beyond what they say."""
    found = Finding()
    spaces = sorted(cluster.namespaces) if scope == CLUSTER_WIDE else [scope]
    where = "every namespace" if scope == CLUSTER_WIDE else scope

    def accounts(how: str) -> None:
        for ns in spaces:
            found.reached += [(service_account_id(ns, sa), f"{how} in {ns}") for sa in sorted(cluster.accounts.get(ns, ()))]

    runs = [_resource_label(g, r) for g, r in WORKLOADS if _any(rules, g, r, RUN_VERBS)]
    if runs and dry_run_only is None:
        secrets = sorted({s for ns in spaces for s in cluster.secrets.get(ns, {})})
        sas = sorted({sa for ns in spaces for sa in cluster.accounts.get(ns, ())})
        found.notes.append(f"runs pods ({', '.join(runs)}) in {where}: mounts its Secrets ({', '.join(secrets) or 'none rendered'}) "
                           f"and runs as its ServiceAccounts ({', '.join(sas)})")
        accounts("runs a pod")
    elif runs:
        found.notes.append(f"writes {', '.join(runs)} in dry runs only (ValidatingAdmissionPolicy {dry_run_only}): runs no pod")
    readers = _any(rules, "", "secrets", READ_VERBS)
    if readers:
        names = {n for r in readers for n in r.get("resourceNames") or []}
        readable = [(ns, s, sa) for ns in spaces for s, sa in sorted(cluster.secrets.get(ns, {}).items()) if not names or s in names]
        tokens = [(ns, s, sa) for ns, s, sa in readable if sa]
        found.notes.append(f"reads Secrets in {where}" + (f" ({', '.join(sorted(names))})" if names else " (every Secret, new ones too)")
                           + (f": ServiceAccount tokens {', '.join(f'{ns}/{s}' for ns, s, _ in tokens)}" if tokens else ""))
        found.reached += [(service_account_id(ns, sa), f"reads the token Secret {ns}/{s}") for ns, s, sa in tokens if sa]
    if _any(rules, "", "serviceaccounts/token", ("create",)) and dry_run_only is None:
        found.notes.append(f"mints tokens of the ServiceAccounts of {where} (serviceaccounts/token create)")
        accounts("mints a token")
    entered = [r for r in ENTER_POD if _any(rules, "", r, ("create", "get", "update", "patch"))]
    if entered and dry_run_only is None:  # exec, attach and port-forward are CONNECT requests, which the policy refuses too
        found.notes.append(f"enters running pods of {where} ({', '.join(entered)}): their ServiceAccounts and mounted Secrets")
        accounts("enters a pod")
    impersonated = [r for r in IMPERSONABLE if _any(rules, "" if r != "uids" and r != "userextras" else "authentication.k8s.io", r, ("impersonate",))]
    if impersonated:
        found.notes.append(f"impersonates {', '.join(impersonated)} in {where}")
        if "serviceaccounts" in impersonated:
            accounts("impersonates")
    if scope == CLUSTER_WIDE and _any(rules, "", "nodes/proxy", ("get", "create")):
        found.notes.append("reaches the kubelets' API (nodes/proxy): exec in every pod of the cluster, seen by no admission policy")
        for ns in sorted(cluster.accounts):
            found.reached += [(service_account_id(ns, sa), "exec through nodes/proxy") for sa in sorted(cluster.accounts[ns])]
    for verb in ("bind", "escalate"):
        if any(_any(rules, "rbac.authorization.k8s.io", kind, (verb,)) and verb in (r.get("verbs") or []) for kind in ("roles", "clusterroles") for r in rules):
            found.notes.append(f"{verb} on roles in {where}: " + ("binds any role, whatever it holds" if verb == "bind" else
                               "writes roles with rights it does not hold") + (" (dry runs only)" if dry_run_only else ""))
    wild = [r for r in rules if "*" in (r.get("verbs") or []) or "*" in (r.get("resources") or [])]
    if wild:
        found.notes.append(f"wildcard: {summary(wild)} (every such right, those added later too)")
    return found


def _rules_of(cluster: Cluster, binding: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, str]:
    ref = binding.get("roleRef") or {}
    ns = (binding.get("metadata") or {}).get("namespace")
    if ref.get("kind") == "Role":
        return cluster.roles.get((ns, ref.get("name"))), f"Role {ref.get('name')}"
    rules = cluster.cluster_role_rules(ref.get("name"))
    built_in = ref.get("name") not in cluster.cluster_roles and ref.get("name") in BUILT_IN
    return rules, f"ClusterRole {ref.get('name')}" + (" (Kubernetes' default)" if built_in else "")


def identity_accesses(cluster: Cluster, identity: Identity) -> tuple[list[Access], list[tuple[str, str]]]:
    """The identity's grants on its cluster, one Access per binding, and the ServiceAccounts they reach."""
    out, reached = [], []
    dry = cluster.dry_run_only.get(identity.user)
    prefix = (f"as {identity.user} ({identity.how}): " if identity.how else (f"as {identity.user}: " if identity.user else ""))
    for binding in sorted(cluster.bindings, key=lambda b: (b["kind"], (b.get("metadata") or {}).get("namespace") or "", b["metadata"]["name"])):
        meta = binding.get("metadata") or {}
        ns = meta.get("namespace")
        if not any(identity.matches(s, ns) for s in binding.get("subjects") or []):
            continue
        scope = ns if binding["kind"] == "RoleBinding" else CLUSTER_WIDE
        rules, role = _rules_of(cluster, binding)
        via = f"{prefix}{binding['kind']} {(ns + '/') if ns else ''}{meta['name']} -> {role}"
        if rules is None:
            out.append(Access("rbac", cluster.name, scope, "(role not in the plan)", via, "unknown: a role a chart or the cluster defines"))
            continue
        found = escalations(cluster, scope, rules, dry)
        allowed = summary(rules) + (f" (writes: dry runs only, ValidatingAdmissionPolicy {dry})" if dry and any(
            WRITE_VERBS & set(r.get("verbs") or []) or "*" in (r.get("verbs") or []) for r in rules) else "")
        out.append(Access("rbac", cluster.name, scope, allowed, via, "; ".join(found.notes)))
        reached += found.reached
    return out, reached


def accesses(plan: Plan, principal: Principal) -> list[Access]:
    """The principal's RBAC grants on every cluster of the plan, and those of every identity they lead to."""
    clusters = clusters_of(plan)
    queue: list[Identity] = []
    if principal.rbac_subjects:
        queue += [Identity(name, "", principal.rbac_subjects) for name in sorted(clusters)]
    queue += [Identity(name, user, how="an identity the seat holds") for name, users in sorted(principal.service_accounts.items())
              for user in users if name in clusters]
    seen: set[tuple[str, str]] = set()
    out: list[Access] = []
    while queue:
        identity = queue.pop(0)
        if (identity.cluster, identity.user) in seen:
            continue
        seen.add((identity.cluster, identity.user))
        found, reached = identity_accesses(clusters[identity.cluster], identity)
        out += found
        # the seat's own ServiceAccounts before those its grants reach: each is shown once, by its shortest path
        queue += [Identity(identity.cluster, user, how=how) for user, how in reached if (identity.cluster, user) not in seen]
    return out
