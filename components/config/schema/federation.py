"""Cross-site federation: consumers of this site's gold, peers whose gold it reads, and their source
ranges (DESIGN section 2: raw data stays in its site, only gold tables are replicated), and models kept at a peer
for a warm-standby serving cluster (the design's DR note: serving is the easiest DR axis).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from components.config.fields import Cidr, DnsLabel, Flag, GroupName, Unique, _Model
from components.config.names import ConsumerKey, PeerKey
from components.config.schema.storage import REPLICABLE_CLASSES
from components.config.schema.teams import TeamQuota


class FederationConsumer(_Model):
    """A site that reads this site's gold tables (and, when asked, keeps its models for a warm standby)."""

    replicate_gold: Flag | None = Field(
        None,
        description="Copy this site's gold buckets to the consumer (its replica bucket of this site). Gold replication is "
        "a phase-05 feature (docs/roadmap.md): true before phase 05 needs `gold-replication` in early_features. Unset: on "
        "from phase 05, off before (the consumer may still query this site's gold through its Trino catalog).",
    )
    remote_training_teams: Annotated[list[DnsLabel], Unique] = Field(
        default_factory=list,
        description="Teams of this site that may train on the consumer's GPU clusters, on the gold replicated there and "
        "nothing else, so replicate_gold must be on. This is the consent the consumer checks: the consumer gives them "
        "quota (its `federation.peers.<this site>.remote_training`). Defaults to none.",
    )
    replicate_models: Flag = Field(
        False,
        description="Copy the models this site serves to the consumer, for a warm-standby serving cluster there (the CronJob "
        "`models-to-<consumer>`, every 15 minutes, into the prefix `replicas/<this site>/` of the consumer's models bucket): "
        "each served model's `source` (`inference.models`), and nothing else of the models bucket, which is all the "
        "replication principal may read there; the teams' other work stays. Only this site's own models leave: the peers' "
        "models it keeps under `replicas/` stay, and a site that serves none of its own is refused. The consumer consents with "
        "its `federation.peers.<this site>.standby_models`; without it the deployment stops once the consumer is linked. "
        "With it, `models-to-<consumer>` must fit a CronJob name (52). Defaults to false: models stay in the site.",
    )


class FederationPeer(_Model):
    """A site whose gold tables this site reads (a Trino catalog) and keeps a replica of (and, when asked, its models)."""

    remote_training: dict[DnsLabel, dict[DnsLabel, TeamQuota]] = Field(
        default_factory=dict,
        description="The peer's teams that train on this site's GPU clusters, on the peer's replicated gold only: team -> "
        "GPU cluster -> quota (none on the other GPU clusters, not even borrowed; profiles do not change it). Once the peer "
        "is `linked`, each gets a namespace `remote-<peer>-<team>` with a LocalQueue on every Kueue cluster, a Keycloak "
        "group of the same name, and S3 keys that read the peer's replica bucket and write the prefix "
        "`remote-<peer>-<team>/` of the checkpoints bucket, nothing else of this site (no catalog, no other bucket). The "
        "peer consents by listing the team in its `federation.consumers.<this site>.remote_training_teams`; a team it "
        "does not list stops the deployment. Defaults to none.",
    )
    standby_models: Flag = Field(
        False,
        description="Keep a copy of the peer's models in this site's models bucket, under the prefix `replicas/<peer>/`, "
        "for a warm standby of the peer's serving: this site's inference reads it like its own models (a model's `source` "
        "`replicas/<peer>/<the peer's source>`), no principal of this site writes it, only the peer's copy job through "
        "the writer this site made for the peer. This is the consent the peer checks before it copies (its "
        "`federation.consumers.<this site>.replicate_models`). No team may be named `replicas` then. Defaults to false.",
    )
    trino_groups: Annotated[list[GroupName], Unique] = Field(
        default_factory=list,
        description="The Keycloak groups whose members may read the peer's gold in Trino (the catalog named after the peer, "
        "`-` as `_`): a team's `team-<team>`, or another group of the realm; `platform-admins` always may. Defaults to "
        "none: nobody else reads it.",
    )


class FederationConfig(_Model):
    """Cross-site federation; off while both maps are empty."""

    organization: str | None = Field(
        None, min_length=1,
        description="Pulumi organization of the other sites' stacks (`<organization>/fab-platform/<site>`): the Pulumi "
        "Cloud organization, or `organization` on a self-managed (DIY) backend. Defaults to this stack's own organization.",
    )
    consumers: dict[ConsumerKey, FederationConsumer] = Field(default_factory=dict, description="Sites reading this site's gold, by site name.")
    peers: dict[PeerKey, FederationPeer] = Field(default_factory=dict, description="Sites whose gold this site reads, by site name.")
    linked: list[DnsLabel] = Field(
        default_factory=list,
        description="Federated sites whose stack is deployed and read through a StackReference. Until a site is listed "
        "here only this side is set up (its principal, its replica bucket), so a site deploys before its peers exist; "
        "listing it adds the gold copy job and the Trino catalog that need its outputs. Defaults to none.",
    )
    ranges: dict[DnsLabel, Annotated[list[Cidr], Unique]] = Field(
        default_factory=dict,
        description="Per federated site, the source ranges its traffic arrives from (its clusters' pod and node ranges, "
        "or what its edge translates them to). Each site's default-deny admits exactly these to the S3 and Polaris "
        "endpoints federation uses. Required for every consumer and peer.",
    )

    def sites(self) -> list[str]:
        """Every federated site: consumers and peers."""
        return sorted({*self.consumers, *self.peers})

    def replicated_classes(self) -> frozenset[str]:
        """The bucket classes that leave the site: gold, and models once a consumer has `replicate_models`."""
        models = any(spec.replicate_models for spec in self.consumers.values())
        return REPLICABLE_CLASSES | ({"models"} if models else set())

    def standby_peers(self) -> list[str]:
        """The peers whose models this site keeps (`standby_models`)."""
        return sorted(peer for peer, spec in self.peers.items() if spec.standby_models)
