"""``report.html``: one self-contained page with the run's numbers, their plots and the findings.

No external assets (inline CSS and SVG), so the file can be mailed, attached to an issue or opened
offline. A section whose data is absent says "not measured (reason)" and shows nothing else:
a report that invents a number is worse than one with a hole in it.

``write_report(path, measured, diagnosis=None, **page)`` takes the figures ``diagnose()`` reads
(``observe.measured.Measured``; the diagnosis is computed from them unless given) and, for the
page only:

    title          page title
    meta           {label: value} shown as the run's header table (config, GPU, steps, date ...)
    gpu_samples    GpuSample objects (GpuSampler.samples() or gpu.read_csv(...)); the GPU
                   statistics come from ``measured.gpu``
    mfu_basis      e.g. "H100 SXM dense bf16 989 TFLOP/s"; achieved_tflops
    not_measured   {section id: reason} for sections the caller knows it could not measure
    metrics        the run's metrics.jsonl records (:meth:`~myxtts.rundir.RunDir.read_metrics`): the loss curves
    samples        the run's samples folder (RUN/samples): the latest alignment and the audio

Section ids: findings, learning, alignment, samples, gpu-timeline, step-time, input-bound, mfu,
padding, recompiles, throughput.
The GPU section's chart (``timeline_svg``) and its text (``gpu_text``) are also what ``myxtts
monitor`` draws and prints.
"""
from __future__ import annotations

from html import escape
from pathlib import Path

from myxtts.files import write_text
from myxtts.observe import learning, svg
from myxtts.observe.diagnose import LOW_MFU_PCT, diagnose
from myxtts.observe.findings import Diagnosis
from myxtts.observe.format import fmt
from myxtts.observe.gpu_summary import SLOWDOWN_REASONS, GpuStats
from myxtts.observe.input_rules import (
    INPUT_BOUND_HIGH_PCT,
    INPUT_BOUND_MODERATE_PCT,
    INPUT_BOUND_TARGET_PCT,
    PADDING_HIGH_PCT,
    PADDING_LOW_PCT,
)
from myxtts.observe.measured import Measured
from myxtts.observe.stats import LOW_UTIL_PCT, OSCILLATING_COV_PCT, series_text, thresholds_text

MAX_POINTS = 1500  # per GPU series; longer runs are strided so the page stays small

CSS = """
body{font:14px/1.45 system-ui,sans-serif;color:#111;max-width:920px;margin:24px auto;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;width:100%;font-size:13px}
td,th{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f3f4f6}.meta td:first-child{width:180px;color:#555}.nm{color:#6b7280;font-style:italic}
.verdict{padding:10px 12px;border-radius:6px;background:#eff6ff;border:1px solid #bfdbfe;margin:14px 0}
.sev-high{background:#fee2e2}.sev-medium{background:#fef3c7}.sev-low{background:#ecfdf5}.sev-info{background:#f3f4f6}
code{background:#f3f4f6;padding:0 3px;border-radius:3px}.small{color:#555;font-size:12px}
h3{font-size:14px;margin:14px 0 2px}
"""


class _Page:
    """The figures and the page-only extras, read by every section."""

    def __init__(self, m: Measured, page: dict):
        self.m, self.page = m, page
        self.not_measured = {**m.not_measured, **(page.get("not_measured") or {})}

    def nm(self, section: str, default: str) -> str:
        reason = self.not_measured.get(section, default)
        return f'<p class="nm">not measured ({escape(reason)})</p>'


def _code(text: str) -> str:
    """Escape, then show `backticked` parts as <code> (actions name settings that way)."""
    parts = escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{escape(title)}</h2>{body}</section>'


def _findings(diag: Diagnosis) -> str:
    if not diag.findings:
        return "<p>No findings: nothing measured crossed a threshold.</p>"
    rows = "".join(
        f'<tr class="sev-{escape(f.severity)}"><td>{i}</td><td>{escape(f.severity)}</td>'
        f'<td>{escape(f.title)}</td><td>{_code(f.evidence)}</td><td>{_code(f.action)}</td></tr>'
        for i, f in enumerate(diag.findings, 1))
    return ("<table><tr><th>#</th><th>severity</th><th>finding</th><th>evidence</th><th>action</th></tr>"
            f"{rows}</table>")


def _compiling(m: Measured) -> str:
    comp = m.gpu.compiling if m.gpu else None
    if not comp:
        return ""
    util = f", utilisation mean {comp.util_mean:.0f} %" if comp.util_mean is not None else ""
    return (f"<p>Compiling the step took {comp.seconds:.0f} s before the first training step "
            f"({comp.samples} samples{util}); those samples count as compiling, not in the statistics "
            "below.</p>")


def timeline_svg(samples: list) -> str:
    """Each GPU's utilisation (and GPM SM activity) over the seconds sampled, as an SVG chart:
    report.html's GPU section and ``myxtts monitor --plot``."""
    series = []
    for gpu in sorted({s.gpu for s in samples}):
        mine = [s for s in samples if s.gpu == gpu]
        mine = mine[::max(1, len(mine) // MAX_POINTS)]
        t = [s.t for s in mine]
        color = svg.PALETTE[gpu % len(svg.PALETTE)]
        series.append({"label": f"gpu{gpu} utilization.gpu", "x": t, "y": [s.util for s in mine], "color": color})
        sm = [s.sm_active for s in mine]
        if any(v is not None for v in sm):
            series.append({"label": f"gpu{gpu} SM active (GPM)", "x": t, "y": sm, "color": color, "dash": True})
    return svg.line_chart(series, hlines=[(LOW_UTIL_PCT, f"{LOW_UTIL_PCT:g} %")])


def gpu_text(g: GpuStats) -> list[str]:
    """One GPU of a sampler summary in words: utilisation and verdict, GPM, memory, power, clocks."""
    u, sm = g.util, g.sm_active
    head = f"gpu{g.index} {g.name}"
    if not u:
        return [f"{head}: utilisation not measured (NVML gave no utilisation samples)"]
    lines = [f"{head}: utilisation {series_text(u)} -> {u.verdict.upper()}"]
    if sm:
        occ, tensor = g.sm_occupancy_mean, g.tensor_active_mean
        lines.append(f"SM active (GPM) mean {sm.mean:.1f} %, p5 {sm.p5:.0f} %"
                     + (f", occupancy {occ:.1f} %" if occ is not None else "")
                     + (f", tensor cores {tensor:.1f} %" if tensor is not None else ""))
    else:
        lines.append(f"SM active (GPM): not measured ({g.gpm_reason})")
    extra = []
    if g.mem_used_max_mib is not None:
        # NVML's figure, the CUDA context and other processes included: not the run's peak memory
        extra.append(f"memory used at most {g.mem_used_max_mib / 1024:.1f} / {g.mem_total_mib / 1024:.1f} GiB (NVML)")
    if g.power_mean_w is not None:
        extra.append(f"power mean {g.power_mean_w:.0f} W")
    if g.sm_clock_mean_mhz is not None:
        extra.append(f"SM clock mean {g.sm_clock_mean_mhz:.0f} MHz")
    slow = {r: p for r, p in g.throttle_pct.items() if r in SLOWDOWN_REASONS}
    extra.append("clock slowdowns: " + (", ".join(f"{r} {p:.0f} %" for r, p in slow.items()) or "none"))
    return [*lines, "; ".join(extra)]


def _learning(p: _Page) -> str:
    return learning.curves_html(p.page.get("metrics") or []) or p.nm("learning", "no losses were logged")


def _alignment(p: _Page) -> str:
    return learning.alignment_html(p.page.get("samples")) or p.nm(
        "alignment", "no sample with an alignment image (train.sample_every; the image needs matplotlib)")


def _samples(p: _Page) -> str:
    return learning.samples_html(p.page.get("samples")) or p.nm("samples", "no training sample was written "
                                                                           "(train.sample_every)")


def _gpu_timeline(p: _Page) -> str:
    m, samples = p.m, p.page.get("gpu_samples") or []
    if not samples:
        body = _compiling(m) + p.nm("gpu-timeline", "no GPU samples were recorded")
        u = m.util()  # statistics without their samples are still honest
        if u:
            body += f"<p>Utilisation, samples not kept: {series_text(u)}: <b>{escape(u.verdict)}</b>.</p>"
        return body
    body = timeline_svg(samples) + _compiling(m)
    gpus = m.gpu.gpus if m.gpu else []
    if gpus:
        body += "<ul>" + "".join("<li>" + "<br>".join(map(escape, gpu_text(g))) + "</li>" for g in gpus) + "</ul>"
    return body + f'<p class="small">Verdict thresholds: {escape(thresholds_text())}.</p>'


def _step_time(p: _Page) -> str:
    m = p.m
    shapes = m.step_by_shape
    warm = (f"<p>Warm-up (compiling the step): {m.compile_s:.1f} s; the step times below come after it.</p>"
            if m.compile_s else "")
    if not shapes:
        return warm + p.nm("step-time", "no step timings recorded")
    rows = [{"label": k, "value": v["mean_ms"], "hi": v.get("p95_ms"), "warn": v["cov_pct"] > OSCILLATING_COV_PCT,
             "note": f"CoV {v['cov_pct']:.0f} %, n={v['n']}"} for k, v in shapes.items()]
    body = svg.bar_chart(rows, unit="ms")
    firsts = [(k, v["first_ms"]) for k, v in shapes.items() if v.get("first_ms") is not None]
    head = ""
    if m.step_ms is not None:
        head = (f"<p>Mean step (wall) {m.step_ms:.1f} ms, CoV {fmt(m.step_cov_pct)} % "
                f"over {fmt(m.steps, '{}', '?')} steps after warm-up.</p>")
    note = ('<p class="small">Bars: mean CUDA-event step time per batch shape after its first step; '
            f'whisker: p95; red: CoV &gt; {OSCILLATING_COV_PCT:g} % (oscillation within one shape).')
    if firsts:
        note += (" First step per shape: "
                 + ", ".join(f"{escape(k)} {ms / 1000:.1f} s" for k, ms in firsts) + ".")
    return warm + head + body + note + "</p>"


def _input_bound(p: _Page) -> str:
    m = p.m
    ib = m.input_bound_pct
    if ib is None:
        return p.nm("input-bound", "no step timings recorded")
    body = svg.meter(ib, bands=[(0, INPUT_BOUND_MODERATE_PCT, svg.GOOD),
                                (INPUT_BOUND_MODERATE_PCT, INPUT_BOUND_HIGH_PCT, svg.WARN),
                                (INPUT_BOUND_HIGH_PCT, 100, svg.BAD)], label="of wall time waiting for input")
    parts = [("waiting for data", m.data_wait_pct), ("host-to-device", m.h2d_pct),
             (m.step_label, m.step_pct), ("other", m.other_pct)]
    split = ", ".join(f"{k} {v:.1f} %" for k, v in parts if v is not None)
    return body + (f"<p>Wall time split: {escape(split)}.</p>" if split else "") + (
        '<p class="small">input-bound % = (data wait + non-overlapped host-to-device copy) / wall time; '
        f'&lt; {INPUT_BOUND_MODERATE_PCT:g} % not input-bound, {INPUT_BOUND_MODERATE_PCT:g}-'
        f'{INPUT_BOUND_HIGH_PCT:g} % moderately, &ge; {INPUT_BOUND_HIGH_PCT:g} % highly; target &lt; '
        f'{INPUT_BOUND_TARGET_PCT:g} %. "step (host + GPU)" is the time from the start to the end of each '
        'step, launching included: not the share of time the GPU computes (see GPU utilisation).</p>')


def _mfu(p: _Page) -> str:
    mfu = p.m.mfu_pct
    if mfu is None:
        return p.nm("mfu", p.page.get("mfu_basis") or "FLOPs or the device's peak were not measured")
    basis, tflops = p.page.get("mfu_basis"), p.page.get("achieved_tflops")
    extra = f"{tflops:.1f} TFLOP/s achieved" if tflops is not None else ""
    if basis:
        extra += (" of " if extra else "peak: ") + basis
    return svg.meter(mfu, bands=[(0, LOW_MFU_PCT, svg.WARN), (LOW_MFU_PCT, 100, svg.GOOD)], label="MFU") + (
        f"<p>{escape(extra)}.</p>" if extra else "")


def _padding(p: _Page) -> str:
    pad = p.m.padding_pct
    if pad is None:
        return p.nm("padding", "padding was not counted")
    return svg.meter(pad, bands=[(0, PADDING_LOW_PCT, svg.GOOD), (PADDING_LOW_PCT, PADDING_HIGH_PCT, svg.WARN),
                                 (PADDING_HIGH_PCT, 100, svg.BAD)], label="of computed frames are padding")


def _recompiles(p: _Page) -> str:
    m = p.m
    if m.recompiles is None:
        return p.nm("recompiles", "compilation was not tracked")
    shapes = f" {m.n_shapes} distinct batch shapes." if m.n_shapes is not None else ""
    mode = f" Compile mode: <code>{escape(str(m.settings.compile))}</code>." if m.settings.compile else ""
    before = (f" Before step 1 the step compiled <b>{m.graphs_compiled}</b> graph(s) (1 serves every shape)."
              if m.graphs_compiled is not None else "")
    graphs = "" if m.cudagraph_skips is None else (
        f" CUDA graphs: <b>{m.cudagraph_skips}</b> skipped (target 0)"
        + (f", {m.cudagraph_recordings} recorded" if m.cudagraph_recordings is not None else "") + ".")
    return f"<p><b>{int(m.recompiles)}</b> recompiles after warm-up (target 0).{shapes}{mode}{before}{graphs}</p>"


def _throughput(p: _Page) -> str:
    tp = p.m.throughput
    names = {"frames_per_s": "mel frames/s", "audio_s_per_s": "seconds of audio/s", "samples_per_s": "samples/s"}
    rows = "".join(f"<tr><td>{names[k]}</td><td>{tp[k]:,.1f}</td></tr>" for k in names if tp.get(k) is not None)
    if not rows:
        return p.nm("throughput", "no step timings recorded")
    return f'<table class="meta">{rows}</table>'


def render(m: Measured, diag: Diagnosis | None = None, **page) -> str:
    """The report as an HTML string (write_report writes it)."""
    diag = diag or diagnose(m)
    p = _Page(m, page)
    title = page.get("title") or "MyXTTS run report"
    meta = "".join(f"<tr><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>"
                   for k, v in (page.get("meta") or {}).items())
    verdict = _code(diag.headline()[len(diag.bound) + 2:])
    sections = [
        _section("findings", "Findings", _findings(diag)),
        _section("learning", "Loss per term (training and validation)", _learning(p)),
        _section("alignment", "Latest alignment", _alignment(p)),
        _section("samples", "Training samples", _samples(p)),
        _section("gpu-timeline", "GPU utilisation", _gpu_timeline(p)),
        _section("step-time", "Step time per bucket shape", _step_time(p)),
        _section("input-bound", "Input-bound %", _input_bound(p)),
        _section("mfu", "MFU (model FLOP utilisation)", _mfu(p)),
        _section("padding", "Padding waste", _padding(p)),
        _section("recompiles", "Recompiles", _recompiles(p)),
        _section("throughput", "Throughput", _throughput(p)),
    ]
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1>" + (f'<table class="meta">{meta}</table>' if meta else "")
            + f'<div class="verdict" id="verdict"><b>{escape(diag.bound)}</b>: {verdict}</div>'
            + "".join(sections) + "</body></html>\n")


def write_report(path: str | Path, m: Measured, diag: Diagnosis | None = None, **page) -> Path:
    return write_text(path, render(m, diag, **page))
