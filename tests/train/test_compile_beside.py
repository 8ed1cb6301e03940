"""Compiling the step in a second process while the run trains eagerly, then switching."""
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from myxtts.config import load
from myxtts.train import compile_beside as B
from myxtts.train.build import build_run
from myxtts.train.compile import compiled_graphs
from myxtts.train.loop import Loop

from .conftest import FAST

# two shapes of more than one row (2 and 3 rows): one graph for both
STILL = [*FAST, "model.dropout=0", "model.prenet_dropout=0", "model.ref_dropout=0", "data.frame_budget=1700"]


class Said:
    def __init__(self):
        self.lines = []

    def say(self, line: str) -> None:
        self.lines.append(line)


def _losses(loop: Loop, n: int) -> list[float]:
    out = []
    for _ in range(n):
        loop.step_once()
        out.append(loop.run.step_fn.read_window()["loss"])
    return out


def test_auto_compiles_beside_on_a_single_gpu_only(lj_cache):
    run = build_run(load("tiny", [*FAST, "train.compile=default"]), lj_cache, with_batches=False)
    assert not B.wanted("auto", run)  # a CPU: the compiler would take the training's cores
    assert B.wanted("on", run) and not B.wanted("off", run)
    gpu = dataclasses.replace(run, device=torch.device("cuda", 0))
    assert B.wanted("auto", gpu)
    assert not B.wanted("auto", dataclasses.replace(gpu, info=dataclasses.replace(run.info, world_size=2)))
    run.step_fn.compile_mode = "regional"  # compiles lazily, block by block: nothing to wait for
    assert not B.wanted("on", run)


def test_the_run_steps_eagerly_while_the_step_compiles_then_compiled(lj_cache, tmp_path):
    """Until the compiler process has finished, the steps are the eager step's (the losses of
    an eager run, to the bit); then the run loads the kernels it saved, compiles nothing anew,
    and steps compiled, continuing the same training; the summary says when it switched."""
    run = build_run(load("tiny", [*STILL, "train.compile=default"]), lj_cache)
    eager = Loop(build_run(load("tiny", STILL), lj_cache))
    loop, said = Loop(run), Said()
    beside = B.CompileBeside(run, tmp_path, said)
    assert not run.step_fn.compiled  # compiled at build, eager until the switch
    assert _losses(loop, 2) == _losses(eager, 2)
    assert beside.proc.wait(timeout=900) == 0, (tmp_path / B.FOLDER / B.LOG).read_text()[-2000:]
    assert len(run.shapes) == 2 and min(b for b, _, _ in run.shapes) > 1
    graphs = compiled_graphs()
    assert beside.poll(2) and not beside.poll(3)  # one switch
    assert run.step_fn.compiled and compiled_graphs() == graphs + 1
    after = _losses(loop, 4)
    assert compiled_graphs() == graphs + 1  # one graph for both shapes, compiled at the switch
    torch.testing.assert_close(after, _losses(eager, 4), rtol=1e-4, atol=0)
    summary = beside.finish(6)
    assert summary["steps_eager"] == 2 and summary["compile_s"] is not None
    compiler = summary["compile_beside"]
    assert summary["graphs_compiled"] == 1  # the compiler's: from the machine's cache, or anew
    assert compiler["compile_cache_hits"] + compiler["compile_cache_misses"] >= 1
    assert compiler["phases_s"]["all"] > 0  # dynamo's timers, in the process that compiled
    assert compiler["switch_cache_misses"] == 0  # the run's: all loaded, nothing compiled anew
    assert (tmp_path / "compiled.bin").stat().st_size == summary["compile_artifacts_saved_bytes"]
    assert any("2 steps ran eagerly" in line for line in said.lines), said.lines


def test_a_run_that_ends_first_stops_its_compiler(lj_cache, tmp_path):
    run = build_run(load("tiny", [*FAST, "train.compile=default"]), lj_cache, with_batches=False)
    said = Said()
    beside = B.CompileBeside(run, tmp_path, said)
    summary = beside.finish(0)
    assert beside.proc.returncode is not None  # no compiler left behind
    assert summary["steps_eager"] == 0 and summary["compile_s"] is None
    assert "before its step compiled" in said.lines[-1]


def test_the_compiler_compiles_one_batch_per_graph_the_smallest(lj_cache):
    """Shapes of several rows share one graph, shapes of one row another: one batch each."""
    run = build_run(load("tiny", [*FAST, "train.compile=default"]), lj_cache, with_batches=False)
    assert sorted(b for b, _, _ in run.shapes) == [1, 2]
    assert sorted(batch["tokens"].shape[0] for batch in B.smallest_batches(run)) == [1, 2]
    wide = build_run(load("tiny", [*STILL, "train.compile=default"]), lj_cache, with_batches=False)
    (batch,) = B.smallest_batches(wide)
    assert batch["mel"].shape[:2] == (3, 496)  # (3, 96, 496): fewer padded frames than (2, 160, 832)


RUN_AND_COMPILER = """
import os, subprocess, sys, time
compiler = ("import sys, time; from myxtts.train.compile_beside import end_with; "
            "print(end_with(int(sys.argv[1])), flush=True); time.sleep(120)")
child = subprocess.Popen([sys.executable, "-c", compiler, str(os.getpid())],
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
print(child.pid, child.stdout.readline().strip(), flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Running: not gone, and not a zombie waiting for whoever adopted it to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_a_compiler_ends_with_its_run_even_when_the_run_is_killed():
    """A run killed by SIGKILL (or the out-of-memory killer) cannot stop its compiler, which
    would otherwise go on holding cores and GPU memory for minutes."""
    run = subprocess.Popen([sys.executable, "-c", RUN_AND_COMPILER], stdout=subprocess.PIPE, text=True)
    pid, armed = run.stdout.readline().split()
    assert armed == "True"
    run.kill()
    run.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not _alive(int(pid)):
            return
        time.sleep(0.1)
    os.kill(int(pid), signal.SIGKILL)
    raise AssertionError("the compiler outlived its run by 30 s")
