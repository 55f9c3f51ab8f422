"""The site diagram of the plan report, drawn directly as SVG (no Mermaid runtime, nothing fetched): one lane per
cluster with the components on it, then one row per allowed flow, an arrow from each source lane to each destination
lane. Everything not drawn is denied. The same facts as `fabctl graph`'s Mermaid diagram, laid out so that no two
arrows cross a label.
"""

from __future__ import annotations

from html import escape
from typing import Any

from fabctl.graph import WORLD
from fabctl.report.model import PageData

LANE = 200
HEADER = 150
ROW = 30
MARGIN = 20


def _text(x: float, y: float, text: str, css: str, anchor: str = "middle") -> str:
    return f'<text x="{x:.0f}" y="{y:.0f}" class="{css}" text-anchor="{anchor}">{escape(text)}</text>'


def lanes(data: PageData) -> list[dict[str, Any]]:
    """The lanes from left to right: the outside world (when any flow comes from it), each cluster, then the other
    sources of flows (federated sites' ranges)."""
    sources = {source for flow in data.flows for source in flow["from"]}
    out: list[dict[str, Any]] = []
    if WORLD in sources or any(WORLD in flow["to"] for flow in data.flows):
        out.append({"key": WORLD, "title": "outside the site", "subtitle": "", "lines": [], "outside": True})
    for cluster in data.clusters:
        out.append({"key": cluster.key, "title": cluster.key, "subtitle": f"{cluster.name} ({cluster.role})",
                    "lines": cluster.components, "outside": False})
    known = {lane["key"] for lane in out}
    for source in sorted(sources - known):
        out.append({"key": source, "title": source, "subtitle": data.sources.get(source, "outside the site"), "lines": [],
                    "outside": True})
    return out


def site_svg(data: PageData) -> str:
    """The diagram as an inline SVG element, sized to its content."""
    columns = lanes(data)
    x_of = {lane["key"]: MARGIN + LANE * i + LANE / 2 for i, lane in enumerate(columns)}
    arrows = [(flow, source, dest) for flow in data.flows for source in flow["from"] for dest in flow["to"]]
    width = MARGIN * 2 + LANE * len(columns)
    height = HEADER + ROW * (len(arrows) + 1) + MARGIN
    parts = [
        (f'<svg xmlns="http://www.w3.org/2000/svg" id="site-diagram" role="img" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" aria-label="Clusters of {escape(data.site)} and the flows allowed between them">'),
        ('<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
         '<path d="M0,0 L10,5 L0,10 z" class="arrow-head"/></marker></defs>'),
    ]
    for lane in columns:
        x = x_of[lane["key"]]
        left = x - LANE / 2 + 8
        css = "lane outside" if lane["outside"] else "lane"
        parts.append(f'<g class="{css}" data-lane="{escape(lane["key"])}">')
        parts.append(f'<rect x="{left:.0f}" y="{MARGIN}" width="{LANE - 16}" height="{HEADER - MARGIN - 10}" rx="8"/>')
        parts.append(_text(x, MARGIN + 20, lane["title"], "lane-title"))
        if lane["subtitle"]:
            parts.append(_text(x, MARGIN + 36, lane["subtitle"], "lane-subtitle"))
        shown = lane["lines"][:5]
        for i, line in enumerate(shown):
            parts.append(_text(x, MARGIN + 54 + 14 * i, line, "lane-line"))
        if len(lane["lines"]) > len(shown):
            parts.append(_text(x, MARGIN + 54 + 14 * len(shown), f"and {len(lane['lines']) - len(shown)} more", "lane-line"))
        parts.append(f'<line x1="{x:.0f}" y1="{HEADER - 10}" x2="{x:.0f}" y2="{height - MARGIN}" class="lane-axis"/>')
        parts.append("</g>")
    for i, (flow, source, dest) in enumerate(arrows):
        y = HEADER + ROW * (i + 1)
        x1, x2 = x_of[source], x_of[dest]
        label = f"{flow['name']} {flow['port']}" + (" (API)" if flow["target"] == "kube-apiserver" else "") \
            + (f" to {', '.join(flow['to_cidrs'])}" if flow["to_cidrs"] else "")
        parts.append(f'<g class="flow" data-flow="{escape(flow["name"])}"><title>{escape(flow["description"])}</title>')
        if x1 == x2:  # a flow within one cluster's lane: a short loop
            parts.append(f'<path d="M{x1:.0f},{y - 8} h40 v16 h-36" class="flow-line" marker-end="url(#arrow)"/>')
            parts.append(_text(x1 + 46, y, label, "flow-label", "start"))
        else:
            step = 6 if x2 > x1 else -6
            parts.append(f'<line x1="{x1 + step:.0f}" y1="{y}" x2="{x2 - step:.0f}" y2="{y}" class="flow-line" marker-end="url(#arrow)"/>')
            parts.append(_text((x1 + x2) / 2, y - 5, label, "flow-label"))
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts)
