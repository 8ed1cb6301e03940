"""The step compiled in a second process while the run trains eagerly, so that the minutes a
cold compile takes are training minutes rather than minutes of an idle GPU.

    the run (this process)                      the compiler (python -m myxtts.train.compile_beside)
    writes RUN/compiling/{config.yaml,plan.json}
    starts the compiler ──────────────────────▶ builds the same step (settings, plan, cache)
    trains eagerly: the step's forward, loss    compiles it on the run's smallest batch shape
      and backward, uncompiled                  writes RUN/compiled.bin (torch's portable cache)
    after each step: has it finished?           and RUN/compiling/result.json, and exits
      yes: loads RUN/compiled.bin, compiles every shape from it (nothing compiles anew), and
      steps compiled from the next step on

One shape is enough: the step is compiled with symbolic sizes, so one graph serves every shape
(:mod:`myxtts.train.compile`; a batch of one row compiles one more, so a run that has such
shapes gets the smallest of them compiled too), and the smallest batch needs the least memory
beside a run sized to fill the GPU (``train.sizing.HEADROOM``).

What changes: eager and compiled steps compute the same maths, not the same bits, and draw
their dropout from the random stream differently. The switch comes at a step that depends on
how long the compile took, so two runs from one seed agree up to it, not after. A resumed run
loads ``RUN/compiled.bin`` and compiles before its first step, as every run did before this.

``train.compile_beside``: ``auto`` is on for a single-process run on a CUDA GPU whose step
compiles as a whole (``default`` or ``cudagraphs``) and finds no compiled kernels in its run;
off on a CPU, where the compiler would take the cores the run trains on, and under DDP.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from myxtts.config import load
from myxtts.data.sampler import shape_plans
from myxtts.files import write_json
from myxtts.rundir import RunDir
from myxtts.train.batches import BucketBatches
from myxtts.train.compile import COMPILE_MODES, CompileTally, compile_shapes, load_artifacts, save_artifacts

RESULT, LOG = RunDir.COMPILE_RESULT, RunDir.COMPILE_LOG  # in RUN/compiling/, beside what it is given


def wanted(setting: str, run) -> bool:
    """Whether this run compiles beside its training (``train.compile_beside``, see above)."""
    whole_step = run.step_fn.compile_mode in COMPILE_MODES  # not off, not regional
    if setting == "off" or not whole_step or run.info.enabled:
        return False
    return setting == "on" or run.device.type == "cuda"


@dataclass
class Switch:
    """What the run's summary says of it: the steps that ran eagerly, and the seconds the run
    spent at the switch (loading and compiling every shape from the compiler's kernels)."""
    steps_eager: int
    switch_s: float | None  # None: the run ended before the compiler did
    compiler: dict  # the compiler's result.json, or {"error": its last line}


class CompileBeside:
    """The compiler process of one run, and the switch from eager to compiled steps."""

    def __init__(self, run, out: Path, log):
        self.run, self.log = run, log
        self.folder = RunDir(out).compiling
        self.compiled_bin = RunDir(out).compiled
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / RESULT).unlink(missing_ok=True)
        run.cfg.save(self.folder / RunDir.CONFIG)
        run.plan.save(self.folder)
        run.step_fn.use_compiled(False)  # eager until the switch
        with open(self.folder / LOG, "wb") as log_file:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "myxtts.train.compile_beside", str(self.folder),
                 str(run.cache.path), str(self.compiled_bin), str(os.getpid())],
                # its own session: a Ctrl-C or a group's SIGTERM stops the run, which stops the
                # compiler (``finish``), rather than killing the compiler under a run that then
                # takes it for a failed compile and compiles itself before it can stop
                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        log.say(f"compiling the step in a second process (pid {self.proc.pid}, log "
                f"{self.folder / LOG}); training eagerly until it is done")
        self.switch: Switch | None = None

    def poll(self, step: int) -> bool:
        """After each step: switch to the compiled step once the compiler has finished. → True
        when this call switched (its time is not a step's)."""
        if self.switch is not None or self.proc.poll() is None:
            return False
        result = self._result()
        if "error" in result:
            self.log.say(f"the compiler process failed ({result['error']}); compiling here")
        tally = CompileTally()
        loaded = load_artifacts(self.compiled_bin)
        self.run.step_fn.use_compiled(True)
        compile_shapes(self.run)
        did = tally.read()
        result.update(switch_cache_hits=did["compile_cache_hits"],
                      switch_cache_misses=did["compile_cache_misses"], switch_loaded=loaded)
        self.switch = Switch(step, did["seconds"], result)
        self.log.say(f"compiled step from step {step + 1}: {step} steps ran eagerly while it "
                     f"compiled ({result.get('compile_s', float('nan')):.1f} s); the switch took "
                     f"{did['seconds']:.1f} s ({did['compile_cache_hits']} graphs loaded, "
                     f"{did['compile_cache_misses']} compiled anew)")
        return True

    def finish(self, step: int) -> dict:
        """The run has ended: stop a compiler still at work. → the summary's figures."""
        if self.switch is None:
            if self.proc.poll() is None:
                self.proc.terminate()
                self.proc.wait()
                self.log.say(f"the run ended after {step} eager steps, before its step compiled")
            self.switch = Switch(step, None, self._result() if self.proc.returncode == 0 else {})
        s = self.switch
        return {"steps_eager": s.steps_eager, "compile_s": s.switch_s,
                "compile_beside_s": s.compiler.get("compile_s"),
                "graphs_compiled": s.compiler.get("graphs_compiled"),
                "compile_cache_hits": s.compiler.get("switch_cache_hits"),
                "compile_cache_misses": s.compiler.get("compile_cache_misses"),
                "compile_artifacts_saved_bytes": s.compiler.get("saved_bytes"),
                "compile_beside": s.compiler}

    def _result(self) -> dict:
        path = self.folder / RESULT
        if self.proc.returncode == 0 and path.is_file():
            return json.loads(path.read_text())
        lines = (self.folder / LOG).read_text(errors="replace").strip().splitlines()
        return {"error": lines[-1] if lines else f"exit code {self.proc.returncode}"}


def smallest_batches(run) -> list[dict]:
    """A device batch for each graph the run's shapes compile: the shape with the fewest padded
    frames among those of more than one row (their sizes are symbols: one graph serves them
    all), and the same among those of one row (a batch of one is specialised by PyTorch: one
    more graph, shared by every length)."""
    plans = shape_plans(run.sampler)
    chosen = [min(group, key=lambda p: p.shape[0] * p.shape[2])
              for group in ([p for p in plans if p.shape[0] > 1], [p for p in plans if p.shape[0] == 1])
              if group]
    bb = BucketBatches(run.cache, run.cfg, run.device)
    return [bb.device_batch(plan).tensors for plan in chosen]


PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies


def end_with(parent: int) -> bool:
    """Have this process terminated when ``parent`` (the run) dies, however it dies (a SIGKILL or
    an out-of-memory kill gives the run no chance to stop its compiler). Linux only, through
    prctl(PR_SET_PDEATHSIG); elsewhere → False, and an orphaned compiler finishes its compile and
    exits on its own."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    if prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        return False
    if os.getppid() != parent:  # the run died before the request was made
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def main(folder: str, data: str, compiled_bin: str, parent: str) -> None:
    """The compiler process: build the run's step as the run did, compile it on the fewest and
    smallest batches that make every graph, save the kernels, say what it took."""
    from myxtts.train.build import build_run
    from myxtts.train.plan import Plan

    end_with(int(parent))
    folder_path = Path(folder)
    cfg = load(folder_path / RunDir.CONFIG, saved=True)
    run = build_run(cfg, data, plan=Plan.load(folder_path), with_batches=False)
    tally = CompileTally()
    compile_shapes(run, batches=smallest_batches(run))
    did = tally.read()
    saved = save_artifacts(Path(compiled_bin))
    result = {"compile_s": round(did.pop("seconds"), 3), **did, "saved_bytes": saved,
              "device": str(run.device)}
    write_json(folder_path / RESULT, result)


if __name__ == "__main__":
    main(*sys.argv[1:5])
