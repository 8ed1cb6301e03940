import json
import os
import re
import signal
import subprocess
import sys

import torch
from safetensors.torch import load_file

from myxtts.rundir import RunDir
from myxtts.train.watchdog import EXIT_STALLED

from .conftest import FAST, ROOT, losses

FAULT = ROOT / "tests" / "train" / "ddp_fault.py"


def _torchrun(cache, out, nproc, *overrides):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
           "--master_port", str(29500 + os.getpid() % 1000 + nproc),
           "-m", "myxtts", "train", "--config", "tiny", "--data", str(cache), "--out", str(out),
           "--no-progress", *FAST, *overrides]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)


def test_two_process_gloo_matches_one_process_with_the_same_global_batch(lj_cache, tmp_path):
    # Two steps stay inside the first epoch, before the DDP sampler's whole-batch filler (which
    # evens out ranks at an epoch's end) makes the two runs' batch sequences differ.
    steps = ["train.max_steps=2", "train.checkpoint_every=2", "model.dropout=0.0",
             "model.prenet_dropout=0.0", "model.ref_dropout=0.0"]
    two = _torchrun(lj_cache, tmp_path / "two", 2, *steps)
    assert two.returncode == 0, two.stderr[-3000:]
    # One process with two micro-batches per step consumes the same global batches (rank r of
    # W takes batches r, r+W, ...), so the averaged losses agree up to reduction order; step 2's
    # loss also checks that the first update was the same.
    one = _torchrun(lj_cache, tmp_path / "one", 1, *steps, "train.grad_accum=2")
    assert one.returncode == 0, one.stderr[-3000:]
    a, b = losses(tmp_path / "two"), losses(tmp_path / "one")
    assert sorted(a) == [1, 2]
    for step in a:
        assert abs(a[step] - b[step]) < 1e-3 * abs(b[step]), (step, a[step], b[step])
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["params_identical_across_ranks"] is True
    # rank 0 alone wrote the checkpoint; a second run resumes under DDP too.
    assert len(list((tmp_path / "two" / "checkpoints").glob("step-*"))) == 1
    again = _torchrun(lj_cache, tmp_path / "two", 2, *steps[1:], "train.max_steps=3")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from" in again.stderr and 3 in losses(tmp_path / "two")


def _launch(entry, cache, out, *overrides, restarts=0, fault=None, timeout_s=600):
    """Two gloo processes as the README launches them on one node; ``entry``: ``["-m",
    "myxtts"]``, or ``[FAULT]`` with ``fault`` (``KIND:RANK:STEP``, tests/train/ddp_fault.py).
    Everything it started is killed if it outlives ``timeout_s``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "--max-restarts", str(restarts), *map(str, entry), "train", "--config", "tiny",
           "--data", str(cache), "--out", str(out), "--no-progress", *FAST, *overrides]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    if fault:
        env["MYXTTS_TEST_FAULT"] = fault
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=ROOT, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    finally:
        try:  # what is left of the session: workers a failed launch left behind, too
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return proc.returncode, output


def _weights(run, step):
    return load_file(str(RunDir(run).step_weights(step)))


def test_a_rank_killed_mid_run_is_restarted_by_torchrun_and_resumes_exactly(lj_cache, tmp_path):
    """torchrun --max-restarts 1: rank 0, the one writing, SIGKILLs itself as it starts step 5;
    torchrun stops rank 1, starts both again, and they resume from step 4's checkpoint without
    being told: the final weights are those of a run never killed, bit for bit."""
    steps = ["train.max_steps=6", "train.checkpoint_every=2"]
    rc, whole = _launch(["-m", "myxtts"], lj_cache, tmp_path / "whole", *steps, restarts=1)
    assert rc == 0, whole[-4000:]
    rc, killed = _launch([FAULT], lj_cache, tmp_path / "killed", *steps, restarts=1, fault="kill:0:5")
    assert rc == 0, killed[-4000:]
    assert "failed (exitcode: -9)" in killed and "resuming from" in killed and "step-00000004" in killed, killed[-4000:]
    assert losses(tmp_path / "killed") == losses(tmp_path / "whole")  # exactly, step by step
    a, b = _weights(tmp_path / "killed", 6), _weights(tmp_path / "whole", 6)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_rank_that_stops_arriving_is_named_by_every_rank_and_the_run_ends(lj_cache, tmp_path):
    """Rank 1 sleeps for good as it starts loading step 3: within the stall timeout, not the
    group's 30 minutes, both ranks name it with its step and phase, show where they wait, and
    end with exit 69 and one line each."""
    rc, out = _launch([FAULT], lj_cache, tmp_path / "run", "train.max_steps=6", "train.stall_timeout_s=5",
                      fault="stall:1:3", timeout_s=300)
    assert rc != 0 and f"exitcode  : {EXIT_STALLED}" in out, out[-4000:]
    named = re.search(r"\n  rank 1: last at step 3 \(loading\), not moved on for (\d+) s; its process is alive\n", out)
    assert named and int(named[1]) <= 5 + 30, out[-4000:]
    assert ("[rank 0] stalled: no rank has moved on for 5 s (train.stall_timeout_s); this rank is at step 3 "
            "(step)") in out
    assert "  rank 1 (this one): last at step 3 (loading)" in out
    assert "in next\n        time.sleep(60)" in out  # rank 1's own stack: where it sleeps
    ends = [line for line in out.splitlines() if line.startswith("myxtts train: error:")]
    assert sorted(ends) == [f"myxtts train: error: rank 1 stopped arriving for 5 s; rank {r} ends with exit "
                            f"{EXIT_STALLED} (run the same command to resume from the last checkpoint)"
                            for r in (0, 1)]
    workers = out.split('Traceback (most recent call last):\n  File "<frozen runpy>"')[0]  # torchrun's own after
    assert "Traceback" not in workers and "ends with exit" in workers
