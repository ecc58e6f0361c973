"""The fast_p curve as inline SVG, drawn at build time (no JavaScript, no chart library, no CDN).

fast_p(p) is the share of problems solved correctly *and* more than p times faster than the
baseline; plotting it over p shows the whole trade-off where a table shows three points of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

#: Colour-blind-friendly palette (Okabe-Ito, darkened for contrast on white).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7F7F7F", "#000000")


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[float]
    href: str | None = None


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


def _steps(ps: Sequence[float], values: Sequence[float], x, y) -> list[tuple[float, float]]:
    """fast_p holds its value until the next sampled p: draw steps, not slopes between samples."""
    pts: list[tuple[float, float]] = []
    for i, (p, v) in enumerate(zip(ps, values)):
        if i and values[i - 1] != v:
            pts.append((x(p), y(values[i - 1])))
        pts.append((x(p), y(v)))
    return pts


def fast_p_chart(series: Sequence[Series], ps: Sequence[float], title: str = "fast_p curve",
                 width: int = 720, height: int = 340) -> Markup:
    """An SVG line chart, x = p (speedup threshold), y = fast_p in percent, one polyline per series."""
    left, right, top, bottom = 52, 16, 16, 44
    legend_h = 22 * ((len(series) + 2) // 3)
    total_h = height + legend_h
    pw, ph = width - left - right, height - top - bottom
    x_max = max(ps) if ps else 1.0

    def x(p: float) -> float:
        return left + (p / x_max) * pw if x_max else left

    def y(v: float) -> float:
        return top + (1.0 - v) * ph

    parts = [f'<svg class="chart" role="img" viewBox="0 0 {width} {total_h}" width="100%" '
             f'preserveAspectRatio="xMinYMin meet">',
             f"<title>{escape(title)}</title>"]
    # grid and axes
    for i in range(5):
        v = i / 4
        parts.append(f'<line class="grid" x1="{left}" y1="{y(v):.1f}" x2="{left + pw}" y2="{y(v):.1f}"/>')
        parts.append(f'<text class="tick" x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{int(v * 100)}%</text>')
    step = 0.5
    t = 0.0
    while t <= x_max + 1e-9:
        parts.append(f'<line class="grid" x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{top + ph}"/>')
        parts.append(f'<text class="tick" x="{x(t):.1f}" y="{top + ph + 18}" text-anchor="middle">{_fmt(t)}</text>')
        t += step
    if x_max >= 1:
        parts.append(f'<line class="ref" x1="{x(1):.1f}" y1="{top}" x2="{x(1):.1f}" y2="{top + ph}"/>')
    parts.append(f'<line class="axis" x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}"/>')
    parts.append(f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}"/>')
    parts.append(f'<text class="label" x="{left + pw / 2:.1f}" y="{top + ph + 36}" text-anchor="middle">'
                 f"speedup threshold p (× baseline)</text>")
    parts.append(f'<text class="label" transform="rotate(-90)" x="{-(top + ph / 2):.1f}" y="14" '
                 f'text-anchor="middle">fast_p</text>')
    # series
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in _steps(ps, s.values, x, y))
        parts.append(f'<polyline class="series" data-label="{escape(s.label)}" fill="none" stroke="{color}" '
                     f'stroke-width="2.2" stroke-linejoin="round" points="{pts}"><title>{escape(s.label)}</title>'
                     f"</polyline>")
    # legend, three per row
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        lx = left + (i % 3) * (pw / 3)
        ly = height + 4 + 22 * (i // 3)
        label = escape(s.label if len(s.label) <= 28 else s.label[:27] + "…")
        parts.append(f'<g class="legend"><rect x="{lx:.1f}" y="{ly:.1f}" width="14" height="4" fill="{color}"/>'
                     f'<text x="{lx + 20:.1f}" y="{ly + 6:.1f}">{label}</text></g>')
    parts.append("</svg>")
    return Markup("".join(parts))
