"""`benchmarks/gpu_run.sh --smoke`: every step of the GPU benchmark at toy size on the CPU, within
its deadline, leaving at most 8 files with a complete record (a figure, or null with the reason);
a deadline too short for a step skips it and still returns a record."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("setup", "corpus", "cold", "warm", "profile", "record")


def gpu_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_run.sh"), *args], cwd=ROOT,
                          env=dict(os.environ, PYTHON=sys.executable), capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_run")
    results = set((ROOT / "benchmarks" / "results").iterdir())
    first = gpu_run("--smoke", "--deadline", "240", str(out))
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
    assert set((ROOT / "benchmarks" / "results").iterdir()) == results  # it writes in OUT only
    return out, first


def test_every_step_runs_and_the_record_has_every_figure_or_why_not(smoke):
    out, first = smoke
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and all((out / f).is_file() for f in files), files
    assert {"gpu_run.log", "kernels.json", "record.json", "record.md", "rest.tgz", "profile.tgz"} <= set(files)
    log = (out / "gpu_run.log").read_text()
    assert log.startswith("== setup") and "machine: " in log.splitlines()[1]  # machine and versions first
    assert "| torch " + torch.__version__ in log
    r = json.loads((out / "record.json").read_text())
    assert [k for k, v in r["steps"].items() if v["status"] == "done"] == list(STEPS), r["steps"]

    assert r["kernels_ok"] is True and r["kernels"]["interpreted"] and r["decoder"].startswith("duration")
    # the attention kernels beside it: on a CPU only the exact comparisons, the CUDA ones named as not run
    att = r["attention"]
    assert att["ok"] and att["candidates"] == ["default", "flash_folded"] and "need a CUDA GPU" in att["not_run"]
    assert "## Attention kernels" in (out / "record.md").read_text()
    # what a CPU cannot measure: null, and the reason
    assert r["gpu_util_mean_pct"] is None and r["not_measured"]["gpu_util_mean_pct"].startswith("no GPU")
    assert r["mfu_pct"] is None and r["not_measured"]["mfu_pct"]
    # the machine the runs ran on, from their own files (here: this CPU, the smoke run's device)
    assert r["machine"]["torch"] == torch.__version__ and r["machine"]["device"] == r["runs"]["cold"]["device"]
    # what it can: numbers, for the cold run and the warm one
    assert isinstance(r["input_bound_pct"], float)
    assert r["recompiles_after_warmup"] == {"cold": 0, "warm": 0}
    # time to full speed: a figure or None (a few steps on a busy machine may not settle:
    # a timing, not asserted); where there is one, from process start counts more than the loop
    assert all(v is None or v > 0 for v in r["time_to_full_speed_s"].values())
    cold = r["runs"]["cold"]
    assert cold["stopped"] == "time budget reached"  # exit 75, counted as success
    full = cold["time_to_full_speed_s"]
    assert full is None or cold["time_to_full_speed_from_process_start_s"] > full
    # time to full speed may be None (above), and then says why
    assert all(f"time_to_full_speed_s.{k}" in r["not_measured"] for k, v in r["time_to_full_speed_s"].items()
               if v is None)
    assert {k for k in r["not_measured"] if not k.startswith("time_to_full_speed")} <= \
        {"gpu_util_mean_pct", "mfu_pct", "commit", "tensor_active_mean_pct", "graphs_compiled"}
    assert r["smoke"] is True and r["machine"]["torch"] == torch.__version__
    # the warm start: the cold run resumed in a second process (eager: what train.compile=auto
    # runs on a CPU, so no compiled kernels to load)
    warm = r["runs"]["warm"]
    assert warm["compile"] == "off" and warm["steps"] > cold["steps"] and warm["stopped"] == "time budget reached"
    assert "time to full speed s, warm" in (out / "record.md").read_text()
    with tarfile.open(out / "rest.tgz") as tgz:
        names = tgz.getnames()
    assert any(n.endswith("runs/cold/summary.json") for n in names) and not any("/cache/" in n for n in names)
    # the profile, on the cold run's batch size: its top ops and phases in the record, its trace apart
    prof = r["profile"]
    assert prof["steps"] == 4 and prof["top_kind"] == "cpu ops" and prof["top"] and prof["step_ms"] > 0
    assert {"forward", "backward", "optimizer"} <= set(prof["breakdown"])
    assert "## Where a step's time goes" in (out / "record.md").read_text()
    with tarfile.open(out / "profile.tgz") as tgz:
        assert "profile/trace.json" in tgz.getnames()


def test_a_deadline_too_short_skips_steps_and_still_records(tmp_path):
    r = gpu_run("--smoke", "--deadline", "35", str(tmp_path))  # setup fits beside the record's reserve
    assert r.returncode == 0, r.stdout[-3000:]
    rec = json.loads((tmp_path / "record.json").read_text())
    assert rec["steps"]["corpus"]["status"] == "skipped" and "--deadline 35" in rec["steps"]["corpus"]["note"]
    assert rec["steps"]["cold"]["status"].startswith("not run")
    assert rec["profile"] is None and rec["not_measured"]["profile"].startswith("step profile: not run")
    assert rec["input_bound_pct"] is None and rec["not_measured"]["input_bound_pct"]


def test_bad_input_is_one_clear_line(tmp_path):
    r = gpu_run("--smoke", "--deadline", "soon", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["gpu_run.sh: --deadline takes whole seconds, got 'soon'"]
    r = gpu_run("--smoke", str(tmp_path), "train-warm")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    r = gpu_run("--help")
    assert r.returncode == 0 and "bash benchmarks/gpu_run.sh [--smoke] [--deadline SECONDS] OUT" in r.stdout


def test_the_record_reads_a_gpu_runs_summaries(tmp_path):
    """The GPU path of the record, on the summaries of the first H100 run (its eager run as the
    cold one); those summaries predate time to full speed, which then is null with the reason."""
    spec = importlib.util.spec_from_file_location("gpu_record", ROOT / "benchmarks" / "gpu_record.py")
    gpu_record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_record)
    h100 = ROOT / "tests" / "fixtures" / "h100-2026-11-23"
    (tmp_path / "runs" / "cold").mkdir(parents=True)
    summary = json.loads((h100 / "eager-base-summary.json").read_text())
    summary["compile_beside"] = {"phases_s": {"all": 80.5, "dynamo": 6.1}}  # as the compiler reports them
    (tmp_path / "runs" / "cold" / "summary.json").write_text(json.dumps(summary))
    shutil.copy(h100 / "profile_eager_base.json", tmp_path / "profile.json")
    (tmp_path / "steps.tsv").write_text("setup\tdone\t20\t\ncorpus\tdone\t70\t\ncold\tdone\t200\t\n"
                                        "warm\tskipped\t0\tits estimate (90 s) did not fit\nprofile\tdone\t80\t\n")
    r = gpu_record.build(tmp_path, given_commit="2732f51")
    assert r["gpu_util_mean_pct"] == pytest.approx(32.16, abs=0.01)
    assert r["input_bound_pct"] == pytest.approx(1.49, abs=0.01)
    assert r["recompiles_after_warmup"] == {"cold": 0, "warm": None}
    assert r["time_to_full_speed_s"] == {"cold": None, "warm": None}
    assert r["not_measured"]["time_to_full_speed_s.cold"] == "not in the run's summary"
    assert r["mfu_pct"] is None and r["not_measured"]["mfu_pct"] == "not in the run's summary"  # predates MFU
    # the machine is the one the summary names, not the one reading it
    assert r["machine"]["device"] == "NVIDIA H100 80GB HBM3"
    assert r["kernels_ok"] is None and "kernels.json missing" in r["not_measured"]["kernels_ok"]
    assert r["commit"] == "2732f51" and "commit" not in r["not_measured"]
    # the profile of that machine: kernels by GPU time, the host's launch share
    prof = r["profile"]
    assert prof["device"] == "NVIDIA H100 80GB HBM3" and prof["top_kind"] == "kernels" and len(prof["top"]) == 10
    assert prof["kernels_per_step"] == pytest.approx(2905, abs=1) and prof["cpu_dispatch_pct"] > 90
    md = gpu_record.markdown(r, tmp_path / "h100-2026-11-26-after")
    assert "| warm | skipped | 0 | its estimate (90 s) did not fit |" in md
    assert "Top 10 kernels by GPU time:" in md and "| backward | 51.7 | 56.8 |" in md
    assert "| compile phases s (dynamo's timers, in the process that compiled) | all 80.5; dynamo 6.1 | not run |" in md
    # a run that compiled up front has them in its own summary
    assert gpu_record.run_figures({"compile_phases_s": {"all": 3.5}})["compile_phases_s"] == {"all": 3.5}


def test_the_record_says_what_each_attention_kernel_did():
    """The record's attention table on a report of the shape a GPU writes: a kernel that agreed,
    one refused, one that agreed but failed with dropout and in a graph, a shape whose reference
    did not run; and a report that never came."""
    spec = importlib.util.spec_from_file_location("gpu_record", ROOT / "benchmarks" / "gpu_record.py")
    gpu_record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_record)
    agreed = {"out": 0.004, "dq": 0.009, "dk": 0.006, "dv": 0.003, "ok": True}
    report = {"device": "NVIDIA H200", "dtype": "bfloat16", "heads": 10, "head_dim": 64, "dropout": 0.1,
              "status": "done", "candidates": ["efficient", "cudnn", "flash_folded"], "results": [
                  {"shape": [208, 48, 128], "attention": "frames", "candidates": {
                      "efficient": {"agreement": agreed, "ms_forward_backward": 1.5, "cuda_graph": {"ok": True},
                                    "ok": True},
                      "cudnn": {"ok": False, "error": "RuntimeError: No available kernel.\nAborting execution."},
                      "flash_folded": {"agreement": agreed, "error": "with dropout 0.1: RuntimeError: | bad",
                                       "cuda_graph": {"ok": False, "error": "RuntimeError: capture\nfailed"},
                                       "ok": False}}},
                  {"shape": [62, 160, 624], "attention": "frames", "error": "reference: OutOfMemoryError: CUDA"}],
              "fastest": {"frames": {"ms_summed_over_shapes": {"efficient": 1.5}, "fastest": "efficient",
                                     "speedup_over_efficient": 1.0}}}
    md = "\n".join(gpu_record.attention_markdown(report, None))
    rows = [line for line in md.splitlines() if line.startswith("| 208x48x128") or line.startswith("| 62x160x624")]
    assert len(rows) == 2 and all(r.count("|") == 6 for r in rows), rows  # no cell breaks the table
    assert "error 0.009, 1.5 ms, graph ok" in rows[0]
    assert "refused: RuntimeError: No available kernel. Aborting execution." in rows[0]
    assert "graph fails: RuntimeError: capture failed, with dropout 0.1: RuntimeError: / bad" in rows[0]
    assert rows[1].count("not run: reference: OutOfMemoryError: CUDA") == 3
    assert "Fastest for frames, summed over the shapes: efficient (1x today's efficient kernel" in md
    assert gpu_record.attention_markdown(None, "step corpus: skipped")[-1] == "Not measured (step corpus: skipped)."
