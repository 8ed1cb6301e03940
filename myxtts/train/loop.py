"""The training loop both stages share: pull batches, step, time, log, check, checkpoint, stop.

``Loop.step_once`` is the unit everything runs: the trainer's ``fit`` calls it until
``train.max_steps``, and every command that measures training (``observe.measure``) calls the
same method on its own batches. Measurement plugs in from outside, through ``TrainStep.hooks``
(objects whose ``phase(name)`` marks the phases inside a step) and the ``StepTimer`` the loop is
given; the loop itself reads nothing back from the GPU except on logging steps.

Stops: SIGINT/SIGTERM (to the trainer, its process group or, under torchrun, any rank) and
``train.time_budget_s`` end the run after the step in progress, with a checkpoint; the run
summary then says ``stopped`` and the command exits with its "stopped, resumable" code.
"""
from __future__ import annotations

import math
import signal
import time
from dataclasses import dataclass

import torch

from myxtts.errors import UserError
from myxtts.train import checkpoint as ckpt
from myxtts.train import collectives, memory
from myxtts.train import distributed as D
from myxtts.train.compile import compiled_graphs
from myxtts.train.spec import Run
from myxtts.train.stages import stage_spec
from myxtts.train.timers import StepTimer
from myxtts.train.watchdog import Watch


class StopRequested:
    """SIGINT/SIGTERM set a flag; the loop finishes its step, checkpoints and stops."""

    def __init__(self):
        self.flag = False
        self._old = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        # A second Ctrl-C means "now"; a second SIGTERM does not: launchers (torchrun, Slurm)
        # forward a stop that the process group already got, and it must not cost the checkpoint.
        if self.flag and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.flag = True

    def restore(self):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def oom_error(run: Run) -> UserError:
    """What to change after running out of GPU memory, in the stage's own settings."""
    return stage_spec(run.stage).out_of_memory(run.cfg)


@dataclass
class LoopState:
    """The loop's own state: checkpointed, except ``save_best`` (this step's validation loss is
    the best so far: the next checkpoint is also saved as ``best/``)."""
    step: int = 0
    best_val: float = math.inf
    save_best: bool = False

    def state_dict(self) -> dict:
        return {"step": self.step, "best_val": self.best_val}

    def load_state_dict(self, state: dict) -> None:
        self.step, self.best_val = int(state["step"]), float(state["best_val"])


class Loop:
    def __init__(self, run: Run, timer: StepTimer | None = None, batches=None):
        """``batches``: where ``step_once`` takes its batches (an object with ``next() ->
        Batch``); the run's own stream by default."""
        self.run = run
        self.batches = batches or run.batches
        fps = run.cfg.audio.sample_rate / run.cfg.audio.hop_length
        self.timer = timer or StepTimer(run.device, warmup_steps=len(run.shapes),
                                        frames_per_second=fps)
        collectives.time_collectives(run, self.timer)
        self.state = LoopState()
        self.seen_shapes: set = set()
        self.recompiles = 0  # graphs compiled for a shape already seen: should stay 0
        self.last_host_ms = 0.0
        self.watch = Watch()  # where this rank is, for the stall watchdog (train/watchdog.py)

    def step_once(self) -> list:
        """One optimizer step on the next ``micro_batches`` batches; returns them (``Batch``es).
        ``last_host_ms`` is the host time the step call took (launching, or computing on a CPU)."""
        run, timer = self.run, self.timer
        self.watch.phase("loading", self.state.step + 1)
        with timer.data_wait():
            got = [self.batches.next() for _ in range(run.step_fn.micro_batches)]
        micro = [b.tensors for b in got]
        shape = got[0].shape  # (B, Tt, Tm), the sampler's name for it
        new_shape = shape not in self.seen_shapes
        self.seen_shapes.add(shape)
        graphs = compiled_graphs()
        self.watch.phase("step", self.state.step + 1)
        with timer.compute(shape):
            h0 = time.perf_counter()
            run.step_fn(micro)
            self.last_host_ms = (time.perf_counter() - h0) * 1000.0
        if not new_shape:
            self.recompiles += compiled_graphs() - graphs
        self.state.step += 1
        timer.step_done(frames=sum(run.step_fn.frames_of(b) for b in got),
                        samples=sum(b.samples for b in got))
        return got

    # ------------------------------------------------------------------- checkpoint state
    def components(self) -> dict:
        return {"loop": self.state, **self.run.components}

    def save(self, out) -> None:
        """Every rank's RNG state, every component's state, rank 0 writes."""
        run = self.run
        self.watch.phase("checkpoint", self.state.step)
        rng = [ckpt.rng_state()]
        if run.info.enabled:
            gathered = [None] * run.info.world_size
            torch.distributed.all_gather_object(gathered, rng[0])
            rng = gathered
        if run.info.is_main:
            path = ckpt.save(out, self.state.step, run.model, run.cfg, run.cache.vocab.symbols,
                             ckpt.gather_state(self.components(), rng), run.cfg.train.keep_last,
                             kind=run.stage, plan=run.plan, speakers=run.spec.voices(run))
            if self.state.save_best:
                ckpt.save_best(out, path)
        self.state.save_best = False
        self.watch.phase("saved", self.state.step)  # rank 0 wrote it: a rank still writing is behind
        D.barrier(run.info)

    def restore(self, path) -> None:
        ckpt.restore(path, self.run.model, self.components(), self.run.cfg, self.run.info.rank)


def check_finite(in_a_row: int, step: int, run: Run) -> None:
    if in_a_row >= run.cfg.train.max_nonfinite:
        raise UserError(f"the losses or gradients were not finite for {in_a_row} steps in a row "
                        f"(at step {step}); {run.step_fn.nonfinite_hint}")


def _move_horizon(run: Run, step: int, elapsed: float) -> None:
    """Where the schedule now ends, from this step's estimate; under DDP the ranks' mean, so that
    every rank steps with the same rate."""
    end = run.horizon.estimate(step, elapsed)
    if end is None:
        return
    if run.info.enabled:
        end = round(D.all_reduce_mean(torch.tensor([float(end)], device=run.device), run.info).item())
    run.horizon.end = end


def fit(loop: Loop, out, log, after_step=None) -> dict:
    """Train from the loop's step to ``train.max_steps``, or until a stop; returns the summary.
    ``after_step(step, ending)`` runs after each step (validation, samples); ``ending``: the
    run's time budget ends it after this step."""
    run, cfg, info = loop.run, loop.run.cfg.train, loop.run.info
    stopper = StopRequested()
    stopped = None
    t_start = time.perf_counter()
    memory.reset(run.device)  # the run's own figures: not the batch-size probes' deliberate OOMs
    log.training_started()
    # Host reads happen on logging steps, plus one scalar every max_nonfinite steps so a run
    # of non-finite steps is caught in time even when logging is sparse.
    check_every = min(cfg.log_every, cfg.max_nonfinite)
    try:
        while loop.state.step < cfg.max_steps:
            loop.step_once()
            step = loop.state.step
            last = step == cfg.max_steps
            _log_and_check(loop, log, step, last)
            elapsed = time.perf_counter() - t_start
            out_of_time = bool(cfg.time_budget_s) and elapsed > cfg.time_budget_s
            if run.horizon is not None and step % check_every == 0:
                _move_horizon(run, step, elapsed)
            # Under DDP agreeing on a stop costs a collective, so ranks compare notes every
            # check_every steps; a single process reacts within the step.
            stop = False
            if not info.enabled or step % check_every == 0:
                stop = D.any_flag(stopper.flag or out_of_time, info, run.device)
            if after_step is not None:
                # a run whose time is up ends here, as at max_steps: its last weights are
                # validated too, so the best weights can be them (a stop request exits at once)
                after_step(step, ending=stop and D.any_flag(out_of_time, info, run.device))
            if step % cfg.checkpoint_every == 0 or last or stop:
                loop.save(out)
            if stop:
                stopped = "time budget reached" if out_of_time else "stop requested"
                log.say(f"{stopped}: stopped at step {step}; checkpoint saved. Resume with the "
                        f"same command (--out {out}).")
                break
    except torch.OutOfMemoryError:
        raise oom_error(run) from None
    finally:
        stopper.restore()
    return _summary(loop, stopped, t_start)


def _log_and_check(loop: Loop, log, step: int, last: bool) -> None:
    """After a step: on logging steps read the window (one host sync), check that it is finite
    and log it; on the others, every ``train.max_nonfinite`` steps, ask for the skipped-in-a-row
    counter without a sync, and check it once it has arrived."""
    run, cfg, info = loop.run, loop.run.cfg.train, loop.run.info
    if step % cfg.log_every == 0 or last:
        window = run.step_fn.read_window(lambda t: D.all_reduce_mean(t, info))
        check_finite(window["skipped_in_a_row"], step, run)
        timing = collectives.gathered(loop.timer.window(), info, run.device)
        log.metrics(step, window, timing, run.step_fn.lr, loop.recompiles)
    elif step % cfg.max_nonfinite == 0:
        # Gradients are all-reduced, so every rank holds the same count: no collective.
        # Read without a host sync: checked a step or two later, once it has arrived.
        run.step_fn.request_skipped_run()
    in_a_row = run.step_fn.skipped_run_if_ready()
    if in_a_row is not None:
        check_finite(in_a_row, step, run)


def _summary(loop: Loop, stopped: str | None, t_start: float) -> dict:
    """The run summary: the timer's figures (every rank's, gathered), memory, and how it ended."""
    run = loop.run
    summary = collectives.gathered(loop.timer.summary(), run.info, run.device)
    mem = memory.read_memory(run.device)
    if mem is not None:
        summary["memory"] = mem.as_dict()
    summary.update(stage=run.stage, steps=loop.state.step, stopped=stopped,
                   wall_seconds=time.perf_counter() - t_start,
                   recompiles_after_warmup=loop.recompiles, shapes_seen=len(loop.seen_shapes),
                   padding_pct=run.batches.padding_pct)
    if run.horizon is not None:
        summary["lr_schedule_end"] = run.horizon.end
    return summary
