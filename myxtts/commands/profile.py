"""``myxtts profile``: where a training step's time goes, measured, with the setting to change.

Warms up every bucket shape, then times N training steps (data wait, host-to-device, forward,
backward, optimizer) and profiles N more under torch.profiler: top kernels, recompiles, host
syncs, MFU, a Chrome trace, and an input-/launch-/compute-bound verdict with the setting to
change.
"""
from __future__ import annotations

import json
from pathlib import Path

from myxtts.commands.common import EXIT_OK, add_overrides, add_run_command, check_output, err, load_config
from myxtts.observe.diagnose import INPUT_BOUND_MODERATE_PCT
from myxtts.observe.format import findings_text, fmt
from myxtts.observe.gpu_summary import GpuSummary
from myxtts.observe.profile import profile
from myxtts.rundir import RunDir


def add_parser(sub) -> None:
    p = add_run_command(sub, "profile", "profile training steps: time breakdown, kernels, verdict",
                        __doc__.split("\n\n", 1)[1])
    p.add_argument("--steps", type=int, default=20, help="steps per pass")
    p.add_argument("--out", default="profile", help=f"directory for trace.json and {RunDir.REPORT}")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    add_overrides(p, "data.num_workers=4")
    p.set_defaults(func=_cmd)


def _cmd(args) -> int:
    cfg = load_config(args.config, args.overrides)
    check_output(args.out, "--out", folder=True)
    check_output(args.json, "--json")
    r = profile(cfg, args.data, args.steps, args.out, say=err)
    print(text(r))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(r, indent=1, default=str))
    return EXIT_OK


def text(r: dict) -> str:
    cpu = r["device"] == "cpu"
    lines = [f"where a step's time goes (mean of {r['steps']} steps after warm-up; timing: {r['timing']}):",
             f"  {'phase':<30}{'ms/step':>10}{'%':>8}"]
    for k, v in r["breakdown"].items():
        label = k + ((" (none on CPU)" if cpu else " (exposed)") if k == "host-to-device" else "")
        lines.append(f"  {label:<30}{fmt(v['ms'], '{:.2f}'):>10}{fmt(v['pct']):>8}")
    lines.append(f"  {'step (wall)':<30}{fmt(r['step_ms'], '{:.2f}'):>10}{'100.0':>8}")
    what = "kernels by GPU time" if r["top_kind"] == "kernels" else "CPU ops by self time (CPU run)"
    lines.append(f"top {what}, {r['steps']} profiled steps:")
    for t in r["top"]:
        lines.append(f"  {t['pct']:5.1f} %  {t['total_ms']:9.2f} ms  {t['calls']:6d} x  {t['name'][:90]}")
    if cpu:
        lines.append("GPU busy share, kernels per step, CPU dispatch: not measurable on CPU")
    else:
        lines.append(f"GPU busy {fmt(r['gpu_busy_pct'], '{:.0f}')} % of the step (kernels only); "
                     f"{fmt(r['kernels_per_step'], '{:,.0f}')} kernels per step, median kernel "
                     f"{fmt(r['median_kernel_us'])} µs; host busy launching "
                     f"{fmt(r['cpu_dispatch_pct'], '{:.0f}')} % of the step")
        lines.append(nvml_line(GpuSummary.from_dict(r.get("gpu"))))
    lines.append(f"recompiles after warm-up: {r['recompiles']}")
    lines.append("host syncs per step: " + (fmt(r["host_syncs_per_step"], "{:g}")
                                            if r["host_syncs_per_step"] is not None else r["host_syncs_note"]))
    tp = r["throughput"]
    lines.append(f"throughput: {fmt(tp.get('frames_per_s'), '{:,.0f}')} mel frames/s, "
                 f"{fmt(tp.get('audio_s_per_s'))} s of audio/s, {fmt(tp.get('samples_per_s'))} samples/s")
    flops = f"{r['flops_per_step'] / 1e9:,.1f} GFLOP/step, {fmt(r['achieved_tflops'], '{:.3f}')} TFLOP/s achieved"
    lines.append(f"MFU: {fmt(r['mfu_pct'])} % ({flops} of {r['mfu_basis']})" if r["mfu_pct"] is not None
                 else f"MFU: not measured ({r['mfu_basis']}); {flops}")
    lines.append(f"trace: {r['trace']} (open in https://ui.perfetto.dev or chrome://tracing)")
    lines.append(f"report: {r['report']}")
    d = r["diagnosis"]
    lines.append(f"verdict: {d['headline']}")
    if cpu:
        lines.append(f"  input-bound {fmt(r['run'].get('input_bound_pct'))} % on this CPU run (< "
                     f"{INPUT_BOUND_MODERATE_PCT:g} % is not input-bound); launch- vs compute-bound applies to GPUs")
    if d["findings"]:
        lines.append(findings_text(d["findings"]))
    return "\n".join(lines)


def nvml_line(gpu: GpuSummary | None) -> str:
    """NVML utilisation (and GPM SM activity) sampled beside the timed pass: the cross-check of
    the kernel-time busy share."""
    g = next((g for g in (gpu.gpus if gpu else []) if g.util), None)
    if g is None:
        return "NVML utilisation beside the timed steps: not measured (nvidia-ml-py missing or no samples)"
    sm = g.sm_active
    return (f"NVML utilisation beside the timed steps: mean {g.util.mean:.0f} % over {g.util.n} "
            "samples" + (f", GPM SM active {sm.mean:.0f} %" if sm else ""))
