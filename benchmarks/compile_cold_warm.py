"""Compile time of the training step with inductor, cold and warm, one shape and all shapes.

    python benchmarks/compile_cold_warm.py [--data CACHE] [--preset tiny] [--shapes 4]
                                           [--compile default|regional] [--measure ...] [--json out.json]

Three measurements, each in a process of its own (the in-process caches start empty) and each
timing ``train.compile.compile_shapes`` (forward, loss and backward of one batch per bucket
shape, as a training run does before step 1) on the ``--preset`` (tiny) with
``train.compile=default`` (or ``--compile regional``) on this machine's device. "Cold" means
cold: every measurement has a compile cache folder of its own, and its own temporary folder,
where torch keeps its default caches, so nothing compiled by an earlier measurement is found;
each reports inductor's and AOTAutograd's cache hits to show it.

1. ``cold_one_shape``: one bucket shape (``data.max_buckets=1``), fresh compile cache;
2. ``cold_all_shapes``: ``--shapes`` buckets, fresh compile cache;
3. ``warm_all_shapes``: the same in a second process, reusing the cache of 2;
4. ``warm_one_shape`` (only when asked with ``--measure``): 1 again, reusing the cache of 1.

Each measurement then runs every shape once more and counts the graphs compiled (must be 0).
That second pass is timed too (``step_s``): the first pass ran each step as well as compiling
it, and on a CPU a step of ``base`` is a large part of that first pass, so ``compile_only_s``
(the first pass less the second) is the compile with what else a shape's first run costs, and
``phases_s`` has dynamo's own timers for the compile's phases (``train.compile.COMPILE_PHASES``).
Without ``--data`` the test fixture corpus (8 LJSpeech clips, each linked 20 times by
``replicate_corpus.py`` so that 4 buckets are worth planning) is prepared into a temporary
folder. The load average is recorded before each measurement: compile time is CPU-bound, and on
a shared machine it moves with what else runs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "ljspeech"


def _cpu_model() -> str:
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True, cwd=ROOT).stdout.strip()
    return r.stdout.strip() + ("+changes" if dirty else "")


def measure(data: str, preset: str, shapes: int, mode: str) -> dict:
    """One measurement in this process (the compile cache is wherever the environment says)."""
    import torch

    from myxtts.config import load
    from myxtts.data.sampler import shape_plans
    from myxtts.train.batches import BucketBatches
    from myxtts.train.build import build_run
    from myxtts.train.compile import CompileTally, compile_shapes, compiled_graphs
    from myxtts.train.precision import sync

    cfg = load(preset, [f"data.max_buckets={shapes}", "data.num_workers=0", f"train.compile={mode}"])
    run = build_run(cfg, data, with_batches=False)
    tally = CompileTally()
    per_shape = compile_shapes(run)
    seconds = sum(per_shape)
    did = tally.read()
    graphs, hits, misses = compiled_graphs(), did["compile_cache_hits"], did["compile_cache_misses"]
    bb = BucketBatches(run.cache, run.cfg, run.device)
    step_s = []
    with torch.random.fork_rng(devices=[]):
        for plan in shape_plans(run.sampler):  # every shape again: nothing may compile now
            batch = bb.device_batch(plan).tensors
            t = time.perf_counter()
            run.step_fn.compile_shape(batch)
            sync(run.device)
            step_s.append(time.perf_counter() - t)
    from torch._dynamo.utils import counters

    return {"shapes": [list(s) for s in run.shapes], "compile_s": round(seconds, 1),
            "per_shape_s": [round(s, 1) for s in per_shape],
            "step_s": round(sum(step_s), 1), "compile_only_s": round(seconds - sum(step_s), 1),
            "phases_s": did["phases_s"],
            "graphs_compiled": graphs, "recompiles_after_warm_up": compiled_graphs() - graphs,
            "fxgraph_cache_hits": hits, "fxgraph_cache_misses": misses,
            "aot_autograd_cache_hits": int(counters["aot_autograd"]["autograd_cache_hit"]),
            "cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}


def _child(data: str, preset: str, shapes: int, cache: Path, mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    env["MYXTTS_COMPILE_CACHE"] = str(cache)
    env["TMPDIR"] = str(cache / "tmp")  # torch's default cache folders live under it
    (cache / "tmp").mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    cmd = [sys.executable, __file__, "--one", "--data", data, "--preset", preset, "--shapes", str(shapes),
           "--compile", mode]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode:
        raise SystemExit(f"measurement failed:\n{r.stderr[-4000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out.update(process_wall_s=round(time.perf_counter() - t0, 1), loadavg_before=[round(x, 2) for x in load],
               command=" ".join(["MYXTTS_COMPILE_CACHE=" + str(cache)] + cmd[1:]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="prepared cache (default: the test fixture, prepared now)")
    ap.add_argument("--preset", default="tiny", help="model preset (configs/)")
    ap.add_argument("--shapes", type=int, default=4, help="data.max_buckets of the all-shapes runs")
    ap.add_argument("--compile", default="default", choices=["default", "regional"], help="train.compile")
    ap.add_argument("--measure", default="cold_one_shape,cold_all_shapes,warm_all_shapes",
                    help="comma-separated, in order: cold_one_shape, cold_all_shapes, warm_all_shapes, "
                    "warm_one_shape (a warm one follows its cold one)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(a.data, a.preset, a.shapes, a.compile)))
        return
    import torch

    tmp = Path(tempfile.mkdtemp(prefix="myxtts-compile-bench-"))
    data = a.data
    if data is None:
        from myxtts.config import load
        from myxtts.data.prepare import prepare

        # 20 copies of each clip: enough utterances per bucket for the planner to use 4 buckets
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "replicate_corpus.py"), str(FIXTURE),
                        str(tmp / "corpus"), "--copies", "20"], check=True, capture_output=True)
        data = str(tmp / "cache")
        prepare(tmp / "corpus", data, load(a.preset), progress=False)
    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": {
        "cpu": _cpu_model(), "cpus": os.cpu_count(), "gpu": None}, "torch": torch.__version__,
        "commit": _commit(), "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "preset": a.preset, "backend": "inductor", "device": "cpu", "mode": a.compile}
    plans = {"cold_one_shape": (1, tmp / "one"), "warm_one_shape": (1, tmp / "one"),
             "cold_all_shapes": (a.shapes, tmp / "all"), "warm_all_shapes": (a.shapes, tmp / "all")}
    for name in a.measure.split(","):
        n, cache = plans[name]
        print(f"{name}: data.max_buckets={n}, cache {cache} ...", file=sys.stderr, flush=True)
        res[name] = _child(data, a.preset, n, cache, a.compile)
        res[f"{name}_s"] = res[name]["compile_s"]
        res["shapes"] = res[name]["shapes"] if n == a.shapes else res.get("shapes")
        print(f"  {res[name]['compile_s']} s, per shape {res[name]['per_shape_s']}", file=sys.stderr, flush=True)
        if a.json:  # written after each measurement: a partial record survives an interruption
            Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    for ratio, (num, den) in {"cold_all_over_cold_one": ("cold_all_shapes", "cold_one_shape"),
                              "warm_all_over_cold_all": ("warm_all_shapes", "cold_all_shapes"),
                              "warm_one_over_cold_one": ("warm_one_shape", "cold_one_shape")}.items():
        if num in res and den in res:
            # compile_s has the steps in it (on a CPU, much of a warm start), compile_only_s not
            for key, name in (("compile_s", ratio), ("compile_only_s", ratio + "_compile_only")):
                if res[den][key] > 0:
                    res[name] = round(res[num][key] / res[den][key], 3)
    text = json.dumps(res, indent=2)
    if a.json:
        Path(a.json).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
