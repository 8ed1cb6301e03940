"""`benchmarks/gpu_run.sh --smoke`: every phase of the GPU benchmark at toy size on the CPU, the
record complete (a figure, or null with the reason), and a second invocation skipping what is
done."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("setup", "corpus", "loader", "bench", "train-cold", "train-warm", "record")


def gpu_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_run.sh"), *args], cwd=ROOT,
                          env=dict(os.environ, PYTHON=sys.executable), capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_run")
    results = set((ROOT / "benchmarks" / "results").iterdir())
    first = gpu_run("--smoke", str(out))
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
    assert set((ROOT / "benchmarks" / "results").iterdir()) == results  # a smoke run records in OUT only
    return out, first


def test_every_phase_runs_and_the_record_has_every_figure_or_why_not(smoke):
    out, first = smoke
    for phase in PHASES:
        assert f"== {phase}\n" in first.stdout
        assert (out / ".done" / phase).read_text().startswith("finished ")
    assert (out / "record.md").is_file()
    r = json.loads((out / "record.json").read_text())

    # what a CPU cannot measure: null, and the reason
    assert r["gpu_util_mean_pct"] is None and r["not_measured"]["gpu_util_mean_pct"].startswith("no GPU")
    assert r["mfu_pct"] is None and r["not_measured"]["mfu_pct"]
    # what it can: numbers, for the cold run and the warm one
    assert isinstance(r["input_bound_pct"], float)
    assert r["recompiles_after_warmup"] == {"cold": 0, "warm": 0}
    for run in ("cold", "warm"):
        assert r["time_to_full_speed_s"][run] > 0
        # the time budget ended both runs (exit 75), and that counted as success
        assert r["runs"][run]["stopped"] == "time budget reached"
    assert set(r["not_measured"]) <= {"gpu_util_mean_pct", "mfu_pct", "commit"}
    assert r["commit"] or r["not_measured"]["commit"]
    assert r["smoke"] is True
    assert r["machine"]["device"] and r["machine"]["torch"] == torch.__version__
    assert r["bench_train"]["mode"] == "eager_fp32"  # what train.compile=auto runs on a CPU
    assert r["phases"]["train-cold"]["commands"][0].startswith("myxtts train --config tiny")
    assert "time to full speed s, warm" in (out / "record.md").read_text()


def test_a_second_invocation_skips_the_done_phases(smoke):
    out, _ = smoke
    written = (out / "record.json").stat().st_mtime_ns
    again = gpu_run("--smoke", str(out))
    assert again.returncode == 0, again.stderr
    for phase in PHASES:
        assert f"== {phase}: done (finished " in again.stdout
    assert (out / "record.json").stat().st_mtime_ns == written


def test_a_phase_run_again_forgets_the_record_and_keeps_what_it_did_not_feed(smoke):
    out, _ = smoke
    (out / ".done" / "setup").unlink()
    again = gpu_run("--smoke", str(out), "setup")
    assert again.returncode == 0, again.stderr
    assert (out / ".done" / "setup").is_file() and (out / ".done" / "train-warm").is_file()
    assert not (out / ".done" / "record").exists()


def test_bad_input_is_one_clear_line(tmp_path):
    r = gpu_run("--smoke", str(tmp_path), "warm")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "gpu_run.sh: unknown phase 'warm'; phases: setup corpus loader bench train-cold train-warm record"]
    r = gpu_run("--smoke", str(tmp_path), "train-warm")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "phase train-warm needs phase setup done first" in r.stderr
    r = gpu_run("--help")
    assert r.returncode == 0 and "bash benchmarks/gpu_run.sh [--smoke] OUT [PHASE ...]" in r.stdout


def test_the_record_reads_a_gpu_runs_summaries(tmp_path):
    """The GPU path of the record, on the summaries of the first H100 run (an eager run as the
    cold one, a run that only compiled as the warm one); those summaries predate time to full
    speed, which then is null with the reason."""
    spec = importlib.util.spec_from_file_location("gpu_record", ROOT / "benchmarks" / "gpu_record.py")
    gpu_record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_record)
    h100 = ROOT / "tests" / "fixtures" / "h100-2026-11-23"
    for run, source in (("run-cold", "eager-base-summary.json"), ("run-warm", "compile-default-base-summary.json")):
        (tmp_path / run).mkdir()
        shutil.copy(h100 / source, tmp_path / run / "summary.json")
    (tmp_path / ".done").mkdir()
    r = gpu_record.build(tmp_path, given_commit="2732f51")
    assert r["gpu_util_mean_pct"] == pytest.approx(32.16, abs=0.01)
    assert r["input_bound_pct"] == pytest.approx(1.49, abs=0.01)
    assert r["runs"]["warm"]["gpu_util_mean_pct"] == pytest.approx(1.04, abs=0.01)
    assert r["recompiles_after_warmup"] == {"cold": 0, "warm": 0}
    assert r["time_to_full_speed_s"] == {"cold": None, "warm": None}
    assert r["not_measured"]["time_to_full_speed_s.cold"] == "not in the run's summary"
    assert r["mfu_pct"] is None and r["not_measured"]["mfu_pct"].startswith("phase bench not run")
    assert r["commit"] == "2732f51" and "commit" not in r["not_measured"]
