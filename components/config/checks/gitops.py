"""Cross-field checks of serving through Git (issue 18): inference delivered by Argo CD needs Argo CD on compute and the
serving repository it applies (components/engines/argocd.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.problems import Problem

if TYPE_CHECKING:
    from components.config.views import SiteViews


def gitops_problems(site: SiteViews) -> Iterator[Problem]:
    inference, argocd = site.inference, site.compute.argocd
    if inference is None or inference.delivery != "argocd":
        return
    path = ("inference", "delivery")
    if not argocd.enabled:
        yield path, (
            "'argocd' needs Argo CD, but compute.argocd.enabled is false: set compute.argocd.enabled: true, or keep "
            "delivery: pulumi"
        )
    if argocd.serving_repo is None:
        yield path, (
            "'argocd' needs the serving repository Argo CD applies, but compute.argocd.serving_repo is not set: add it "
            "(its url, on the site's Git server), or keep delivery: pulumi"
        )
