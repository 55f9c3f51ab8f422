"""What each roadmap phase requires of its completion check (docs/roadmap.md, "Required criteria and waivers"), and what
becomes of the criteria that cannot run on a site: no phase passes by skipping.

A phase requires the criteria of its REQUIREMENTS rows, each a family of criterion ids (`01-nccl-under-load` stands for
`01-nccl-under-load-<cluster>`): some on every site, some where the site configures the feature they check (the
metrics stack, profiles, MultiKueue). The builders (fabctl/verify/criteria/) give, per criterion, a `Criterion` to run,
`NotApplicable(id, reason)` when there is nothing to check (a flow whose clients are all outside the site), or
`(id, reason)` when it cannot run on the site (one training node for a two-node test, no published floor for the GPUs).
A required criterion that cannot run makes its phase INCOMPLETE unless the stack file waives it
(`acceptance.waivers.<id>: <reason>`), which the report repeats; one the phase does not require is skipped. Each phase has
a row required on every site, so a phase never passes with nothing run. docs/roadmap.md's table of required criteria is
generated from REQUIREMENTS (`python -m fabctl.roadmap_table`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from components.config import SiteConfig
from fabctl.verify.model import Built, Criterion, NotApplicable
from fabctl.verify.report import INCOMPLETE, SKIPPED, WAIVED, Outcome

EVERY_SITE = "every site"


def _always(_site: SiteConfig) -> bool:
    return True


@dataclass(frozen=True)
class Requirement:
    """One row of a phase's required criteria."""

    phase: int
    family: str
    """The criterion id, or the start of the ids of its instances (`01-gpus` for `01-gpus-<cluster>-<node>`)."""
    proves: str
    """What passing proves, in one line (docs/roadmap.md)."""
    when: str = EVERY_SITE
    """Where the phase requires it, as docs/roadmap.md says it."""
    applies: Callable[[SiteConfig], bool] = field(default=_always, compare=False)
    """Whether the phase requires it on a site (`when` as code)."""
    per: str = ""
    """What its instances are named by, as the ids show it (`<cluster>-<node>`); empty for one criterion."""

    @property
    def ids(self) -> str:
        """The ids it stands for, as docs show them: `01-gpus-<cluster>-<node>`."""
        return f"{self.family}-{self.per}" if self.per else self.family

    def matches(self, cid: str) -> bool:
        return cid == self.family or cid.startswith(f"{self.family}-")


def _observability(site: SiteConfig) -> bool:
    return site.observability is not None


def _profiles(site: SiteConfig) -> bool:
    return bool(site.profiles)


def _gpu_notebooks(site: SiteConfig) -> bool:
    return site.compute.jupyterhub.gpu_notebooks is not None


def _inference_extension(site: SiteConfig) -> bool:
    return site.inference is not None and site.inference.routing == "inference-extension"


def _global_services(site: SiteConfig) -> bool:
    return site.global_services_enabled()


def _weights_over_ib(site: SiteConfig) -> bool:
    inference = site.inference
    return inference is not None and site.gpu[inference.cluster].infiniband.inference_weights_over_ib


def _spark_rapids(site: SiteConfig) -> bool:
    return any(spec.spark_rapids is not None for spec in site.gpu.values())


def _remote_training(site: SiteConfig) -> bool:
    return bool(site.remote_teams(linked_only=True))


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement(1, "01-gpus", "every GPU node recognises the GPUs the config gives it", per="<cluster>-<node>"),
    Requirement(1, "01-nccl-under-load", "multi-node NCCL all_reduce over InfiniBand (never sockets) reaches the floor for "
                "its GPUs and interconnect at the largest message, and loses at most the bound under AIStor load",
                per="<cluster>"),
    Requirement(1, "01-storage-baseline", "warp PUT and GET from every training node at once over the Ethernet path to AIStor "
                "reach the floor derived from the nodes' NIC speed, per node and together", per="<cluster>"),
    Requirement(1, "01-s3-readwrite", "a team's job on the training nodes writes and reads AIStor over the internal endpoint",
                per="<cluster>"),
    Requirement(1, "01-flow", "every flow of the flow table admits its clients (those a probe pod can stand for)",
                per="<flow>"),
    Requirement(1, "01-denied", "what no flow admits is dropped (a sample: the ClusterMesh API servers)",
                per="<source>-to-<target>"),
    Requirement(2, "02-inference-call", "a compute pod calls a model through the fixed URL with a team's token"),
    Requirement(2, "02-inference-unauthenticated", "the gateway refuses a call without a token"),
    Requirement(2, "02-serving-slo", "each served model meets its latency targets under load through the gateway (P90 time to "
                "first token, P90 inter-token latency, errors; throughput where set)", per="<model>"),
    Requirement(2, "02-inference-rate-limit", "a team above its rate is limited"),
    Requirement(3, "03-serving-loop", "the serving-loop DAG, triggered through Airflow's API as a team member, runs end to end: "
                "Kueue admits its training Job, the Iceberg tag pins the data, the model is published with its pin, the "
                "canary is served (with Argo CD, synced) and the gateway answers", per="<team>"),
    Requirement(4, "04-s3-team-isolation", "one team's keys cannot touch another team's data (sites of two teams or more)"),
    Requirement(4, "04-team-rbac", "a team's group runs work in its own namespaces only, on every Kueue cluster",
                per="<cluster>"),
    Requirement(4, "04-metrics", "every cluster's Prometheus holds its components' metrics and a DCGM series per GPU",
                "the site deploys the metrics stack (`observability`)", _observability, "<cluster>"),
    Requirement(4, "04-profile-in-force", "the teams' GPU quotas are those of the profile in force",
                "the site has `profiles`", _profiles),
    Requirement(4, "04-gpu-notebooks", "each team's GPU notebooks are held to its shares, and a whole GPU is refused",
                "the site has GPU notebooks (`compute.jupyterhub.gpu_notebooks`)", _gpu_notebooks),
    Requirement(4, "04-vllm-recovery", "an evicted vLLM pod is replaced within its disruption budget"),
    Requirement(5, "05-submission", "a job submitted as the submission contract says (unchanged namespace and LocalQueue) is "
                "admitted: with MultiKueue, on a worker"),
    Requirement(5, "05-inference-extension", "the same URL and team token answer behind the endpoint picker",
                "model-aware routing is on (`inference.routing: inference-extension`)", _inference_extension),
    Requirement(5, "05-global-services", "each client cluster reaches Polaris by its cluster-local name",
                "global services are on (`global_services`)", _global_services, "<cluster>"),
    Requirement(5, "05-storage-over-ib", "an inference pod reaches AIStor's S3 over the IPoIB network the weights load over",
                "weights load over InfiniBand (`gpu.<cluster>.infiniband.inference_weights_over_ib`)", _weights_over_ib, "<cluster>"),
    Requirement(5, "05-remote-training", "a peer site's team that trains here is admitted in its namespace, as the peer's "
                "contract (`training.remote_submission`) says", "a linked peer's teams train here "
                "(`federation.peers.<site>.remote_training`)", _remote_training, "<peer>-<team>"),
    Requirement(5, "05-spark-rapids", "the SparkApplication Airflow submits, admitted by Kueue in a team's namespace, runs a "
                "query the RAPIDS plugin takes onto the GPU (Gpu operators in its plan) and gives the expected rows",
                "Spark RAPIDS runs on a GPU cluster (`gpu.<cluster>.spark_rapids`)", _spark_rapids, "<cluster>"),
)
"""Every phase's required criteria, phase by phase in report order."""


class UnknownCriterion(Exception):
    """A builder made a criterion no requirement row covers: a bug (every criterion belongs to a row)."""


def requirement(cid: str) -> Requirement:
    """The row a criterion id belongs to (the longest family that matches)."""
    found = sorted((r for r in REQUIREMENTS if r.matches(cid)), key=lambda r: len(r.family), reverse=True)
    if not found:
        raise UnknownCriterion(f"criterion {cid} belongs to no row of fabctl/verify/gates.py REQUIREMENTS: add its row")
    return found[0]


def required_rows(site: SiteConfig, phase: int) -> list[Requirement]:
    """The rows the phase requires on this site."""
    return [r for r in REQUIREMENTS if r.phase == phase and r.applies(site)]


@dataclass(frozen=True)
class Planned:
    """What a phase's check will do with one criterion, before anything runs."""

    phase: int
    id: str
    status: str
    """`run`, or the outcome it has already: INCOMPLETE, WAIVED or SKIPPED."""
    reason: str = ""
    """Why it does not run (the builder's reason), and for a waived one the waiver's."""
    required: bool = True
    waiver: str = ""


RUN = "run"


@dataclass(frozen=True)
class PhasePlan:
    """A phase's check on a site: the criteria to run, what is known before running, and the waivers that do not fit."""

    phase: int
    run: list[Criterion]
    planned: list[Planned]
    """Every criterion of the phase, in the builders' order, with what will become of it."""
    waiver_errors: list[str]
    """One line per waiver of this phase that waives nothing the phase may waive (`acceptance.waivers.<id>: ...`)."""

    def held(self) -> list[Outcome]:
        """The outcomes known before running: incomplete, waived and skipped criteria."""
        return [Outcome(p.phase, p.id, p.status, _message(p)) for p in self.planned if p.status != RUN]


def _message(planned: Planned) -> str:
    if planned.status == WAIVED:
        return f"waived: {planned.waiver} (acceptance.waivers); not run because {planned.reason}"
    if planned.status == INCOMPLETE:
        return (f"required by phase {planned.phase:02d} and not run: {planned.reason}; make it runnable, or waive it with "
                f"a reason in acceptance.waivers.{planned.id}")
    return planned.reason


def plan(site: SiteConfig, phase: int, built: Sequence[Built]) -> PhasePlan:
    """What the phase's check does on the site with what the builders gave: run the criteria, and per criterion that
    cannot run, INCOMPLETE (required), WAIVED (required, waived) or SKIPPED (not required, or nothing to check); a row
    the phase requires on the site of which the builders made nothing is INCOMPLETE too."""
    waivers = {cid: reason for cid, reason in site.acceptance.waivers.items() if cid.startswith(f"{phase:02d}-")}
    run: list[Criterion] = []
    planned: list[Planned] = []
    for item in built:
        if isinstance(item, Criterion):
            requirement(item.id)
            run.append(item)
            planned.append(Planned(phase, item.id, RUN, required=requirement(item.id).applies(site)))
        elif isinstance(item, NotApplicable):
            requirement(item.id)
            planned.append(Planned(phase, item.id, SKIPPED, item.reason, required=False))
        else:
            cid, reason = item
            if not requirement(cid).applies(site):
                planned.append(Planned(phase, cid, SKIPPED, reason, required=False))
            elif cid in waivers:
                planned.append(Planned(phase, cid, WAIVED, reason, waiver=waivers[cid]))
            else:
                planned.append(Planned(phase, cid, INCOMPLETE, reason))
    for row in required_rows(site, phase):  # a required row the builders made nothing of cannot pass by being absent
        if not any(row.matches(p.id) for p in planned):
            reason = f"the builders made no {row.ids} on this site (a bug: its row requires it here)"
            status = WAIVED if row.family in waivers else INCOMPLETE
            planned.append(Planned(phase, row.family, status, reason, waiver=waivers.get(row.family, "")))
    return PhasePlan(phase, run, planned, _waiver_errors(phase, waivers, planned))


def _waiver_errors(phase: int, waivers: dict[str, str], planned: list[Planned]) -> list[str]:
    """A waiver must waive a required criterion of the phase that cannot run: one of a criterion that runs, that the
    phase does not require, or that the site does not have would hide a change of the site, so it is refused."""
    by_id = {p.id: p for p in planned}
    waivable = sorted(p.id for p in planned if p.status in (INCOMPLETE, WAIVED))
    errors = []
    for cid in sorted(waivers):
        found = by_id.get(cid)
        key = f"acceptance.waivers.{cid}"
        if found is None:
            could = ", ".join(waivable) if waivable else "none: every required criterion runs"
            errors.append(f"{key}: phase {phase:02d} has no criterion {cid} on this site; the criteria that can be waived: {could}")
        elif found.status == RUN:
            errors.append(f"{key}: {cid} runs on this site, so it passes or fails on its figures: remove the waiver")
        elif found.status == SKIPPED:
            errors.append(f"{key}: phase {phase:02d} does not require {cid} on this site ({found.reason}): remove the waiver")
    return errors
