#!/usr/bin/env python3
"""Draws the Grafana dashboard's panels (docs/grafana/wirelat-two-point.json) as one SVG from
the series tests/prometheus.rs wrote (WIRELAT_DASHBOARD_DATA): every panel at its grid place,
every target's series as a line, legends from each target's legendFormat. Standard library
only; scripts/dashboard-picture.sh converts the SVG to the README's PNG with rsvg-convert.

Usage: dashboard-picture.py DATA.json OUT.svg
"""

import json
import math
import re
import sys
from html import escape

WIDTH = 1400  # px for the 24 grid columns
ROW = 34  # px per grid row
PAD = 8
PALETTE = ["#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9",
           "#705DA0", "#508642", "#CCA300", "#447EBC", "#C15C17", "#890F02", "#0A437C"]
BG, PANEL, GRID, TEXT, DIM = "#111217", "#181b1f", "#2c3235", "#d8d9da", "#8e8e8e"


def fmt(v, unit):
    """A tick or legend value in the panel's unit, as Grafana would print it."""
    if v == 0:
        return "0"
    if unit == "s":
        for scale, name in [(1, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]:
            if abs(v) >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v / 1e-9:.3g} ns"
    if unit == "percentunit":
        return f"{v * 100:.3g}%"
    suffix = " pps" if unit == "pps" else ""
    for scale, name in [(1e9, "G"), (1e6, "M"), (1e3, "k")]:
        if abs(v) >= scale:
            return f"{v / scale:.3g}{name}{suffix}"
    return f"{v:.3g}{suffix}"


def nice_ticks(lo, hi, n=4):
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [i * step for i in range(first, max(last, first + 1) + 1)]


def legend(fmt_string, metric):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt_string or "").strip()


def panel_svg(p, t0, t1):
    g = p["gridPos"]
    col = WIDTH / 24
    x0, y0 = g["x"] * col + PAD / 2, g["y"] * ROW + PAD / 2
    w, h = g["w"] * col - PAD, g["h"] * ROW - PAD
    unit = p.get("unit") or ""
    series = []
    for t in p["targets"]:
        for r in t["result"]:
            pts = [(float(ts), float(v)) for ts, v in r["values"] if math.isfinite(float(v))]
            if pts:
                series.append((legend(t.get("legend"), r["metric"]) or t["expr"][:40], pts))
    out = [f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{w:.1f}" height="{h:.1f}" rx="3" fill="{PANEL}" stroke="{GRID}"/>',
           f'<text x="{x0 + 10:.1f}" y="{y0 + 20:.1f}" fill="{TEXT}" font-size="13" font-weight="bold">{escape(p["title"])}</text>']
    legend_rows = min(4, math.ceil(len(series) / 3))
    px0, px1 = x0 + 72, x0 + w - 14
    py0, py1 = y0 + 32, y0 + h - 26 - legend_rows * 15
    if not series:
        out.append(f'<text x="{(x0 + w / 2):.1f}" y="{(y0 + h / 2):.1f}" fill="{DIM}" text-anchor="middle">No data</text>')
        return out
    vals = [v for _, pts in series for _, v in pts]
    lo, hi = min(vals + [0.0]), max(vals)
    ticks = nice_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]

    def sx(ts):
        return px0 + (ts - t0) / max(t1 - t0, 1e-9) * (px1 - px0)

    def sy(v):
        return py1 - (v - lo) / (hi - lo) * (py1 - py0)

    for tv in ticks:
        y = sy(tv)
        out.append(f'<line x1="{px0:.1f}" x2="{px1:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        out.append(f'<text x="{px0 - 6:.1f}" y="{y + 4:.1f}" fill="{DIM}" font-size="10" text-anchor="end">{escape(fmt(tv, unit))}</text>')
    for s in range(0, int(t1 - t0) + 1, 5):
        x = sx(t0 + s)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{py0:.1f}" y2="{py1:.1f}" stroke="{GRID}" stroke-dasharray="2,3"/>')
        out.append(f'<text x="{x:.1f}" y="{py1 + 13:.1f}" fill="{DIM}" font-size="10" text-anchor="middle">{s} s</text>')
    for i, (name, pts) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        if len(pts) == 1:
            ts, v = pts[0]
            out.append(f'<circle cx="{sx(ts):.1f}" cy="{sy(v):.1f}" r="2.5" fill="{color}"/>')
        else:
            path = " ".join(f"{sx(ts):.1f},{sy(v):.1f}" for ts, v in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.6"/>')
    shown = series[: legend_rows * 3]
    for i, (name, pts) in enumerate(shown):
        lx = x0 + 12 + (i % 3) * (w - 24) / 3
        ly = py1 + 30 + (i // 3) * 15
        color = PALETTE[i % len(PALETTE)]
        label = f"{name}: {fmt(pts[-1][1], unit)}"
        room = int((w - 24) / 3 / 6.2) - 3
        if len(label) > room:
            label = label[: room - 1] + "…"
        out.append(f'<rect x="{lx:.1f}" y="{ly - 8:.1f}" width="10" height="3" fill="{color}"/>')
        out.append(f'<text x="{lx + 14:.1f}" y="{ly - 3:.1f}" fill="{TEXT}" font-size="10">{escape(label)}</text>')
    if len(series) > len(shown):
        out.append(f'<text x="{x0 + w - 12:.1f}" y="{y0 + 20:.1f}" fill="{DIM}" font-size="10" text-anchor="end">+{len(series) - len(shown)} more series</text>')
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: dashboard-picture.py DATA.json OUT.svg")
    with open(sys.argv[1], encoding="utf-8") as f:
        panels = json.load(f)
    times = [float(ts) for p in panels for t in p["targets"] for r in t["result"] for ts, _ in r["values"]]
    if not times:
        sys.exit(f"{sys.argv[1]}: no series at all")
    t0, t1 = min(times), max(times)
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) * ROW + 30
    body = []
    for p in panels:
        body.extend(panel_svg(p, t0, t1))
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="DejaVu Sans, sans-serif">',
           f'<rect width="100%" height="100%" fill="{BG}"/>']
    svg.extend(f'<g transform="translate(0,26)">{line}</g>' for line in body)
    svg.append(f'<text x="10" y="18" fill="{TEXT}" font-size="14">wirelat: two-point deployment '
               f'(docs/grafana/wirelat-two-point.json) on the demo\'s traffic, scraped every second by '
               f'Prometheus (tests/prometheus.rs)</text>')
    svg.append("</svg>")
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
