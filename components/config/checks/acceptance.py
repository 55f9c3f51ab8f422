"""Cross-field checks of `acceptance` (docs/acceptance.md): the probes' team, the serving-loop run and the serving SLO's
models name what the site has, the NCCL message sizes are in order and each load test's requests fit its model."""

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
    yield from _serving_slo_problems(site)
    run = acceptance.serving_loop
    if run is None:
        return
    if run.team not in site.teams:
        yield (("acceptance", "serving_loop", "team"), f"{run.team} is not a team of the site; name one of {', '.join(teams)}")
    models = sorted(site.inference.models) if site.inference is not None else []
    if run.model not in models:
        served = f"name one of {', '.join(models)}" if models else "the site serves none (no `inference` section)"
        yield (("acceptance", "serving_loop", "model"), f"{run.model} is not a served model; {served}")
    loop = site.teams[run.team].serving_loop if run.team in site.teams else None
    if loop is not None and run.features not in loop.features:
        yield (("acceptance", "serving_loop", "features"), (f"{run.features} is not a feature set of team {run.team}; name one "
                                                            f"of {', '.join(sorted(loop.features))} "
                                                            f"(teams.{run.team}.serving_loop.features)"))


def _serving_slo_problems(site: SiteViews) -> Iterator[Problem]:
    """Each model of `serving_slo_models` is served, and each served model's load-test request (prompt and output) fits
    its context (vLLM refuses a longer one, which would count as errors)."""
    acceptance = site.acceptance
    models = site.inference.models if site.inference is not None else {}
    for key in sorted(acceptance.serving_slo_models):
        if key not in models:
            served = f"name one of {', '.join(sorted(models))}" if models else "the site serves none (no `inference` section)"
            yield (("acceptance", "serving_slo_models", key), f"{key} is not a served model; {served}")
    for key, model in sorted(models.items()):
        own = acceptance.serving_slo_models.get(key)
        prompt = own.input_tokens if own is not None and own.input_tokens is not None else acceptance.serving_slo_input_tokens
        output = own.output_tokens if own is not None and own.output_tokens is not None else acceptance.serving_slo_output_tokens
        if prompt + output > model.max_context:
            where = (("acceptance", "serving_slo_models", key, "input_tokens") if own is not None and own.input_tokens is not None
                     else ("acceptance", "serving_slo_input_tokens"))
            yield (where, (f"{prompt} prompt and {output} output tokens exceed {key}'s max_context ({model.max_context}); "
                           f"give {key} shorter requests in acceptance.serving_slo_models.{key}"))
