"""Cross-field checks of `acceptance` (docs/acceptance.md): the probes' team and the serving-loop run name what the
site has, and the NCCL message sizes are in order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.problems import Problem

if TYPE_CHECKING:
    from components.config.views import SiteViews


def acceptance_problems(site: SiteViews) -> Iterator[Problem]:
    acceptance, teams = site.acceptance, sorted(site.teams)
    if acceptance.team is not None and acceptance.team not in site.teams:
        yield (("acceptance", "team"), (f"{acceptance.team} is not a team of the site; name one of {', '.join(teams)}, or "
                                        "leave it out for the first"))
    if acceptance.nccl_max_message_mib is not None and acceptance.nccl_min_message_mib > acceptance.nccl_max_message_mib:
        yield (("acceptance", "nccl_min_message_mib"), (f"{acceptance.nccl_min_message_mib} is above nccl_max_message_mib "
                                                        f"({acceptance.nccl_max_message_mib}); the smallest message must not exceed the largest"))
    run = acceptance.serving_loop
    if run is None:
        return
    if run.team not in site.teams:
        yield (("acceptance", "serving_loop", "team"), f"{run.team} is not a team of the site; name one of {', '.join(teams)}")
    models = sorted(site.inference.models) if site.inference is not None else []
    if run.model not in models:
        served = f"name one of {', '.join(models)}" if models else "the site serves none (no `inference` section)"
        yield (("acceptance", "serving_loop", "model"), f"{run.model} is not a served model; {served}")
