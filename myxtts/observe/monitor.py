"""A GPU sampling session in words, as ``myxtts monitor`` and report.html show it: the
utilisation summary with its verdict and the thresholds behind it."""
from __future__ import annotations

from myxtts.observe.gpu import SLOWDOWN_REASONS
from myxtts.observe.stats import series_text, thresholds_text


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
