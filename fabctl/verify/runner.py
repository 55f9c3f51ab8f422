"""Runs `fabctl verify`'s criteria against the live clusters of a site (docs/acceptance.md, "Running fabctl verify and
reading the report"), with the official `kubernetes` client and the kubeconfig contexts Pulumi uses.

For each criterion, each step in order: its objects are applied with server-side apply (field manager `fabctl-verify`),
what the workloads use first (namespaces, ConfigMaps, Secrets, accounts and roles, Services), then the `background`
workloads, each started before the rest; the runner waits for the deciding Job, MPIJob, JobSet, TrainJob or SparkApplication to finish,
reads its pods' logs for `FAB-RESULT key=value` lines, and deletes everything it applied, whatever happened (failure, timeout,
Ctrl-C), last applied first. A step may follow what an earlier step of its criterion started: a `{{figure <step>.<key>}}`
in its objects is replaced by that step's figure before it is applied (`FIGURE`), and a step whose figure was not
reported is not applied. A namespace the steps use that does not exist is created at Pod Security `restricted` and
deleted at the end of the run (deleting it after each criterion would leave the next one a namespace still
terminating). Then the criterion's judge decides.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError

from components.kube import RESTRICTED
from fabctl.verify.model import GENERATE_ANNOTATION, RESULT_PREFIX, SSH_KEY, SSH_KEYPAIR, Criterion, Manifest, Step
from fabctl.verify.report import ERROR, FAIL, PASS, Outcome

FIELD_MANAGER = "fabctl-verify"
CREATED_BY = {"app.kubernetes.io/managed-by": FIELD_MANAGER}
"""Label of the namespaces the runner creates (the jobs label their own objects `fab.internal/verify: <criterion id>`)."""
PULL_SECRET_SOURCE = "kube-system"
"""Where the runner copies the site registry's pull Secret from (config `registry.pull_secret`) into a namespace of a step
that lacks it (the acceptance namespace, the NCCL runs' own): the program puts it there for Cilium on every cluster
(components/kube.py pull_secret), as in every namespace it creates."""
REQUEST_TIMEOUT_SEC = 30
"""One API request; an unreachable cluster fails the criterion instead of hanging the run."""

FINISHED: dict[str, tuple[str, str]] = {
    "Job": ("Complete", "Failed"),
    "MPIJob": ("Succeeded", "Failed"),
    "JobSet": ("Completed", "Failed"),
    "TrainJob": ("Complete", "Failed"),
}
"""Kind of a deciding object -> the conditions (status True) that say it succeeded or failed."""
STATES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "SparkApplication": (frozenset({"COMPLETED"}), frozenset({"FAILED", "SUBMISSION_FAILED"})),
}
"""Kind of a deciding object that reports a state instead of conditions (`.status.applicationState.state`, the Spark
operator's ApplicationStateType, api/v1beta2/sparkapplication_types.go at 2.5.2) -> the states that say it succeeded or
failed. SUBMISSION_FAILED becomes FAILED unless the application retries; either ends a run that never retries."""

OPERATORS = {
    "kubeflow.org": "the MPI Operator",
    "jobset.x-k8s.io": "the JobSet controller",
    "trainer.kubeflow.org": "Kubeflow Trainer",
    "kueue.x-k8s.io": "Kueue",
    "monitoring.coreos.com": "the Prometheus operator",
    "sparkoperator.k8s.io": "the Spark operator",
}
"""API group -> what serves it, for the message when a criterion needs a kind the cluster does not serve."""


def _pod_selector(kind: str, name: str) -> str:
    """Label selector of the pods whose logs carry a deciding object's results."""
    if kind == "MPIJob":  # the launcher runs mpirun and prints what rank 0 reports
        return f"training.kubeflow.org/job-name={name},training.kubeflow.org/job-role=launcher"
    if kind == "JobSet":
        return f"jobset.sigs.k8s.io/jobset-name={name}"
    if kind == "TrainJob":  # its JobSet is named as it is; the MPI launcher runs mpirun and prints what rank 0 reports
        return f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name=launcher"
    if kind == "SparkApplication":  # its driver prints the results (labels of the operator's pkg/common/spark.go)
        return f"spark-role=driver,sparkoperator.k8s.io/app-name={name}"
    return f"batch.kubernetes.io/job-name={name}"


SETUP_KINDS = frozenset({
    "Namespace", "ConfigMap", "Secret", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
    "Service", "TrainingRuntime",
})
"""Kinds a step's workloads use (where they run, what they mount, who they run as): applied before any workload."""


def apply_order(step: Step) -> list[Manifest]:
    """The step's objects in the order they are applied, each group as listed: what the workloads use (SETUP_KINDS),
    then the background workloads (each started before the next is applied), then the others. A background Job that
    mounts a ConfigMap applied after it would never start."""

    def group(obj: Manifest) -> int:
        if obj["kind"] in SETUP_KINDS:
            return 0
        return 1 if obj["metadata"]["name"] in step.background else 2

    return sorted(step.objects, key=group)


FIGURE = re.compile(r"\{\{figure ([0-9]+\.[A-Za-z0-9_.-]+)\}\}")
"""A placeholder in a string of a step's objects (an env value, an argument) for a figure an earlier step of the same
criterion reported (`<step>.<key>`): the runner puts the figure in its place just before it applies the step, so that a
step can follow what an earlier one started (phase 03's run id) while `--render` writes the placeholder itself."""


FIGURE_VALUE = re.compile(r"[A-Za-z0-9._:-]{1,253}")
"""What a figure must look like to be put in a later step (FIGURE): letters, digits and `._:-`, as run ids and names are."""


def figure(step: int, key: str) -> str:
    """The placeholder of the figure `key` of step `step` (FIGURE)."""
    return f"{{{{figure {step}.{key}}}}}"


def with_figures(value: Any, results: Mapping[str, str], missing: list[str]) -> Any:
    """`value` (an object of a step, or any part of it) with every FIGURE placeholder replaced by the earlier step's
    figure; the keys of the figures not reported are added to `missing` (their placeholders stay)."""
    if isinstance(value, str):
        def fill(match: re.Match[str]) -> str:
            found = results.get(match.group(1))
            # A figure is read from a pod's log and goes into a later step's scripts and selectors: only a plain token
            # (a run id, a name) is put there; anything else counts as not reported.
            if found is not None and FIGURE_VALUE.fullmatch(found):
                return found
            missing.append(match.group(1))
            return match.group(0)

        return FIGURE.sub(fill, value)
    if isinstance(value, list):
        return [with_figures(v, results, missing) for v in value]
    if isinstance(value, dict):
        return {k: with_figures(v, results, missing) for k, v in value.items()}
    return value


def generated(obj: Manifest) -> Manifest:
    """The object as the runner applies it: a Secret annotated `fab.internal/verify-generate: ssh-keypair` (the NCCL
    run's, phase_01_nccl.py) with a fresh ed25519 key pair as its data (`id_ed25519` in OpenSSH's format,
    `id_ed25519.pub`, and `authorized_keys` holding that public key), made at each apply so that no key is in the
    rendered manifests nor outlives its step; any other object as it is."""
    what = ((obj.get("metadata") or {}).get("annotations") or {}).get(GENERATE_ANNOTATION)
    if obj.get("kind") != "Secret" or what is None:
        return obj
    if what != SSH_KEYPAIR:
        raise RunnerError(f"{_describe(obj)} asks for {GENERATE_ANNOTATION}: {what}; the runner makes {SSH_KEYPAIR} only")
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption())
    public = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH) + f" {FIELD_MANAGER}\n".encode()
    files = {SSH_KEY: private, f"{SSH_KEY}.pub": public, "authorized_keys": public}
    return {**obj, "data": {name: base64.b64encode(content).decode() for name, content in files.items()}}


class Failed(Exception):
    """The site failed the criterion (a timeout, a missing operator): the message says what and where."""


class RunnerError(Exception):
    """The runner could not decide the criterion (no such kubeconfig context, the cluster unreachable, an API error)."""


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        where = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{base}{where}/{self.plural}" + (f"/{name}" if name else "")


def _describe(obj: Manifest) -> str:
    meta = obj.get("metadata", {})
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')}"


class Cluster:
    """One cluster's API, through the kubeconfig context the stack's provider uses."""

    def __init__(self, key: str, context: str, api: client.ApiClient):
        self.key, self.context, self.api = key, context, api
        self._kinds: dict[tuple[str, str], Kind] = {}

    @property
    def label(self) -> str:
        return f"cluster {self.key} (context {self.context})"

    def call(self, method: str, path: str, body: Any = None, query: Sequence[tuple[str, str]] = (),
             content_type: str = "application/json", text: bool = False) -> Any:
        """One request; the JSON answer as plain data (or the text, for logs)."""
        response = self.api.call_api(
            path, method, query_params=list(query), body=body, auth_settings=["BearerToken"],
            header_params={"Accept": "text/plain" if text else "application/json", "Content-Type": content_type},
            _preload_content=False, _request_timeout=REQUEST_TIMEOUT_SEC, _return_http_data_only=True,
        )
        data = response.data.decode("utf-8", "replace")
        return data if text else (json.loads(data) if data else {})

    def kind(self, api_version: str, kind: str) -> Kind:
        """Where the API serves a kind (discovery); Failed when the cluster does not serve it."""
        if (api_version, kind) not in self._kinds:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            try:
                served = self.call("GET", path).get("resources", [])
            except ApiException as exc:
                if exc.status != 404:
                    raise
                served = []
            found = [r for r in served if r.get("kind") == kind and "/" not in r.get("name", "")]
            if not found:
                group = api_version.split("/", 1)[0] if "/" in api_version else "core"
                operator = OPERATORS.get(group, f"the operator that serves {group}")
                raise Failed(f"{kind} {api_version} is not served by {self.label}: {operator} is not installed there")
            self._kinds[(api_version, kind)] = Kind(api_version, kind, found[0]["name"], bool(found[0].get("namespaced")))
        return self._kinds[(api_version, kind)]

    def kind_of(self, obj: Manifest) -> Kind:
        return self.kind(obj["apiVersion"], obj["kind"])

    def apply(self, obj: Manifest) -> None:
        meta = obj["metadata"]
        self.call("PATCH", self.kind_of(obj).path(meta.get("namespace"), meta["name"]), body=obj,
                  query=[("fieldManager", FIELD_MANAGER), ("force", "true")], content_type="application/apply-patch+yaml")

    def get(self, obj: Manifest) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.call("GET", self.kind_of(obj).path(meta.get("namespace"), meta["name"]))

    def delete(self, obj: Manifest) -> None:
        """Delete an object and, in the background, what it owns (its pods); gone already is fine."""
        meta = obj["metadata"]
        try:
            self.call("DELETE", self.kind_of(obj).path(meta.get("namespace"), meta["name"]),
                      body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
        except ApiException as exc:
            if exc.status != 404:
                raise

    def logs(self, namespace: str, selector: str) -> list[str]:
        """The log of every container of the pods that match, oldest pod first (a retried pod's results win)."""
        pods = self.call("GET", f"/api/v1/namespaces/{namespace}/pods", query=[("labelSelector", selector)]).get("items", [])
        pods.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        return [
            self.call("GET", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/log",
                      query=[("container", container["name"])], text=True)
            for pod in pods for container in pod.get("spec", {}).get("containers", [])
        ]


def parse_results(log: str) -> dict[str, str]:
    """The `FAB-RESULT key=value` lines of a log, later lines winning."""
    found: dict[str, str] = {}
    for line in log.splitlines():
        line = line.strip()
        if line.startswith(RESULT_PREFIX) and "=" in line:
            key, value = line[len(RESULT_PREFIX):].split("=", 1)
            if key.strip():
                found[key.strip()] = value.strip()
    return found


def _condition(status: Mapping[str, Any], kind: str) -> bool | None:
    """True when the object succeeded, False when it failed, None while it runs."""
    if kind in STATES:
        state = (status.get("applicationState") or {}).get("state")
        done, broke = STATES[kind]
        return False if state in broke else (True if state in done else None)
    succeeded, failed = FINISHED[kind]
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    if failed in true:
        return False
    return True if succeeded in true else None


class Runner:
    """Runs criteria on the clusters of one site. `clusters` maps each cluster key to its kubeconfig context;
    `kubeconfig` is the file (default $KUBECONFIG, else ~/.kube/config). `clock` and `sleep` are injectable for tests."""

    def __init__(self, clusters: Mapping[str, str], kubeconfig: str | None = None, poll_sec: float = 5.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 pull_secret: str | None = None):
        self.contexts = dict(clusters)
        self.pull_secret = pull_secret
        """The site registry's pull Secret, which the jobs' pods name (`registry.pull_secret`), or None."""
        self.kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        self.poll_sec, self.clock, self.sleep = poll_sec, clock, sleep
        self._clusters: dict[str, Cluster | RunnerError] = {}
        self._namespaces: dict[tuple[str, str], bool] = {}
        """(cluster, namespace) -> whether this run created it."""
        self.leftovers: list[str] = []
        """What could not be deleted at the end: said in the report, to be deleted by hand."""

    def cluster(self, key: str) -> Cluster:
        if key not in self._clusters:
            context = self.contexts.get(key)
            try:
                if context is None:
                    raise RunnerError(f"the site has no cluster {key!r}")
                api = config.new_client_from_config(config_file=self.kubeconfig, context=context, persist_config=False)
                self._clusters[key] = Cluster(key, context, api)
            except (ConfigException, OSError) as exc:
                self._clusters[key] = RunnerError(f"cluster {key}: cannot use kubeconfig context {context!r} from "
                                                  f"{self.kubeconfig}: {exc}")
            except RunnerError as exc:
                self._clusters[key] = exc
        found = self._clusters[key]
        if isinstance(found, RunnerError):
            raise found
        return found

    def run(self, criteria: Sequence[Criterion]) -> list[Outcome]:
        """Every criterion's outcome, in the given order; the namespaces this run created are deleted at the end."""
        try:
            return [self.run_one(criterion) for criterion in criteria]
        finally:
            self._delete_namespaces()

    def run_one(self, criterion: Criterion) -> Outcome:
        start = self.clock()
        results: dict[str, str] = {}

        def outcome(status: str, message: str) -> Outcome:
            return Outcome(criterion.phase, criterion.id, status, message, criterion.title, dict(results), criterion.bound,
                           max(0.0, self.clock() - start))

        for index, step in enumerate(criterion.steps):
            try:
                self._run_step(index, step, results)
            except Failed as exc:
                return outcome(FAIL, str(exc))
            except RunnerError as exc:
                return outcome(ERROR, str(exc))
            except ApiException as exc:
                return outcome(ERROR, f"step {index} on {self.cluster(step.cluster).label}: the Kubernetes API answered "
                                      f"{exc.status} {exc.reason}: {_api_message(exc)}")
            except HTTPError as exc:
                return outcome(ERROR, f"step {index}: {self.cluster(step.cluster).label} cannot be reached: {exc}")
        try:
            passed, why = criterion.judge(results)
        except Exception as exc:  # noqa: BLE001  a judge that crashes decides nothing: a bug to report, not a pass
            return outcome(ERROR, f"the judge of {criterion.id} crashed on the results: {exc!r}")
        return outcome(PASS if passed else FAIL, why)

    def _run_step(self, index: int, step: Step, results: dict[str, str]) -> None:
        missing: list[str] = []
        step = dataclasses.replace(step, objects=tuple(with_figures(o, results, missing) for o in step.objects))
        if missing:  # an earlier step did not report what this one follows: it is not run, the judge says why
            results[f"{index}.succeeded"] = "false"
            results[f"{index}.missing"] = ",".join(dict.fromkeys(missing))
            return
        api = self.cluster(step.cluster)
        kind, name = step.decides
        (decides,) = [o for o in step.objects if o["kind"] == kind and o["metadata"]["name"] == name]
        ordered = apply_order(step)
        for obj in ordered:  # every kind is looked up before anything is created: a missing operator creates nothing
            api.kind_of(obj)
        declared = {o["metadata"]["name"] for o in step.objects if o["kind"] == "Namespace"}
        for namespace in dict.fromkeys(o["metadata"].get("namespace") for o in ordered):
            if namespace and namespace not in declared:
                self._ensure_namespace(api, namespace)
        # The pull Secret after what the step creates (its namespaces), before any workload; deleted with the step.
        setup = sum(1 for obj in ordered if obj["kind"] in SETUP_KINDS)
        ordered[setup:setup] = self._pull_secret_copies(api, ordered, declared)
        with self._applied(api) as applied:
            deadline = self.clock() + step.timeout_sec
            for obj in ordered:
                applied.append(obj)  # before the call: a request that times out may still have created it
                api.apply(generated(obj))
                if obj["metadata"]["name"] in step.background:
                    self._wait_started(api, obj, deadline, step.timeout_sec)
            succeeded = self._wait_finished(api, decides, deadline, step.timeout_sec)
            results[f"{index}.succeeded"] = "true" if succeeded else "false"
            for log in api.logs(decides["metadata"]["namespace"], _pod_selector(kind, name)):
                results.update({f"{index}.{k}": v for k, v in parse_results(log).items()})

    def _pull_secret_copies(self, api: Cluster, ordered: list[Manifest], declared: set[str]) -> list[Manifest]:
        """The site's pull Secret, copied from PULL_SECRET_SOURCE, for each namespace of the step that does not hold it:
        one the step declares, one this run created, one that exists without it. None without a pull Secret, and never
        one over a namespace's own (a team namespace holds the program's)."""
        if self.pull_secret is None:
            return []
        path = f"/api/v1/namespaces/{{}}/secrets/{self.pull_secret}"
        missing = []
        for namespace in dict.fromkeys(o["metadata"].get("namespace") for o in ordered):
            if not namespace:
                continue
            if namespace not in declared:
                try:
                    api.call("GET", path.format(namespace))
                    continue
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            missing.append(namespace)
        if not missing:
            return []
        try:
            source = api.call("GET", path.format(PULL_SECRET_SOURCE))
        except ApiException as exc:
            if exc.status != 404:
                raise
            raise RunnerError(f"the pull Secret {self.pull_secret} (registry.pull_secret) is not in {PULL_SECRET_SOURCE} on "
                              f"{api.label}: the jobs' pods name it; deploy the stack first") from exc
        return [{"apiVersion": "v1", "kind": "Secret", "type": source.get("type", "kubernetes.io/dockerconfigjson"),
                 "metadata": {"name": self.pull_secret, "namespace": namespace, "labels": dict(CREATED_BY)},
                 "data": source.get("data") or {}} for namespace in missing]

    @contextlib.contextmanager
    def _applied(self, api: Cluster) -> Iterator[list[Manifest]]:
        """The objects applied in the block, deleted when it ends however it ends (last applied first)."""
        applied: list[Manifest] = []
        try:
            yield applied
        finally:
            for obj in reversed(applied):
                try:
                    api.delete(obj)
                except (ApiException, HTTPError, Failed) as exc:
                    self.leftovers.append(f"{_describe(obj)} on {api.label}: {exc}")

    def _wait_started(self, api: Cluster, obj: Manifest, deadline: float, timeout: int) -> None:
        """A background Job is under way (a pod ready) before the measured object starts; other kinds are only applied."""
        if obj["kind"] != "Job":
            return
        while not ((status := api.get(obj).get("status") or {}).get("ready") or _condition(status, "Job") is not None):
            self._tick(obj, api, deadline, timeout, "start")

    def _wait_finished(self, api: Cluster, obj: Manifest, deadline: float, timeout: int) -> bool:
        while (done := _condition(api.get(obj).get("status") or {}, obj["kind"])) is None:
            self._tick(obj, api, deadline, timeout, "finish")
        return done

    def _tick(self, obj: Manifest, api: Cluster, deadline: float, timeout: int, what: str) -> None:
        if self.clock() >= deadline:
            raise Failed(f"{_describe(obj)} on {api.label} did not {what} within {timeout} s")
        self.sleep(self.poll_sec)

    def _ensure_namespace(self, api: Cluster, name: str) -> None:
        if (api.key, name) in self._namespaces:
            return
        try:
            found = api.call("GET", f"/api/v1/namespaces/{name}")
            if (found.get("status") or {}).get("phase") == "Terminating":
                raise RunnerError(f"namespace {name} on {api.label} is still terminating (from an earlier run); "
                                  "run again once it is gone")
            self._namespaces[(api.key, name)] = False
            return
        except ApiException as exc:
            if exc.status != 404:
                raise
        labels = {**CREATED_BY, **RESTRICTED}
        try:
            api.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": name, "labels": labels}})
            self._namespaces[(api.key, name)] = True
        except ApiException as exc:
            if exc.status != 409:  # created meanwhile by someone else: theirs to keep
                raise
            self._namespaces[(api.key, name)] = False

    def _delete_namespaces(self) -> None:
        for (key, name), created in reversed(list(self._namespaces.items())):
            if not created:
                continue
            api = self.cluster(key)
            try:
                api.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            except (ApiException, HTTPError, Failed) as exc:
                self.leftovers.append(f"Namespace {name} on {api.label}: {exc}")
        self._namespaces.clear()


def _api_message(exc: ApiException) -> str:
    """The Status message of an API error, else its body."""
    try:
        return str(json.loads(exc.body).get("message") or exc.body)
    except (TypeError, ValueError, AttributeError):
        return str(exc.body)
