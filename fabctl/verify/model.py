"""What `fabctl verify` runs: each roadmap phase's completion check (docs/roadmap.md) as criteria, each criterion a
sequence of steps of Kubernetes objects applied to one cluster and judged by what they report.

The builders (fabctl/verify/criteria/, a module per phase) make criteria from the site config; the runner
(fabctl/verify/runner.py) applies them to the live clusters, waits, reads the results, cleans up and reports
(fabctl/verify/report.py). Nothing here talks to a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Manifest = dict[str, Any]
"""One Kubernetes object as applied: apiVersion, kind, metadata (name, namespace, labels), spec."""

GENERATE_ANNOTATION = "fab.internal/verify-generate"
"""On a Secret of a step: what the runner puts in its `data` just before applying it (fabctl/verify/runner.py
`generated`), so that no credential is in the rendered manifests. `ssh-keypair`: a fresh ed25519 key pair."""
SSH_KEYPAIR = "ssh-keypair"
SSH_KEY = "id_ed25519"
"""The key pair's file names: `id_ed25519` (OpenSSH private key), `id_ed25519.pub` and `authorized_keys` (its public
key). ed25519, which the image's OpenSSH (Ubuntu 22.04's 8.9p1) accepts as host key and user key."""

RESULT_PREFIX = "FAB-RESULT "
"""A job reports a measured value by printing `FAB-RESULT <key>=<value>` on a line of its own (in the deciding pod's
log); the runner collects these lines into the step's results."""


@dataclass(frozen=True)
class Step:
    """Objects applied together on one cluster; the step is done when `decides` (a Job, MPIJob, JobSet, TrainJob or
    SparkApplication among them, by kind and name) has finished. Objects in `background` (a load generator) run beside it and are deleted with it."""

    cluster: str
    """Config key of the cluster the step runs on (its kubeconfig context is the cluster's, as for Pulumi)."""
    objects: tuple[Manifest, ...]
    decides: tuple[str, str]
    """(kind, metadata.name) of the object whose completion ends the step and whose pods' logs carry the results."""
    timeout_sec: int
    background: tuple[str, ...] = ()
    """metadata.name of the objects started before the others and left running until `decides` finishes."""


Judgement = tuple[bool, str]
"""Pass or fail, and one line saying why (the measured figures against the bound)."""


@dataclass(frozen=True)
class Criterion:
    """One line of a phase's completion check: what is verified, how, and how its results are judged."""

    phase: int
    id: str
    """Stable id, `<phase>-<what>` (for example `01-nccl-under-load`), the JUnit test case name."""
    title: str
    """What is verified, as docs/acceptance.md words it."""
    steps: tuple[Step, ...]
    judge: Callable[[Mapping[str, str]], Judgement] = field(compare=False)
    """Decides from every step's results (`FAB-RESULT` keys, each prefixed by the step index: `0.busbw_gbps`) and
    the runner's own facts (`<i>.succeeded`: `true`/`false` for each step's deciding object)."""
    bound: str = ""
    """The configured bound, as the report shows it (`reduction <= 20 %`); empty when pass is plain success."""
    needs: tuple[str, ...] = ()
    """What the criterion needs on the site beyond what the program deploys (an operator it does not install, a Secret
    the platform team provides), one sentence each, for the report: a failure may mean one of these is missing."""


@dataclass(frozen=True)
class NotApplicable:
    """A criterion with nothing to check on the site (a flow whose clients are all outside it, a team isolation check on a
    site of one team): reported skipped even where its family is required. What cannot run for want of something the
    site lacks is not this, but `(id, reason)`, which a required family turns into INCOMPLETE (fabctl/verify/gates.py)."""

    id: str
    reason: str


Built = Criterion | NotApplicable | tuple[str, str]
"""What a builder returns for one criterion: it to run, nothing to check, or `(id, why it cannot run on the site)`."""
