"""What ``myxtts monitor`` shows of a GPU sampling session: the utilisation summary in words,
with its verdict and the thresholds behind it, and a PNG timeline."""
from __future__ import annotations

from pathlib import Path

from myxtts.observe.gpu import SLOWDOWN_REASONS, GpuSample
from myxtts.observe.stats import LOW_UTIL_PCT, series_text, thresholds_text


def summary_text(summary: dict) -> str:
    """Multi-line summary of ``GpuSampler.summary()``: stats, verdict and the thresholds used."""
    lines = [f"GPU summary over {summary['duration_s']:.1f} s, one sample every {summary['interval_s']:g} s:"]
    for g in summary["gpus"]:
        head, *rest = gpu_text(g)
        lines += [f"  {head}", *(f"      {line}" for line in rest)]
    lines.append(f"verdict thresholds: {thresholds_text()}")
    return "\n".join(lines)


def gpu_text(g: dict) -> list[str]:
    """One GPU of a sampler summary in words: utilisation and verdict, GPM, memory, power, clocks."""
    u, sm = g["util"], g["sm_active"]
    head = f"gpu{g['index']} {g['name']}"
    if not u:
        return [f"{head}: utilisation not measured (NVML gave no utilisation samples)"]
    lines = [f"{head}: utilisation {series_text(u)} -> {u['verdict'].upper()}"]
    if sm:
        occ, tensor = g["sm_occupancy_mean"], g["tensor_active_mean"]
        lines.append(f"SM active (GPM) mean {sm['mean']:.1f} %, p5 {sm['p5']:.0f} %"
                     + (f", occupancy {occ:.1f} %" if occ is not None else "")
                     + (f", tensor cores {tensor:.1f} %" if tensor is not None else ""))
    else:
        lines.append(f"SM active (GPM): not measured ({g['gpm_reason']})")
    extra = []
    if g["mem_used_max_mib"] is not None:
        extra.append(f"memory peak {g['mem_used_max_mib'] / 1024:.1f} / {g['mem_total_mib'] / 1024:.1f} GiB")
    if g["power_mean_w"] is not None:
        extra.append(f"power mean {g['power_mean_w']:.0f} W")
    if g["sm_clock_mean_mhz"] is not None:
        extra.append(f"SM clock mean {g['sm_clock_mean_mhz']:.0f} MHz")
    slow = {r: p for r, p in g["throttle_pct"].items() if r in SLOWDOWN_REASONS}
    extra.append("clock slowdowns: " + (", ".join(f"{r} {p:.0f} %" for r, p in slow.items()) or "none"))
    return [*lines, "; ".join(extra)]


def plot_timeline(samples: list[GpuSample], path: str | Path) -> str | None:
    """PNG timeline of utilisation (+ GPM SM activity), memory and power; returns why it was
    skipped, or None when written. Uses the Agg canvas directly: no display, no global backend."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return "matplotlib is not installed (pip install 'myxtts[report]')"
    if not samples:
        return "no samples were taken"
    fig = Figure(figsize=(10, 7), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax_u, ax_m, ax_p = fig.subplots(3, 1, sharex=True, height_ratios=[2, 1, 1])
    for gpu in sorted({s.gpu for s in samples}):
        mine = [s for s in samples if s.gpu == gpu]
        t = [s.t for s in mine]
        line, = ax_u.plot(t, [s.util for s in mine], lw=1.2, label=f"gpu{gpu} utilization.gpu")
        if any(s.sm_active is not None for s in mine):
            ax_u.plot(t, [s.sm_active for s in mine], lw=1, ls="--", color=line.get_color(),
                      label=f"gpu{gpu} SM active (GPM)")
        ax_m.plot(t, [None if s.mem_used_mib is None else s.mem_used_mib / 1024 for s in mine], color=line.get_color())
        ax_p.plot(t, [s.power_w for s in mine], color=line.get_color())
    ax_u.axhline(LOW_UTIL_PCT, color="0.6", lw=0.8, ls=":")
    ax_u.set(ylim=(0, 105), ylabel="%", title="GPU utilisation")
    ax_u.legend(loc="lower right", fontsize=8)
    ax_m.set(ylabel="memory GiB")
    ax_p.set(ylabel="power W", xlabel="seconds")
    for ax in (ax_u, ax_m, ax_p):
        ax.grid(alpha=0.3)
    fig.savefig(path)
    return None
