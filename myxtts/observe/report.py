"""``report.html``: one self-contained page with the run's numbers, their plots and the findings.

No external assets (inline CSS and SVG), so the file can be mailed, attached to an issue or opened
offline. A section whose data is absent says "not measured (reason)" and shows nothing else:
a report that invents a number is worse than one with a hole in it.

``write_report(path, data)`` takes the same flat dict as ``diagnose()`` (the findings are computed
from it unless ``data["findings"]`` is given) plus:

    title          page title
    meta           {label: value} shown as the run's header table (config, GPU, steps, date ...)
    gpu_samples    GpuSample objects or dicts with t, gpu, util, sm_active (GpuSampler.samples()
                   or gpu.read_csv(...)); the GPU statistics come from ``gpu`` (GpuSampler.summary())
    mfu_basis      e.g. "H100 SXM dense bf16 989 TFLOP/s"; achieved_tflops
    not_measured   {section id: reason} for sections the caller knows it could not measure
    bound, reason, findings   a precomputed Diagnosis (as_dict() form) instead of diagnose(data)

Section ids: findings, gpu-timeline, step-time, input-bound, mfu, padding, recompiles, throughput.
"""
from __future__ import annotations

from html import escape
from pathlib import Path

from myxtts.observe import svg
from myxtts.observe.diagnose import (
    INPUT_BOUND_HIGH_PCT,
    INPUT_BOUND_MODERATE_PCT,
    LOW_MFU_PCT,
    PADDING_HIGH_PCT,
    PADDING_LOW_PCT,
    diagnose,
    gpu_util,
)
from myxtts.observe.stats import LOW_UTIL_PCT, OSCILLATING_COV_PCT, thresholds_text

MAX_POINTS = 1500  # per GPU series; longer runs are strided so the page stays small

CSS = """
body{font:14px/1.45 system-ui,sans-serif;color:#111;max-width:920px;margin:24px auto;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;width:100%;font-size:13px}td,th{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f3f4f6}.meta td:first-child{width:180px;color:#555}.nm{color:#6b7280;font-style:italic}
.verdict{padding:10px 12px;border-radius:6px;background:#eff6ff;border:1px solid #bfdbfe;margin:14px 0}
.sev-high{background:#fee2e2}.sev-medium{background:#fef3c7}.sev-low{background:#ecfdf5}.sev-info{background:#f3f4f6}
code{background:#f3f4f6;padding:0 3px;border-radius:3px}.small{color:#555;font-size:12px}
"""


def _nm(data: dict, section: str, default: str) -> str:
    reason = (data.get("not_measured") or {}).get(section, default)
    return f'<p class="nm">not measured ({escape(reason)})</p>'


def _code(text: str) -> str:
    """Escape, then show `backticked` parts as <code> (actions name settings that way)."""
    parts = escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _get(s, key):
    return s.get(key) if isinstance(s, dict) else getattr(s, key, None)


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{escape(title)}</h2>{body}</section>'


def _findings(diag: dict) -> str:
    if not diag["findings"]:
        return "<p>No findings: nothing measured crossed a threshold.</p>"
    rows = "".join(
        f'<tr class="sev-{escape(f["severity"])}"><td>{i}</td><td>{escape(f["severity"])}</td>'
        f'<td>{escape(f["title"])}</td><td>{_code(f["evidence"])}</td><td>{_code(f["action"])}</td></tr>'
        for i, f in enumerate(diag["findings"], 1))
    return ("<table><tr><th>#</th><th>severity</th><th>finding</th><th>evidence</th><th>action</th></tr>"
            f"{rows}</table>")


def _gpu_timeline(data: dict) -> str:
    samples = data.get("gpu_samples") or []
    if not samples:
        body = _nm(data, "gpu-timeline", "no GPU samples were recorded")
        u = gpu_util(data)  # a series without timestamps still has honest statistics
        if u:
            body += (f"<p>Utilisation series given without timestamps: mean {u['mean']:.1f} %, p5 {u['p5']:.0f} %, "
                     f"CoV {u['cov_pct']:.1f} %: <b>{escape(u['verdict'])}</b>.</p>")
        return body
    series = []
    for gpu in sorted({int(_get(s, "gpu")) for s in samples}):
        mine = [s for s in samples if int(_get(s, "gpu")) == gpu]
        mine = mine[::max(1, len(mine) // MAX_POINTS)]
        t = [float(_get(s, "t")) for s in mine]
        color = svg.PALETTE[gpu % len(svg.PALETTE)]
        series.append({"label": f"gpu{gpu} utilization.gpu", "x": t, "y": [_get(s, "util") for s in mine], "color": color})
        sm = [_get(s, "sm_active") for s in mine]
        if any(v is not None for v in sm):
            series.append({"label": f"gpu{gpu} SM active (GPM)", "x": t, "y": sm, "color": color, "dash": True})
    body = svg.line_chart(series, hlines=[(LOW_UTIL_PCT, f"{LOW_UTIL_PCT:g} %")])
    stats = []
    for g in (data.get("gpu") or {}).get("gpus", []):
        u, sm = g.get("util"), g.get("sm_active")
        if u:
            stats.append(f"<li>gpu{g['index']} {escape(g.get('name', ''))}: mean {u['mean']:.1f} %, p5 {u['p5']:.0f} %, "
                         f"median {u['median']:.0f} %, CoV {u['cov_pct']:.1f} %, below {LOW_UTIL_PCT:g} % "
                         f"{u['below50_pct']:.0f} % of the time: <b>{escape(u['verdict'])}</b>; SM active (GPM): "
                         + (f"mean {sm['mean']:.1f} %" if sm else f"not measured ({escape(g.get('gpm_reason') or 'no samples')})")
                         + "</li>")
    if stats:
        body += f"<ul>{''.join(stats)}</ul>"
    return body + f'<p class="small">Verdict thresholds: {escape(thresholds_text())}.</p>'


def _step_time(data: dict) -> str:
    shapes = data.get("step_by_shape") or {}
    if not shapes:
        return _nm(data, "step-time", "no step timings recorded")
    rows = [{"label": k, "value": v["mean_ms"], "hi": v.get("p95_ms"), "warn": v["cov_pct"] > OSCILLATING_COV_PCT,
             "note": f"CoV {v['cov_pct']:.0f} %, n={v['n']}"} for k, v in shapes.items()]
    body = svg.bar_chart(rows, unit="ms")
    firsts = [(k, v["first_ms"]) for k, v in shapes.items() if v.get("first_ms") is not None]
    head = ""
    if data.get("step_ms") is not None:
        head = (f"<p>Mean step (wall) {data['step_ms']:.1f} ms, CoV {data.get('step_cov_pct', 0):.1f} % "
                f"over {data.get('steps', '?')} steps after warm-up.</p>")
    note = (f'<p class="small">Bars: mean CUDA-event step time per batch shape after its first (compiling) step; '
            f'whisker: p95; red: CoV &gt; {OSCILLATING_COV_PCT:g} % (oscillation within one shape).')
    if firsts:
        note += " First step per shape (includes compilation): " + ", ".join(f"{escape(k)} {ms / 1000:.1f} s" for k, ms in firsts) + "."
    return head + body + note + "</p>"


def _input_bound(data: dict) -> str:
    ib = data.get("input_bound_pct")
    if ib is None:
        return _nm(data, "input-bound", "no step timings recorded")
    body = svg.meter(ib, bands=[(0, INPUT_BOUND_MODERATE_PCT, svg.GOOD),
                                (INPUT_BOUND_MODERATE_PCT, INPUT_BOUND_HIGH_PCT, svg.WARN),
                                (INPUT_BOUND_HIGH_PCT, 100, svg.BAD)], label="of wall time waiting for input")
    parts = [(k, data.get(k)) for k in ("data_wait_pct", "h2d_pct", "compute_pct", "other_pct")]
    split = ", ".join(f"{k[:-4].replace('_', ' ')} {v:.1f} %" for k, v in parts if v is not None)
    return body + (f"<p>Wall time split: {escape(split)}.</p>" if split else "") + (
        f'<p class="small">input-bound % = (data wait + non-overlapped host-to-device copy) / wall time; '
        f'&lt; {INPUT_BOUND_MODERATE_PCT:g} % not input-bound, {INPUT_BOUND_MODERATE_PCT:g}-{INPUT_BOUND_HIGH_PCT:g} % '
        f'moderately, &ge; {INPUT_BOUND_HIGH_PCT:g} % highly; target &lt; 1 %.</p>')


def _mfu(data: dict) -> str:
    mfu = data.get("mfu_pct")
    if mfu is None:
        return _nm(data, "mfu", "FLOPs or the device's peak were not measured")
    basis = data.get("mfu_basis")
    extra = f"{data['achieved_tflops']:.1f} TFLOP/s achieved" if data.get("achieved_tflops") is not None else ""
    if basis:
        extra += (" of " if extra else "peak: ") + basis
    return svg.meter(mfu, bands=[(0, LOW_MFU_PCT, svg.WARN), (LOW_MFU_PCT, 100, svg.GOOD)], label="MFU") + (
        f"<p>{escape(extra)}.</p>" if extra else "")


def _padding(data: dict) -> str:
    p = data.get("padding_pct")
    if p is None:
        return _nm(data, "padding", "padding was not counted")
    return svg.meter(p, bands=[(0, PADDING_LOW_PCT, svg.GOOD), (PADDING_LOW_PCT, PADDING_HIGH_PCT, svg.WARN),
                               (PADDING_HIGH_PCT, 100, svg.BAD)], label="of computed frames are padding")


def _recompiles(data: dict) -> str:
    n = data.get("recompiles")
    if n is None:
        return _nm(data, "recompiles", "compilation was not tracked")
    shapes = f" {data['n_shapes']} distinct batch shapes." if data.get("n_shapes") is not None else ""
    mode = f" Compile mode: <code>{escape(str(data['compile']))}</code>." if data.get("compile") else ""
    return f"<p><b>{int(n)}</b> recompiles after warm-up (target 0).{shapes}{mode}</p>"


def _throughput(data: dict) -> str:
    tp = data.get("throughput") or {}
    names = {"frames_per_s": "mel frames/s", "audio_s_per_s": "seconds of audio/s", "samples_per_s": "samples/s"}
    rows = "".join(f"<tr><td>{names[k]}</td><td>{tp[k]:,.1f}</td></tr>" for k in names if tp.get(k) is not None)
    if not rows:
        return _nm(data, "throughput", "no step timings recorded")
    return f'<table class="meta">{rows}</table>'


def render(data: dict) -> str:
    """The report as an HTML string (write_report writes it)."""
    if data.get("findings") is not None:
        diag = {"bound": data.get("bound", "unknown"), "reason": data.get("reason", ""),
                "findings": [f if isinstance(f, dict) else vars(f) for f in data["findings"]]}
    else:
        diag = diagnose(data).as_dict()
    title = data.get("title") or "MyXTTS run report"
    meta = "".join(f"<tr><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>"
                   for k, v in (data.get("meta") or {}).items())
    sections = [
        _section("findings", "Findings", _findings(diag)),
        _section("gpu-timeline", "GPU utilisation", _gpu_timeline(data)),
        _section("step-time", "Step time per bucket shape", _step_time(data)),
        _section("input-bound", "Input-bound %", _input_bound(data)),
        _section("mfu", "MFU (model FLOP utilisation)", _mfu(data)),
        _section("padding", "Padding waste", _padding(data)),
        _section("recompiles", "Recompiles", _recompiles(data)),
        _section("throughput", "Throughput", _throughput(data)),
    ]
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1>" + (f'<table class="meta">{meta}</table>' if meta else "")
            + f'<div class="verdict" id="verdict"><b>{escape(diag["bound"])}</b>: {escape(diag["reason"])}</div>'
            + "".join(sections) + "</body></html>\n")


def write_report(path: str | Path, data: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data), encoding="utf-8")
    return path
