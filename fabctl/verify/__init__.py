"""`fabctl verify`: the roadmap phases' completion checks as acceptance jobs run against the live site (docs/acceptance.md)."""
