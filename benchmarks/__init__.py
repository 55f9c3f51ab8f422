"""Benchmarks of the render: cost against the SDK floor, growth with the site, deploy critical path (docs/performance.md)."""
