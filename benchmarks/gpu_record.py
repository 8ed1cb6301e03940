"""Turn the work folder of one `benchmarks/gpu_run.sh` into a dated record:
OUT/<gpu>-<UTC date>-after.json (the target figures at the top, then what they came from) and
.md, to be copied into benchmarks/results/.

    python benchmarks/gpu_record.py WORK --out OUT [--smoke] [--commit C]

``--smoke``: a toy run on a CPU; the record is OUT/record.{json,md}. ``--commit``: the commit the
tree is at, where it is a copy without .git.

The target figures: GPU utilisation (NVML, the cold run's training time, its compile window
counted apart), MFU and tensor-core activity (the cold run), graphs compiled before step 1,
input-bound % (the cold run), recompiles after warm-up and time to full speed for the cold run and
the warm one (the cold run resumed in a second process on an empty compile cache with the kernels
it saved; docs/design.md, "How we measure"), and whether the aligner's kernels passed their check;
then where a step's time goes, from ``myxtts profile`` where the lease had time for it. Every
figure is copied from the files the steps wrote; one that was not measured is null, with the
reason under ``not_measured``, never estimated. The machine and the software are read from what
the runs wrote (their summaries, the kernel check), never from the machine this script
runs on: it may run elsewhere, on the returned files.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("setup", "corpus", "cold", "warm", "profile", "record")  # gpu_run.sh's order
TOP = 10  # kernels (CPU ops on a CPU) the record lists from the profile


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _gpu(summary: dict) -> dict:
    """The first GPU's statistics over the run's training time (compile window apart)."""
    return ((summary.get("gpu") or {}).get("gpus") or [{}])[0]


def run_figures(s: dict) -> dict:
    """What one training run's summary.json says, in the record's words. Peak memory is the
    allocator's peak reserved memory (docs/design.md, "Peak memory"); a summary written before
    it was recorded held the peak *allocated* memory as ``peak_memory_gib``, a smaller figure, so
    it is left out rather than passed off as the same thing."""
    g, mem = _gpu(s), s.get("memory") or {}
    return {"device": s.get("device_name"), "compile": s.get("compile"), "precision": s.get("precision"),
            "frame_budget": s.get("frame_budget"), "shapes": s.get("shapes_seen"), "steps": s.get("steps"),
            "stopped": s.get("stopped"), "compile_s": s.get("compile_s"),
            "steps_eager": s.get("steps_eager"), "compile_beside_s": s.get("compile_beside_s"),
            "compile_s_by_shape": s.get("compile_s_by_shape"), "graphs_compiled": s.get("graphs_compiled"),
            # dynamo's phase timers, from the process that compiled (the compiler beside the run)
            "compile_phases_s": s.get("compile_phases_s") or (s.get("compile_beside") or {}).get("phases_s"),
            "compile_cache_hits": s.get("compile_cache_hits"), "compile_cache_misses": s.get("compile_cache_misses"),
            "compile_artifacts_loaded": s.get("compile_artifacts_loaded"),
            "compile_artifacts_saved_bytes": s.get("compile_artifacts_saved_bytes"),
            "cudagraph_skips": s.get("cudagraph_skips"), "cudagraph_recordings": s.get("cudagraph_recordings"),
            "time_to_full_speed_s": s.get("time_to_full_speed_s"),
            "time_to_full_speed_from_process_start_s": s.get("time_to_full_speed_from_process_start_s"),
            "recompiles_after_warmup": s.get("recompiles_after_warmup"),
            "step_ms": s.get("step_ms"), "step_cov_pct": s.get("step_cov_pct"),
            "frames_per_s": (s.get("throughput") or {}).get("frames_per_s"),
            "input_bound_pct": s.get("input_bound_pct"), "host_wait_pct": s.get("host_wait_pct"),
            "gpu_util_mean_pct": (g.get("util") or {}).get("mean"),
            "gpu_util_p5_pct": (g.get("util") or {}).get("p5"),
            "gpm_sm_active_mean_pct": (g.get("sm_active") or {}).get("mean"),
            "gpu_samples": g.get("samples"), "tensor_active_mean_pct": g.get("tensor_active_mean"),
            "mfu_pct": s.get("mfu_pct"), "mfu_basis": s.get("mfu_basis"), "mfu_by_shape": s.get("mfu_by_shape"),
            "sm_clock_mean_mhz": g.get("sm_clock_mean_mhz"), "sm_clock_max_mhz": g.get("sm_clock_max_mhz"),
            "diagnosis": (s.get("diagnosis") or {}).get("headline"),
            "peak_memory_gib": mem.get("reserved_peak_gib"),
            "peak_memory_pct": mem.get("reserved_peak_pct"), "alloc_retries": mem.get("alloc_retries"),
            "ooms": mem.get("ooms")}


def profile_figures(p: dict) -> dict:
    """What ``myxtts profile --json`` says, in the record's words: the step's phases, the top
    kernels by GPU time (CPU ops by self time on a CPU), the GPU's busy share of a step, and what
    the host does per step."""
    return {"device": p.get("device_name"), "compile": p.get("compile"), "precision": p.get("precision"),
            "steps": p.get("steps"), "step_ms": p.get("step_ms"), "breakdown": p.get("breakdown"),
            "top_kind": p.get("top_kind"), "top": (p.get("top") or [])[:TOP],
            "gpu_busy_pct": p.get("gpu_busy_pct"), "kernels_per_step": p.get("kernels_per_step"),
            "median_kernel_us": p.get("median_kernel_us"), "cpu_dispatch_pct": p.get("cpu_dispatch_pct"),
            "host_syncs_per_step": p.get("host_syncs_per_step"), "host_syncs_note": p.get("host_syncs_note"),
            "recompiles": p.get("recompiles"), "mfu_pct": p.get("mfu_pct"), "mfu_basis": p.get("mfu_basis"),
            "verdict": (p.get("diagnosis") or {}).get("headline")}


def util_reason(s: dict) -> str:
    if not str(s.get("device")).startswith("cuda"):
        return f"no GPU: the run trained on {s.get('device_name') or s.get('device')}"
    if s.get("gpu") is None:
        return "the run sampled no GPU utilisation (NVML unavailable)"
    return "no GPU sample fell outside the compile window: the run trained no step after compiling"


def steps(work: Path) -> dict:
    """Each step gpu_run.sh started or skipped: status, seconds, note (steps.tsv)."""
    done = {}
    path = work / "steps.tsv"
    for line in path.read_text().splitlines() if path.is_file() else []:
        name, status, seconds, note = (line.split("\t") + ["", "", ""])[:4]
        done[name] = {"status": status, "seconds": int(seconds or 0), "note": note or None}
    for name in STEPS:
        done.setdefault(name, {"status": "not run (an earlier step failed)" if name != "record" else "done",
                               "seconds": None, "note": None})
    return {k: done[k] for k in sorted(done, key=lambda k: (STEPS + (k,)).index(k))}


def machine(summary: dict | None, kernels: dict | None) -> tuple[dict, str | None]:
    """The machine the steps ran on, as their own files name it: a training run's summary (its
    device and ``software``), else the kernel check's device. (the machine, or {} where no file
    names it; and why not)."""
    soft = (summary or {}).get("software") or {}
    device = ((summary or {}).get("device_name") or _gpu(summary or {}).get("name")
              or (kernels or {}).get("device"))
    if device is None:
        return {}, "no run or kernel check named its device"
    return {"device": device, "cpu": soft.get("host_cpu"), "driver": None,
            "torch": soft.get("torch") or (kernels or {}).get("torch"), "cuda": soft.get("cuda"),
            "triton": soft.get("triton") or (kernels or {}).get("triton"), "python": soft.get("python")}, None


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
            "host_wait_pct": "no step was timed after warm-up",
            "graphs_compiled": "the run compiled nothing (eager)",
            "time_to_full_speed_s": "the steps never ran 8 in a row within 10 % of their shape's median "
                                    "(train/timers.py)"}
WHY_NONE["time_to_full_speed_from_process_start_s"] = WHY_NONE["time_to_full_speed_s"]


def why_none(key: str, s: dict) -> str:
    """Why a run's summary gives no figure for ``key``."""
    if key in ("gpu_util_mean_pct", "tensor_active_mean_pct"):
        return util_reason(s) if key == "gpu_util_mean_pct" or s.get("gpu") is None else "GPM did not run"
    if key == "mfu_pct":
        return s.get("mfu_basis") or "not in the run's summary"
    return WHY_NONE[key] if key in s and key in WHY_NONE else "not in the run's summary"


def build(work: Path, smoke: bool = False, given_commit: str | None = None) -> dict:
    """The record of one gpu_run.sh work folder."""
    missing: dict[str, str] = {}
    ran = steps(work)
    cold = _load(work / "runs" / "cold" / "summary.json")
    eager = _load(work / "runs" / "eager" / "summary.json")  # the fallback when the compiled run failed
    util_run = cold if cold and not eager else eager
    if cold is None:
        why = ran["cold"]["note"] or "runs/cold/summary.json missing"
        missing["runs.cold"] = f"step cold: {ran['cold']['status']} ({why})"

    def pick(s: dict | None, key: str, name: str, run: str = "cold"):
        v = run_figures(s)[key] if s else None
        if v is None:
            missing[name] = why_none(key, s) if s else missing.get(f"runs.{run}", f"no {run} run")
        return v

    warm = _load(work / "runs" / "warm" / "summary.json")  # the cold run resumed on its artifacts
    if warm is None:
        missing["runs.warm"] = f"step warm: {ran['warm']['status']}" + (
            f" ({ran['warm']['note']})" if ran["warm"]["note"] else "")
    kernels = _load(work / "kernels.json")
    if kernels is None:
        missing["kernels_ok"] = f"step corpus: {ran['corpus']['status']} (kernels.json missing)"
    attention = _load(work / "attention.json")
    if attention is None:
        missing["attention"] = f"step corpus: {ran['corpus']['status']} (attention.json missing)"
    prof = _load(work / "profile.json")
    if prof is None:
        missing["profile"] = f"step profile: {ran['profile']['status']}" + (
            f" ({ran['profile']['note']})" if ran["profile"]["note"] else "")
    where, why = commit(given_commit)
    if where is None:
        missing["commit"] = why
    mfu = pick(cold, "mfu_pct", "mfu_pct")
    ran_on, why = machine(cold or eager or warm, kernels)
    if why:
        missing["machine"] = why

    def both(key: str) -> dict:
        return {"cold": pick(cold, key, f"{key}.cold"), "warm": pick(warm, key, f"{key}.warm", "warm")}
    return {
        "what": ("a toy run of benchmarks/gpu_run.sh --smoke on a CPU: it checks the script and the "
                 "record; no figure in it describes a GPU") if smoke else
                ("MyXTTS on one GPU after the launch-overhead work: benchmarks/gpu_run.sh "
                 "(compare h100-2026-11-23-before)"),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "smoke": smoke,
        "machine": ran_on,
        "commit": where,
        "kernels_ok": None if kernels is None else bool(kernels.get("ok")),
        "decoder": "autoregressive (the kernel check failed)" if kernels is not None and not kernels.get("ok")
                   else "duration (the default)",
        "gpu_util_mean_pct": pick(util_run, "gpu_util_mean_pct", "gpu_util_mean_pct",
                                  "eager" if util_run is eager and eager else "cold"),
        "gpu_util_from": "eager fallback run" if eager else "cold run",
        "mfu_pct": mfu,
        "mfu_from": "cold run, every timed step",
        "mfu_basis": (cold or {}).get("mfu_basis"),
        "tensor_active_mean_pct": pick(cold, "tensor_active_mean_pct", "tensor_active_mean_pct"),
        "graphs_compiled": pick(cold, "graphs_compiled", "graphs_compiled"),
        "input_bound_pct": pick(cold, "input_bound_pct", "input_bound_pct"),
        "host_wait_pct": pick(cold, "host_wait_pct", "host_wait_pct"),
        "recompiles_after_warmup": both("recompiles_after_warmup"),
        "time_to_full_speed_s": both("time_to_full_speed_s"),
        "time_to_full_speed_from_process_start_s": both("time_to_full_speed_from_process_start_s"),
        "compile_artifacts_loaded_warm": (warm or {}).get("compile_artifacts_loaded"),
        "not_measured": missing,
        "steps": ran,
        "runs": {k: run_figures(v) if v else None for k, v in (("cold", cold), ("warm", warm), ("eager", eager))},
        "profile": profile_figures(prof) if prof else None,
        "kernels": kernels,
        "attention": attention,
        "raw": {"train_cold": cold, "train_warm": warm, "train_eager": eager},
    }


def stem_for(record: dict, out: Path, smoke: bool) -> Path:
    """OUT/record in a smoke run, else OUT/<chip>-<date>-after: the name it gets in benchmarks/results."""
    if smoke:
        return out / "record"
    name = (record["machine"].get("device") or "unknown device").lower()
    # "NVIDIA H100 80GB HBM3" -> h100: the chip's name where there is one
    chip = re.search(r"\b[a-z]+\d{2,4}[a-z]?\b", name.replace("nvidia", ""))
    slug = chip.group(0) if chip else re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:40]
    return out / f"{slug}-{record['date']}-after"


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
    lines = [f"# {title}: {m.get('device') or 'machine not known'}, {r['date']}", "", r["what"] + ".", "",
             f"Machine (as the runs name it): {m.get('device') or 'not known'}; CPU {m.get('cpu') or 'n/a'}; "
             f"PyTorch {m.get('torch') or 'n/a'} (CUDA {m.get('cuda') or 'none'}, Triton {m.get('triton') or 'n/a'}); "
             f"Python {m.get('python') or 'n/a'}. Commit: {where}. "
             f"Produced by `bash benchmarks/gpu_run.sh{' --smoke' if r['smoke'] else ''}`; everything "
             f"measured is in `{stem.name}.json`. Model: {r['decoder']}.", "",
             "| figure | value |", "|---|---|",
             f"| aligner kernels pass their check (benchmarks/gpu_kernels.py) | {fig('kernels_ok')} |",
             f"| GPU utilisation, mean % (NVML, {r['gpu_util_from']}, training time) | {fig('gpu_util_mean_pct')} |",
             f"| MFU % ({r['mfu_from']}{'; ' + r['mfu_basis'] if r['mfu_basis'] else ''}) | {fig('mfu_pct')} |",
             f"| tensor cores active, mean % (GPM, cold run) | {fig('tensor_active_mean_pct')} |",
             f"| graphs compiled before step 1 (cold run; 1 serves every shape) | {fig('graphs_compiled')} |",
             f"| input-bound % (cold run: the GPU idle while the loop waited for data) | {fig('input_bound_pct')} |",
             f"| host wait % (cold run: the loop waiting for data, the GPU busy or not) | {fig('host_wait_pct')} |"]
    for k in ("cold", "warm"):
        lines.append(f"| recompiles after warm-up, {k} | {fig('recompiles_after_warmup', k)} |")
    for k in ("cold", "warm"):
        lines.append(f"| time to full speed s, {k} | {fig('time_to_full_speed_s', k)} |")
    for k in ("cold", "warm"):
        lines.append(f"| ... from process start s, {k} | {fig('time_to_full_speed_from_process_start_s', k)} |")
    rows = [("steps", "steps"), ("compile", "compile"), ("precision", "precision"), ("batch shapes", "shapes"),
            ("frame budget", "frame_budget"), ("compile s", "compile_s"), ("compile s by shape", "compile_s_by_shape"),
            ("compile phases s (dynamo's timers, in the process that compiled)", "phases"),
            ("graphs compiled before step 1", "graphs_compiled"), ("compile cache hits / misses", None),
            ("compiled kernels loaded from the run", "compile_artifacts_loaded"),
            ("CUDA graphs skipped / recorded", "cudagraphs"),
            ("time to full speed s", "time_to_full_speed_s"),
            ("... from process start s", "time_to_full_speed_from_process_start_s"),
            ("step ms (mean after warm-up)", "step_ms"), ("step time CoV %", "step_cov_pct"),
            ("mel frames/s", "frames_per_s"), ("input-bound %", "input_bound_pct"),
            ("GPU utilisation mean %", "gpu_util_mean_pct"), ("GPU utilisation p5 %", "gpu_util_p5_pct"),
            ("GPM SM active mean %", "gpm_sm_active_mean_pct"), ("GPM tensor active mean %", "tensor_active_mean_pct"),
            ("MFU %", "mfu_pct"), ("SM clock mean / highest MHz", "clocks"), ("diagnosis", "diagnosis"),
            ("peak memory GiB (allocator reserved)", "peak_memory_gib"),
            ("peak memory % of capacity", "peak_memory_pct"), ("allocator retries", "alloc_retries"),
            ("out-of-memory errors", "ooms"),
            ("recompiles after warm-up", "recompiles_after_warmup")]
    lines += ["", "## The training runs", "",
              "cold: an empty compile cache; warm: the cold run resumed in a second process on an empty compile "
              "cache of its own, with the kernels the cold run saved (`RUN/compiled.bin`); eager: the fallback "
              "where the compiled run failed.", "",
              "| | cold | warm | eager (fallback) |", "|---|---:|---:|---:|"]
    for label, key in rows:
        cells = []
        for k in ("cold", "warm", "eager"):
            run = r["runs"][k]
            if run is None:
                cells.append("not run")
            elif key is None:
                cells.append(f"{_v(run['compile_cache_hits'])} / {_v(run['compile_cache_misses'])}")
            elif key == "cudagraphs":
                cells.append(f"{_v(run['cudagraph_skips'])} / {_v(run['cudagraph_recordings'])}")
            elif key == "phases":
                phases = run["compile_phases_s"] or {}
                cells.append("; ".join(f"{name} {_v(v)}" for name, v in phases.items()) or "n/a")
            elif key == "clocks":
                cells.append(f"{_v(run['sm_clock_mean_mhz'])} / {_v(run['sm_clock_max_mhz'])}")
            else:
                cells.append(_v(run[key]))
        lines.append(f"| {label} | {' | '.join(cells)} |")
    lines += ["", "n/a: not measured here, or not applicable (an eager run compiles nothing).", ""]
    lines += profile_markdown(r["profile"], nm.get("profile"))
    lines += attention_markdown(r["attention"], nm.get("attention"))
    lines += ["", "## Steps", "", "| step | status | s | note |", "|---|---|---:|---|"]
    for name, p in r["steps"].items():
        lines.append(f"| {name} | {p['status']} | {_v(p['seconds'])} | {(p['note'] or '').replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def profile_markdown(p: dict | None, why: str | None) -> list[str]:
    """The record's section on where a step's time goes (``myxtts profile``)."""
    lines = ["## Where a step's time goes (`myxtts profile`)", ""]
    if p is None:
        return lines + [f"Not measured ({why})."]
    kind = "kernels by GPU time" if p["top_kind"] == "kernels" else "CPU ops by self time (no GPU)"
    lines += [f"{_v(p['steps'])} profiled steps on {p['device']}, compile {p['compile']}, {p['precision']}: "
              f"step {_v(p['step_ms'])} ms; GPU busy {_v(p['gpu_busy_pct'])} % of it (kernels only); "
              f"{_v(p['kernels_per_step'])} kernels per step, median {_v(p['median_kernel_us'])} µs; host "
              f"launching {_v(p['cpu_dispatch_pct'])} % of the step; host syncs per step "
              f"{_v(p['host_syncs_per_step']) if p['host_syncs_per_step'] is not None else p['host_syncs_note']}; "
              f"recompiles {_v(p['recompiles'])}; MFU {_v(p['mfu_pct'])} %. Verdict: {_v(p['verdict'])}.", "",
              "| phase | ms per step | % |", "|---|---:|---:|"]
    for name, v in (p["breakdown"] or {}).items():
        lines.append(f"| {name} | {_v(v.get('ms'))} | {_v(v.get('pct'))} |")
    lines += ["", f"Top {len(p['top'])} {kind}:", "", "| % | ms in all | calls | name |", "|---:|---:|---:|---|"]
    for t in p["top"]:
        lines.append(f"| {_v(t['pct'])} | {_v(t['total_ms'])} | {t['calls']} | "
                     f"`{str(t['name'])[:100].replace('|', '/').replace('`', '')}` |")
    return lines


def attention_markdown(a: dict | None, why: str | None) -> list[str]:
    """The record's section on the attention kernels (``benchmarks/gpu_attention.py``)."""
    lines = ["", "## Attention kernels (`benchmarks/gpu_attention.py`)", ""]
    if a is None:
        return lines + [f"Not measured ({why})."]
    why_stopped = f" ({' '.join(a['error'].split())})" if a.get("error") else ""
    lines += [f"{a['device']}, {a['dtype']}, {a.get('heads')} heads of {a.get('head_dim')}, dropout "
              f"{a.get('dropout')}: {a['status']}{why_stopped}. "
              "Error: the largest of output and gradients against fp32, relative to its largest value; "
              "ms: a forward and backward with dropout (median); graph: it replays in a CUDA graph.", "",
              "| shape | attention | " + " | ".join(a["candidates"]) + " |",
              "|---|---|" + "---:|" * len(a["candidates"])]

    def short(text: str) -> str:
        return " ".join(text.split())[:80].replace("|", "/")

    for res in a["results"]:
        cells = []
        for name in a["candidates"]:
            c = (res.get("candidates") or {}).get(name)
            if c is None:
                cells.append(f"not run: {short(res.get('error', ''))}")
                continue
            if "agreement" not in c:
                cells.append(f"refused: {short(c.get('error', ''))}")
                continue
            err = max(v for k, v in c["agreement"].items() if k != "ok")
            cell = f"error {err:.2g}{'' if c['agreement']['ok'] else ' (disagrees)'}"
            if "ms_forward_backward" in c:
                cell += f", {_v(c['ms_forward_backward'])} ms"
            if "cuda_graph" in c:
                g = c["cuda_graph"]
                cell += f", graph {'ok' if g['ok'] else 'fails: ' + short(g.get('error', 'not finite'))}"
            if c.get("error"):
                cell += f", {short(c['error'])}"
            cells.append(cell)
        lines.append(f"| {'x'.join(map(str, res['shape']))} | {res['attention']} | {' | '.join(cells)} |")
    for kind, f in sorted((a.get("fastest") or {}).items()):
        against = (f"{_v(f['speedup_over_efficient'])}x today's efficient kernel" if f["speedup_over_efficient"]
                   else "today's efficient kernel did not qualify")
        lines.append(f"\nFastest for {kind}, summed over the shapes: {f['fastest']} ({against}; "
                     f"ms {f['ms_summed_over_shapes']}).")
    if a.get("not_run"):
        lines += ["", f"Not run: {a['not_run']}."]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description="the record of one benchmarks/gpu_run.sh work folder")
    ap.add_argument("work", help="the work folder gpu_run.sh wrote")
    ap.add_argument("--out", required=True, help="the folder the record goes to")
    ap.add_argument("--smoke", action="store_true", help="a toy run on a CPU: write OUT/record.{json,md}")
    ap.add_argument("--commit", help="the commit the tree is at, where it is no git checkout")
    a = ap.parse_args()
    work = Path(a.work)
    if not (work / "steps.tsv").is_file():
        ap.error(f"{work}: not a gpu_run.sh work folder (no steps.tsv in it)")
    record = build(work, a.smoke, a.commit)
    stem = stem_for(record, Path(a.out), a.smoke)
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    stem.with_suffix(".md").write_text(markdown(record, stem))
    print(f"wrote {stem}.json and .md")


if __name__ == "__main__":
    main()
