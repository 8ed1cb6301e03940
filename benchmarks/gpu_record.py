"""Turn one `benchmarks/gpu_run.sh` output folder into a dated record:
benchmarks/results/<gpu>-<UTC date>-after.json (the target figures at the top, then what they
came from) and .md.

    python benchmarks/gpu_record.py OUT [--smoke] [--commit C]

``--smoke``: a toy run on a CPU; the record goes to OUT/record.{json,md}, never into
benchmarks/results. ``--commit``: the commit the tree is at, where it is a copy without .git.

The target figures: GPU utilisation (NVML, the cold run's training time, its compile window
counted apart), MFU (``bench train``, the mode train.compile=auto runs), input-bound % (the cold
run), and recompiles after warm-up and time to full speed for the cold run and the warm one
(docs/design.md, "How we measure"). Every figure is copied from the files the phases wrote; one
that was not measured is null, with the reason under ``not_measured``, never estimated. The
machine and the software are read here, in the record phase, on the machine that ran the others.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = {"cold": "run-cold", "warm": "run-warm"}
PHASES = ("setup", "corpus", "loader", "bench", "train-cold", "train-warm", "record")  # gpu_run.sh's order
PHASE_OF = {"cold": "train-cold", "warm": "train-warm"}


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _gpu(summary: dict) -> dict:
    """The first GPU's statistics over the run's training time (compile window apart)."""
    return ((summary.get("gpu") or {}).get("gpus") or [{}])[0]


def run_figures(s: dict) -> dict:
    """What one training run's summary.json says, in the record's words."""
    g = _gpu(s)
    return {"device": s.get("device_name"), "compile": s.get("compile"), "precision": s.get("precision"),
            "frame_budget": s.get("frame_budget"), "shapes": s.get("shapes_seen"), "steps": s.get("steps"),
            "stopped": s.get("stopped"), "compile_s": s.get("compile_s"),
            "compile_cache_hits": s.get("compile_cache_hits"), "compile_cache_misses": s.get("compile_cache_misses"),
            "time_to_full_speed_s": s.get("time_to_full_speed_s"),
            "recompiles_after_warmup": s.get("recompiles_after_warmup"),
            "step_ms": s.get("step_ms"), "step_cov_pct": s.get("step_cov_pct"),
            "frames_per_s": (s.get("throughput") or {}).get("frames_per_s"),
            "input_bound_pct": s.get("input_bound_pct"),
            "gpu_util_mean_pct": (g.get("util") or {}).get("mean"),
            "gpu_util_p5_pct": (g.get("util") or {}).get("p5"),
            "gpm_sm_active_mean_pct": (g.get("sm_active") or {}).get("mean"),
            "gpu_samples": g.get("samples"), "peak_memory_gib": s.get("peak_memory_gib")}


def util_reason(s: dict) -> str:
    if not str(s.get("device")).startswith("cuda"):
        return f"no GPU: the run trained on {s.get('device_name') or s.get('device')}"
    if s.get("gpu") is None:
        return "the run sampled no GPU utilisation (NVML unavailable)"
    return "no GPU sample fell outside the compile window: the run trained no step after compiling"


def phases(out: Path) -> dict:
    """Each finished phase: when, how long, and the commands it ran."""
    done = {}
    markers = [m for m in (out / ".done").glob("*") if not m.suffix]
    for marker in sorted(markers, key=lambda m: (PHASES + (m.name,)).index(m.name)):
        m = re.match(r"finished (\S+) after (\d+) s", marker.read_text())
        cmds = marker.with_suffix(".commands")
        done[marker.name] = {"finished_utc": m and m.group(1), "seconds": m and int(m.group(2)),
                             "commands": cmds.read_text().splitlines() if cmds.is_file() else []}
    return done


def machine() -> dict:
    import torch

    from myxtts.train.precision import device_name

    driver = None
    if torch.cuda.is_available():
        try:
            import pynvml

            pynvml.nvmlInit()
            driver = pynvml.nvmlSystemGetDriverVersion()
        except Exception:  # noqa: BLE001 - the driver version is a detail, never a failure
            pass
    return {"device": device_name(), "cpu": device_name(torch.device("cpu")), "driver": driver,
            "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}


def commit(given: str | None) -> tuple[str | None, str | None]:
    """(the commit the tree is at, with "+modified" where tracked files differ from it; or None,
    and why not)."""
    if given:
        return given, None
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        diff = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None, "the tree is no git checkout and no --commit was given"
    return head + ("+modified" if diff else ""), None


WHY_NONE = {"input_bound_pct": "no step was timed after warm-up",
            "time_to_full_speed_s": "the steps never ran 8 in a row within 10 % of their shape's median "
                                    "(train/timers.py)"}


def why_none(key: str, s: dict) -> str:
    """Why a run's summary gives no figure for ``key``."""
    if key == "gpu_util_mean_pct":
        return util_reason(s)
    return WHY_NONE[key] if key in s and key in WHY_NONE else "not in the run's summary"


def build(out: Path, smoke: bool = False, given_commit: str | None = None) -> dict:
    """The record of one gpu_run.sh output folder."""
    missing: dict[str, str] = {}
    summaries = {k: _load(out / folder / "summary.json") for k, folder in RUNS.items()}
    runs = {k: run_figures(s) if s else None for k, s in summaries.items()}
    for k, s in summaries.items():
        if s is None:
            missing[f"runs.{k}"] = f"phase {PHASE_OF[k]} not run ({RUNS[k]}/summary.json missing)"

    def pick(key: str, which: str, name: str) -> float | int | None:
        """The run's figure; where there is none, why not goes under ``name``."""
        s = summaries[which]
        v = runs[which][key] if s else None
        if v is None:
            missing[name] = missing[f"runs.{which}"] if s is None else why_none(key, s)
        return v

    bench = _load(out / "bench_train.json")
    mode = bench["modes_selected"][0] if bench and bench.get("modes_selected") else None
    b = bench["train"][mode] if mode else None
    if b is None:
        missing["mfu_pct"] = "phase bench not run (bench_train.json missing)"
    elif b.get("mfu") is None:
        missing["mfu_pct"] = b.get("mfu_reason") or "not in bench_train.json"
    loader = _load(out / "bench_loader.json")
    if loader is None:
        missing["bench_loader"] = "phase loader not run (bench_loader.json missing)"
    where, why = commit(given_commit)
    if where is None:
        missing["commit"] = why
    record = {
        "what": ("a toy run of benchmarks/gpu_run.sh --smoke on a CPU: it checks the phases and the "
                 "record; no figure in it describes a GPU") if smoke else
                ("MyXTTS on one GPU after the launch-overhead work: benchmarks/gpu_run.sh "
                 "(compare h100-2026-11-23-before)"),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "smoke": smoke,
        "machine": machine(),
        "commit": where,
        "gpu_util_mean_pct": pick("gpu_util_mean_pct", "cold", "gpu_util_mean_pct"),
        "mfu_pct": b.get("mfu") if b else None,
        "input_bound_pct": pick("input_bound_pct", "cold", "input_bound_pct"),
        "recompiles_after_warmup": {k: pick("recompiles_after_warmup", k, f"recompiles_after_warmup.{k}")
                                    for k in RUNS},
        "time_to_full_speed_s": {k: pick("time_to_full_speed_s", k, f"time_to_full_speed_s.{k}") for k in RUNS},
        "not_measured": missing,
        "runs": runs,
        "bench_train": None if b is None else {
            "mode": mode, "precision": b.get("precision"), "compile": b.get("compile"),
            "shape": (bench.get("shapes") or [None])[0], "steps": b.get("steps"), "step_ms": b.get("step_ms"),
            "frames_per_s": b.get("frames_per_s"), "mfu_pct": b.get("mfu"), "achieved_tflops": b.get("achieved_tflops"),
            "compile_s": b.get("compile_s"), "time_to_full_speed_s": b.get("time_to_full_speed_s"),
            "recompiles_after_warmup": b.get("recompiles_after_warmup")},
        "bench_loader": None if loader is None else {
            "naive_frames_per_s": loader["loader"]["naive"]["frames_per_s"],
            "cached_frames_per_s": loader["loader"]["cached"]["frames_per_s"],
            "speedup": loader["loader"]["cached"]["speedup"],
            "input_bound_pct_simulated": loader["loader"]["cached"]["input_bound_pct"],
            "padding_pct": loader["loader"]["padding_pct"]},
        "phases": phases(out),
        "raw": {"bench_loader": loader, "bench_train": bench,
                **{f"train_{k}": _load(out / f / "summary.json") for k, f in RUNS.items()}},
    }
    return record


def stem_for(record: dict, out: Path, smoke: bool) -> Path:
    if smoke:
        return out / "record"
    name = record["machine"]["device"].lower()
    # "NVIDIA H100 80GB HBM3" -> h100: the chip's name where there is one
    chip = re.search(r"\b[a-z]+\d{2,4}[a-z]?\b", name.replace("nvidia", ""))
    slug = chip.group(0) if chip else re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:40]
    return ROOT / "benchmarks" / "results" / f"{slug}-{record['date']}-after"


def _v(v) -> str:
    """A figure as the tables show it; n/a where it was not measured or does not apply."""
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return str(v)


def markdown(r: dict, stem: Path) -> str:
    m, nm = r["machine"], r["not_measured"]

    def fig(key: str, sub: str | None = None) -> str:
        v = r[key][sub] if sub else r[key]
        why = nm.get(f"{key}.{sub}" if sub else key)
        return f"not measured ({why})" if v is None else _v(v)

    title = "Smoke run of benchmarks/gpu_run.sh" if r["smoke"] else "MyXTTS on one GPU, after"
    where = r["commit"] or f"not known ({nm['commit']})"
    lines = [f"# {title}: {m['device']}, {r['date']}", "", r["what"] + ".", "",
             f"Machine: {m['device']}; CPU {m['cpu']}; driver {m['driver'] or 'n/a'}; PyTorch {m['torch']} "
             f"(CUDA {m['cuda'] or 'none'}); Python {m['python']}. Commit: {where}. "
             f"Produced by `bash benchmarks/gpu_run.sh{' --smoke' if r['smoke'] else ''}` and "
             f"`benchmarks/gpu_record.py`; everything measured is in `{stem.name}.json`.", "",
             "| figure | value |", "|---|---|",
             f"| GPU utilisation, mean % (NVML, cold run, training time) | {fig('gpu_util_mean_pct')} |",
             f"| MFU % (`bench train`, {(r['bench_train'] or {}).get('mode', 'not run')}) | {fig('mfu_pct')} |",
             f"| input-bound % (cold run) | {fig('input_bound_pct')} |"]
    for k in ("cold", "warm"):
        lines.append(f"| recompiles after warm-up, {k} | {fig('recompiles_after_warmup', k)} |")
    for k in ("cold", "warm"):
        lines.append(f"| time to full speed s, {k} | {fig('time_to_full_speed_s', k)} |")
    rows = [("steps", "steps"), ("compile", "compile"), ("precision", "precision"), ("batch shapes", "shapes"),
            ("frame budget", "frame_budget"), ("compile s", "compile_s"),
            ("compile cache hits / misses", None), ("time to full speed s", "time_to_full_speed_s"),
            ("step ms (mean after warm-up)", "step_ms"), ("step time CoV %", "step_cov_pct"),
            ("mel frames/s", "frames_per_s"), ("input-bound %", "input_bound_pct"),
            ("GPU utilisation mean %", "gpu_util_mean_pct"), ("GPU utilisation p5 %", "gpu_util_p5_pct"),
            ("GPM SM active mean %", "gpm_sm_active_mean_pct"), ("peak memory GiB", "peak_memory_gib"),
            ("recompiles after warm-up", "recompiles_after_warmup")]
    lines += ["", "## The training runs", "", "| | cold | warm |", "|---|---:|---:|"]
    for label, key in rows:
        cells = []
        for k in RUNS:
            run = r["runs"][k]
            if run is None:
                cells.append("not run")
            elif key is None:
                cells.append(f"{_v(run['compile_cache_hits'])} / {_v(run['compile_cache_misses'])}")
            else:
                cells.append(_v(run[key]))
        lines.append(f"| {label} | {' | '.join(cells)} |")
    lines += ["", "n/a: not measured here, or not applicable (an eager run compiles nothing).",
              "", "## Phases", "", "| phase | s | commands |", "|---|---:|---|"]
    for name, p in r["phases"].items():
        cmds = "<br>".join("`" + c.replace("|", "\\|") + "`" for c in p["commands"]) or "-"
        lines.append(f"| {name} | {_v(p['seconds'])} | {cmds} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description="the record of one benchmarks/gpu_run.sh output folder")
    ap.add_argument("out", help="the folder gpu_run.sh wrote")
    ap.add_argument("--smoke", action="store_true", help="a toy run on a CPU: write OUT/record.{json,md}")
    ap.add_argument("--commit", help="the commit the tree is at, where it is no git checkout")
    a = ap.parse_args()
    out = Path(a.out)
    if not (out / ".done").is_dir():
        ap.error(f"{out}: not a gpu_run.sh output folder (no .done/ in it)")
    record = build(out, a.smoke, a.commit)
    stem = stem_for(record, out, a.smoke)
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    stem.with_suffix(".md").write_text(markdown(record, stem))
    print(f"wrote {stem}.json and .md")


if __name__ == "__main__":
    main()
