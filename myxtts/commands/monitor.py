"""``myxtts monitor``: watch the GPUs, then say in numbers whether they were kept busy.

A live line while it runs, and at the end (``--duration`` elapsed or Ctrl-C) the utilisation
summary with its verdict and the thresholds behind it, a CSV of every sample and an SVG timeline
(the chart report.html shows).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from myxtts.commands.common import EXIT_OK, EXIT_USAGE, add_command, check_output, err
from myxtts.errors import UserError
from myxtts.observe.gpu import GpuSampler, GpuUnavailable
from myxtts.observe.gpu_summary import GpuSummary, write_csv
from myxtts.observe.report import gpu_text, timeline_svg
from myxtts.observe.stats import thresholds_text


def add_parser(sub) -> None:
    p = add_command(
        sub, "monitor", "sample GPU utilisation, memory, power and clocks; print a verdict",
        "Sample every visible NVIDIA GPU through NVML (plus GPM SM activity on Hopper and newer) "
        "until --duration elapses or Ctrl-C, then print the utilisation summary and its verdict "
        "(steady / oscillating / starved / idle).")
    p.add_argument("--interval", type=float, default=0.5, metavar="S", help="seconds between samples")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="stop after S seconds (default: Ctrl-C)")
    p.add_argument("--out", metavar="FILE.csv", help="write every sample to this CSV file")
    p.add_argument("--plot", metavar="FILE.svg", help="write the utilisation timeline as an SVG chart")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.interval <= 0:
        raise UserError(f"--interval must be positive, got {args.interval}")
    if args.duration is not None and args.duration <= 0:
        raise UserError(f"--duration must be positive, got {args.duration}")
    check_output(args.out, "--out")  # written after sampling, when a traceback would lose it all
    check_output(args.plot, "--plot")
    try:
        sampler = GpuSampler(args.interval).start()
    except GpuUnavailable as e:
        # One sentence, no traceback: this is the expected answer on a machine without a GPU.
        err(f"myxtts monitor: error: {e}")
        return EXIT_USAGE
    tty = sys.stdout.isatty()
    t0 = time.monotonic()
    end = t0 + (args.duration or math.inf)
    interrupted = False
    try:
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(args.interval, left))
            line = f"{time.monotonic() - t0:6.1f}s  " + "  |  ".join(s.short() for s in sampler.latest())
            print(("\r" + line + "\033[K") if tty else line, end="" if tty else "\n", flush=True)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sampler.stop()
    if tty:
        print()
    print(summary_text(sampler.summary()) + (" (stopped by Ctrl-C)" if interrupted else ""))
    samples = sampler.samples()
    if args.out:
        write_csv(samples, args.out)
        print(f"samples: {args.out} ({len(samples)} rows)")
    if args.plot:
        Path(args.plot).write_text(timeline_svg(samples), encoding="utf-8")
        print(f"plot: {args.plot}")
    return EXIT_OK


def summary_text(summary: GpuSummary) -> str:
    """Multi-line summary of ``GpuSampler.summary()``: stats, verdict and the thresholds used."""
    lines = [f"GPU summary over {summary.duration_s:.1f} s, one sample every {summary.interval_s:g} s:"]
    for g in summary.gpus:
        head, *rest = gpu_text(g)
        lines += [f"  {head}", *(f"      {line}" for line in rest)]
    lines.append(f"verdict thresholds: {thresholds_text()}")
    return "\n".join(lines)
