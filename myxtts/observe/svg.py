"""Tiny inline-SVG charts for ``report.html``: a line chart, horizontal bars and a threshold meter.

Hand-written SVG instead of matplotlib PNGs so the report stays one self-contained, small,
text file with no optional dependency, that diffs and greps, and renders crisply at any zoom.
Every text node is escaped; every function returns an ``<svg>`` string.
"""
from __future__ import annotations

from html import escape
from itertools import groupby

PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d"]
GOOD, WARN, BAD = "#bbf7d0", "#fde68a", "#fecaca"
WIDTH = 860


def _svg(height: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
            f'height="{height}" role="img" font-family="system-ui,sans-serif" font-size="11">')


def _num(v: float) -> str:
    if v != 0 and abs(v) < 1:  # a loss axis: two significant digits
        return f"{v:.2g}"
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values: steps of 1, 2 or 5 times a power of ten."""
    raw = max(hi - lo, 1e-9) / n
    mag = 10 ** int(f"{raw:e}".split("e")[1])
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = int(lo / step) * step
    return [first + i * step for i in range(n + 2) if lo - 1e-9 <= first + i * step <= hi + 1e-9]


def line_chart(series: list[dict], hlines: list[tuple[float, str]] = (), y_range: tuple[float, float] | None = (0, 100),
               xlabel: str = "seconds", ylabel: str = "%", height: int = 240) -> str:
    """Percent over seconds by default. ``series``: dicts with ``label``, ``x``, ``y`` (None = gap)
    and optional ``dash``/``color``; ``hlines``: (y, label) reference lines; ``y_range`` None:
    the data's own range, from zero where all values are positive."""
    ml, mr, mt, mb = 48, 12, 10, 50
    pw, ph = WIDTH - ml - mr, height - mt - mb
    xs = [x for s in series for x in s["x"]]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    x1 = x1 if x1 > x0 else x0 + 1
    if y_range is None:
        ys = [y for s in series for y in s["y"] if y is not None] or [0.0, 1.0]
        y_range = (min(0.0, min(ys)), max(ys) if max(ys) > min(0.0, min(ys)) else min(0.0, min(ys)) + 1)
    y0, y1 = y_range

    def X(x):
        return ml + (x - x0) / (x1 - x0) * pw

    def Y(y):
        return mt + ph - (min(max(y, y0), y1) - y0) / (y1 - y0) * ph

    out = [_svg(height)]
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{Y(t):.1f}" y2="{Y(t):.1f}" stroke="#e5e7eb"/>'
                   f'<text x="{ml - 6}" y="{Y(t) + 4:.1f}" text-anchor="end" fill="#555">{_num(t)}</text>')
    for t in _ticks(x0, x1, 8):
        out.append(f'<text x="{X(t):.1f}" y="{mt + ph + 15}" text-anchor="middle" fill="#555">{_num(t)}</text>')
    for y, label in hlines:
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{Y(y):.1f}" y2="{Y(y):.1f}" stroke="#888" '
                   f'stroke-dasharray="3 3"/><text x="{ml + pw - 4}" y="{Y(y) - 4:.1f}" text-anchor="end" '
                   f'fill="#666">{escape(label)}</text>')
    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#9ca3af"/>')
    out.append(f'<text x="{ml + pw / 2}" y="{mt + ph + 30}" text-anchor="middle" fill="#333">{escape(xlabel)}</text>'
               f'<text x="12" y="{mt + ph / 2}" transform="rotate(-90 12 {mt + ph / 2})" text-anchor="middle" '
               f'fill="#333">{escape(ylabel)}</text>')
    lx = ml
    for i, s in enumerate(series):
        color = s.get("color", PALETTE[i % len(PALETTE)])
        dash = ' stroke-dasharray="5 3"' if s.get("dash") else ""
        # A None breaks the line: a failed read is a gap, not a drop to zero.
        for gap, run in groupby(zip(s["x"], s["y"]), key=lambda xy: xy[1] is None):
            if not gap:
                points = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in run)
                out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.4"{dash}/>')
        out.append(f'<line x1="{lx}" x2="{lx + 18}" y1="{height - 8}" y2="{height - 8}" stroke="{color}" '
                   f'stroke-width="2"{dash}/>'
                   f'<text x="{lx + 22}" y="{height - 4}" fill="#333">{escape(s["label"])}</text>')
        lx += 30 + 6.5 * len(s["label"])
    out.append("</svg>")
    return "".join(out)


def bar_chart(rows: list[dict], unit: str) -> str:
    """Horizontal bars. ``rows``: dicts with ``label``, ``value``, optional ``hi`` (a whisker, e.g.
    p95), ``note`` (text right of the bar) and ``warn`` (draw the bar in the warning colour)."""
    lw, bh, gap, mr = 130, 18, 6, 190
    pw = WIDTH - lw - mr
    top = max([max(r["value"], r.get("hi") or 0) for r in rows] + [1e-9])
    out = [_svg(len(rows) * (bh + gap) + 6)]
    for i, r in enumerate(rows):
        y = 4 + i * (bh + gap)
        w = r["value"] / top * pw
        color = PALETTE[1] if r.get("warn") else PALETTE[0]
        out.append(f'<text x="{lw - 6}" y="{y + bh - 5}" text-anchor="end" fill="#333">{escape(r["label"])}</text>'
                   f'<rect x="{lw}" y="{y}" width="{w:.1f}" height="{bh}" fill="{color}" opacity="0.8"/>')
        if r.get("hi") is not None:
            hx = lw + r["hi"] / top * pw
            out.append(f'<line x1="{lw + w:.1f}" x2="{hx:.1f}" y1="{y + bh / 2}" y2="{y + bh / 2}" stroke="#333"/>'
                       f'<line x1="{hx:.1f}" x2="{hx:.1f}" y1="{y + 3}" y2="{y + bh - 3}" stroke="#333"/>')
        note = f'{_num(r["value"])} {unit}' + (f'  {r["note"]}' if r.get("note") else "")
        out.append(f'<text x="{lw + pw + 8}" y="{y + bh - 5}" fill="#333">{escape(note)}</text>')
    out.append("</svg>")
    return "".join(out)


def meter(value: float, *, bands: list[tuple[float, float, str]], label: str) -> str:
    """A 0-100 % scale coloured by threshold ``bands`` (start, end, colour), with a marker at
    ``value``: the thresholds are visible next to the number they judge."""
    ml, mr = 10, 10
    pw = WIDTH - ml - mr

    def X(v):
        return ml + min(max(v, 0), 100) / 100 * pw

    out = [_svg(54)]
    for a, b, color in bands:
        out.append(f'<rect x="{X(a):.1f}" y="18" width="{X(b) - X(a):.1f}" height="14" fill="{color}"/>')
        out.append(f'<text x="{X(a):.1f}" y="46" fill="#555">{_num(a)}</text>')
    out.append(f'<text x="{X(100):.1f}" y="46" text-anchor="end" fill="#555">100</text>')
    x = X(value)
    out.append(f'<path d="M{x - 6:.1f},4 L{x + 6:.1f},4 L{x:.1f},17 Z" fill="#111"/>'
               f'<line x1="{x:.1f}" x2="{x:.1f}" y1="17" y2="33" stroke="#111" stroke-width="2"/>')
    anchor = "end" if x > WIDTH - 160 else "start"
    out.append(f'<text x="{x + (-10 if anchor == "end" else 10):.1f}" y="13" text-anchor="{anchor}" '
               f'font-weight="bold" fill="#111">{escape(f"{_num(value)} % {label}")}</text></svg>')
    return "".join(out)
