"""Turn one `benchmarks/gpu_run.sh` output folder into a dated record:
benchmarks/results/<gpu>-<date>.json (top-level target figures + the raw results) and .md.

    python benchmarks/gpu_record.py OUT [--skip-s 90]

GPU utilisation is taken from the monitor's samples after ``--skip-s`` seconds (start-up and
compilation are not steady state). Every figure is copied from the measured files; a figure
that was not measured is written as null with the reason, never estimated.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
from pathlib import Path

from myxtts.observe.gpu import read_csv
from myxtts.observe.stats import summarize

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--skip-s", type=float, default=90.0)
    a = ap.parse_args()
    out = Path(a.out)
    loader, bench, run = _load(out / "bench_loader.json"), _load(out / "bench_train.json"), \
        _load(out / "run" / "summary.json")
    device = bench.get("device") or loader.get("device") or "unknown device"

    util = sm = None
    if (out / "monitor.csv").is_file():
        samples = [s for s in read_csv(out / "monitor.csv") if s.t >= a.skip_s]
        u = summarize([s.util for s in samples if s.util is not None])
        g = summarize([s.sm_active for s in samples if s.sm_active is not None])
        util = u.as_dict() if u else None
        sm = g.as_dict() if g else None
    shapes = run.get("step_by_shape", {})
    covs = [v["cov_pct"] for v in shapes.values() if v.get("n", 0) >= 5 and v.get("cov_pct") is not None]
    train = bench.get("train", {})
    compiled = train.get("compiled", {})
    record = {
        "device": device,
        "date": datetime.date.today().isoformat(),
        "gpu_util_mean_pct": util["mean"] if util else None,
        "gpu_util_p5_pct": util["p5"] if util else None,
        "gpm_sm_active_mean_pct": sm["mean"] if sm else None,
        "input_bound_pct": run.get("input_bound_pct"),
        "step_time_cov_pct": max(covs) if covs else None,
        "mfu_pct": compiled.get("mfu"),
        "compile_speedup": bench.get("compile_speedup"),
        "recompiles_after_warmup": max(
            [x for x in (run.get("recompiles_after_warmup"), train.get("recompiles_after_warmup"))
             if x is not None], default=None),
        "peak_memory_gib": run.get("peak_memory_gib"),
        "train_frames_per_s": run.get("throughput", {}).get("frames_per_s"),
        "raw": {"bench_loader": loader, "bench_train": bench, "train_summary": run,
                "gpu_util": util, "gpm_sm_active": sm, "skip_s": a.skip_s},
    }
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")[:40]
    stem = ROOT / "benchmarks" / "results" / f"{slug}-{record['date']}"
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    lines = [f"# {device}, {record['date']}", "",
             "Produced by `bash benchmarks/gpu_run.sh` and `benchmarks/gpu_record.py`; raw results in "
             f"`{stem.name}.json`.", "", "| figure | value |", "|---|---|"]
    for key in ("gpu_util_mean_pct", "gpu_util_p5_pct", "gpm_sm_active_mean_pct", "input_bound_pct",
                "step_time_cov_pct", "mfu_pct", "compile_speedup", "recompiles_after_warmup",
                "peak_memory_gib", "train_frames_per_s"):
        v = record[key]
        lines.append(f"| {key} | {'not measured' if v is None else (f'{v:.3g}' if isinstance(v, float) else v)} |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {stem}.json and .md")


if __name__ == "__main__":
    main()
