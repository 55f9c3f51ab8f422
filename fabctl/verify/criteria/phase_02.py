"""Phase 02, inference: a compute pod calls the first model through the gateway with a team's token, the gateway
refuses a call without one, each served model meets its serving SLO under load (phase_02_slo.py) and the gateway limits
the team above its rate."""

from __future__ import annotations

import math
from collections.abc import Mapping

from fabctl.verify.criteria.blocks import Site, _client_env, _figure, _first_model, _needs_client, _probe_step, _ran, served_name
from fabctl.verify.criteria.phase_02_slo import serving_slo
from fabctl.verify.model import Criterion, Judgement


def phase_02(site: Site) -> list[Criterion | tuple[str, str]]:
    ids = ("02-inference-call", "02-inference-unauthenticated", "02-inference-rate-limit")
    if site.config.inference is None:
        return [(cid, "the site serves no model (no `inference` section): phase 02 adds it") for cid in ids] + serving_slo(site)
    model = _first_model(site)
    # The load tests run before the burst, which spends the team's rate for the minute it is sent in.
    return [inference_call(site, model), inference_unauthenticated(site, model), *serving_slo(site), inference_rate_limit(site, model)]


def inference_call(site: Site, model: str, cid: str = "02-inference-call", phase: int = 2) -> Criterion:
    """From a compute pod: a token of the team's gateway client, then a chat completion on the model's URL."""
    team, url = site.team(), site.gateway_url(model)
    step = _probe_step(site, site.compute(), cid, "inference-call", ["chat", url, served_name(site, model)], env=_client_env(site, team))

    def judge(results: Mapping[str, str]) -> Judgement:
        token, chat = results.get("0.token_status"), results.get("0.chat_status")
        if token is None:
            return False, _ran(results, 0, "the inference probe")
        if token != "200":
            return False, f"Keycloak refused team {team}'s client credentials ({token}) at {site.token_url()}"
        if chat != "200":
            return False, f"{url}/chat/completions answered {chat} to team {team}'s token; 200 expected"
        return True, f"team {team}'s token was accepted and {model} answered at {url}"

    return Criterion(phase, cid, f"a compute pod calls {model} through {url} with team {team}'s token", (step,), judge,
                     needs=(_needs_client(site, team),))


def inference_unauthenticated(site: Site, model: str) -> Criterion:
    cid, url = "02-inference-unauthenticated", site.gateway_url(model)
    step = _probe_step(site, site.compute(), cid, "inference-anonymous", ["chat-anonymous", url, served_name(site, model)])

    def judge(results: Mapping[str, str]) -> Judgement:
        chat = results.get("0.chat_status")
        if chat is None:
            return False, _ran(results, 0, "the inference probe")
        if chat != "401":
            return False, f"{url}/chat/completions answered {chat} without a token; 401 expected"
        return True, f"{url} refused a call without a token (401)"

    return Criterion(2, cid, f"the gateway refuses a call to {model} without a token", (step,), judge, "status == 401")


def inference_rate_limit(site: Site, model: str) -> Criterion:
    """The team's requests per minute, and a tenth more (at least 10), at once: some are limited (429)."""
    inference = site.config.inference
    assert inference is not None
    cid, team, url = "02-inference-rate-limit", site.team(), site.gateway_url(model)
    rate = inference.team_requests_per_minute.get(team, inference.requests_per_minute)
    burst = rate + max(10, math.ceil(rate / 10))
    step = _probe_step(site, site.compute(), cid, "inference-burst", ["burst", url, str(burst)], env=_client_env(site, team))

    def judge(results: Mapping[str, str]) -> Judgement:
        ok, limited, other = (_figure(results, f"0.{k}") for k in ("ok", "limited", "other"))
        if ok is None or limited is None or other is None:
            return False, _ran(results, 0, "the burst probe")
        if results.get("0.token_status") != "200":
            return False, f"Keycloak refused team {team}'s client credentials ({results.get('0.token_status')})"
        if limited == 0:
            return False, f"{burst} requests at once by team {team}: none limited (429); its rate is {rate} a minute"
        if ok > rate:
            return False, f"{int(ok)} of {burst} requests by team {team} were answered; its rate is {rate} a minute"
        return True, f"{int(ok)} answered, {int(limited)} limited (429) of {burst} requests by team {team} (rate {rate} a minute)"

    return Criterion(2, cid, f"team {team} is limited above {rate} requests a minute to {model}", (step,), judge,
                     f"answered <= {rate} a minute, some 429", needs=(_needs_client(site, team),))
