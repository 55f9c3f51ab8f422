"""Cross-field checks of federation: known sites, their declared ranges outside this site's, remote
training only on replicated data (DESIGN section 2: raw data stays in its site; remote-site GPUs are used only
for data that was replicated there), and models kept for a peer's warm standby in a prefix of their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config import names
from components.config.checks.network import site_ranges
from components.config.checks.training import lending_problems
from components.config.problems import Problem, format_path

if TYPE_CHECKING:
    from components.config.views import SiteViews


def federation_problems(site: SiteViews) -> Iterator[Problem]:
    federation = site.federation
    for role, sites in (("consumers", federation.consumers), ("peers", federation.peers)):
        if site.name in sites:
            yield ("federation", role, site.name), f"{site.name!r} is this site; a site does not federate with itself"
    others = ", ".join(federation.sites()) or "none"
    for i, other in enumerate(federation.linked):
        if other in federation.linked[:i]:
            yield ("federation", "linked", i), f"{other!r} is listed twice"
        elif other not in federation.sites():
            yield ("federation", "linked", i), f"{other!r} is neither a consumer nor a peer; federated sites: {others}"
    for other in sorted(federation.ranges):
        if other not in federation.sites():
            yield ("federation", "ranges", other), f"{other!r} is neither a consumer nor a peer; federated sites: {others}"
    for other in federation.sites():
        if other != site.name and not federation.ranges.get(other):
            yield ("federation", "ranges"), (
                f"has no ranges for {other!r}: its traffic arrives from outside this site's clusters and is denied "
                "unless its source ranges are declared"
            )
    for other, ranges in sorted(federation.ranges.items()):
        for i, cidr in enumerate(ranges):
            for path, own in site_ranges(site):
                if cidr.overlaps(own):
                    yield ("federation", "ranges", other, i), f"{cidr} overlaps {format_path(path)} ({own}) of this site"
    has_gold = any(bucket.data_class == "gold" for bucket in site.storage.buckets.values())
    for name, consumer in sorted(federation.consumers.items()):
        if site.replicates_gold(name) and not has_gold:
            said = "true" if consumer.replicate_gold else "unset (on from phase 05)"
            yield ("federation", "consumers", name, "replicate_gold"), (
                f"{said} copies this site's gold to {name}, but storage.buckets has no bucket of class gold: "
                "add one, or set replicate_gold: false"
            )
        for i, team in enumerate(consumer.remote_training_teams):
            if team not in site.teams:
                yield ("federation", "consumers", name, "remote_training_teams", i), f"{team!r} is not a team; teams: {', '.join(sorted(site.teams))}"
            # Before phase 05 remote training is refused as such (components/config/checks/phases.py), unless it is an
            # early feature: then its gold must be replicated too.
            elif not site.replicates_gold(name) and (site.phase >= 5 or "remote-training" in site.early_features):
                yield ("federation", "consumers", name, "remote_training_teams", i), (
                    f"team {team!r} cannot train on {name}'s GPUs: no data is replicated there; remote GPUs are used only "
                    "for replicated (gold) data, so set replicate_gold"
                )
        if consumer.replicate_models:
            job, limit = names.MODELS_COPY_JOB(name), names.MODELS_COPY_JOB.limit.max_length
            if len(job) > limit:
                yield ("federation", "consumers", name, "replicate_models"), (
                    f"true needs the CronJob {job!r} ('models-to-' + consumer), which has {len(job)} characters; Kubernetes "
                    f"allows at most {limit}: models are copied only to a consumer whose name has at most "
                    f"{names.MODELS_COPY_JOB.room()} characters"
                )
            if not site.replicated_models():
                yield ("federation", "consumers", name, "replicate_models"), (
                    f"true copies the models this site serves (inference.models.<model>.source) to {name}, but it serves "
                    f"none of its own (a model under {names.MODEL_REPLICAS}/ is a peer's and stays): serve a model here, or "
                    "set replicate_models: false"
                )
    yield from _hosted_team_problems(site)
    yield from _standby_problems(site)


def _standby_problems(site: SiteViews) -> Iterator[Problem]:
    """Peers' models kept under `replicas/<peer>/` of the models bucket: no team owns that folder, and a model served from
    it names a peer whose models this site keeps."""
    folder, standby = names.MODEL_REPLICAS, site.federation.standby_peers()
    if standby and folder in site.teams:
        yield ("teams", folder), (
            f"a team named {folder!r} owns the prefix {folder}/ of the models bucket, where this site keeps its peers' models "
            f"(federation.peers.{standby[0]}.standby_models): rename the team, so that neither overwrites the other"
        )
    if site.inference is None:
        return
    for model, spec in sorted(site.inference.models.items()):
        first, _, rest = spec.source.strip("/").partition("/")
        peer = rest.partition("/")[0]
        if first == folder and peer not in standby:
            yield ("inference", "models", model, "source"), (
                f"{spec.source!r} is under {folder}/, where this site keeps the models of the peers it stands by for, but "
                f"it keeps no models of {peer!r}; peers whose models it keeps (federation.peers.<peer>.standby_models: true): "
                f"{', '.join(standby) or 'none'}"
            )


def _hosted_team_problems(site: SiteViews) -> Iterator[Problem]:
    """A peer's team trains on GPU clusters of this site, with quotas Kueue accepts, in a namespace whose name fits."""
    gpus = ", ".join(sorted(site.gpu))
    for peer, spec in sorted(site.federation.peers.items()):
        for team, quotas in sorted(spec.remote_training.items()):
            path = ("federation", "peers", peer, "remote_training", team)
            namespace = names.REMOTE_TEAM_NAMESPACE(team, peer)
            limit = names.REMOTE_TEAM_NAMESPACE.limit.max_length
            if len(namespace) > limit:
                yield path, (
                    f"namespace {namespace!r} ('remote-' + peer + '-' + team) has {len(namespace)} characters; Kubernetes "
                    f"allows at most {limit}: the peer's and the team's names together may have at most {limit - 8}"
                )
            if not quotas:
                yield path, f"gives {peer}'s team {team!r} no GPU cluster; name the clusters it trains on: {gpus}"
            for cluster, quota in sorted(quotas.items()):
                if cluster not in site.gpu:
                    yield (*path, cluster), f"{cluster!r} is not a GPU cluster with a gpu section; known: {gpus}"
                yield from lending_problems(quota, (*path, cluster))
