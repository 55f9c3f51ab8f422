"""What the inference gateway's rate limits can hold, checked in the config: the teams' own rates."""

from __future__ import annotations

from helpers import config_errors
from small_site import add_team, small_site

from components.config import parse_site


def site_with_teams(count: int, own_rates: int = 0) -> dict:
    site = small_site(teams=())
    for n in range(count):
        add_team(site, f"team{n}")
    site["inference"]["team_requests_per_minute"] = {f"team{n}": 100 for n in range(own_rates)}
    return site


def test_fails_when_more_teams_have_their_own_rate_than_the_gateway_holds():
    assert config_errors(site_with_teams(16, own_rates=16)) == [(
        "fab-platform:site.inference.team_requests_per_minute: 16 teams have their own rate; at most 15 can (Envoy Gateway's "
        "16 local rate limit rules hold one per team with its own rate and the default); give the others the default "
        "requests_per_minute"
    )]


def test_the_gateway_holds_15_teams_with_their_own_rate():
    site = parse_site(site_with_teams(16, own_rates=15))
    assert len(site.inference.team_requests_per_minute) == 15
