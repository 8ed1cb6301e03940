"""The training loop of the acoustic model: build, resume, step, log, validate, checkpoint.

Order of assembly (fixed, from outside the model): device and precision → model → DDP wrap →
compiled step → optimizer/scheduler → resume. The loop itself reads nothing back from the GPU
except on logging steps.
"""
from __future__ import annotations

import math
import os
import signal
import sys
import time
from pathlib import Path

import torch

from myxtts.config import Config
from myxtts.data.cache import Cache
from myxtts.errors import UserError
from myxtts.models.xtts import XTTS, count_parameters
from myxtts.observe.timers import StepTimer
from myxtts.train import checkpoint as ckpt
from myxtts.train import distributed as D
from myxtts.train.batches import Batches
from myxtts.train.log import RunLog
from myxtts.train.optim import build_optimizer, build_scheduler
from myxtts.train.precision import pick_device, resolve
from myxtts.train.step import TrainStep, compiled_graphs


class StopRequested:
    """SIGINT/SIGTERM set a flag; the loop finishes its step, checkpoints and exits cleanly."""

    def __init__(self):
        self.flag = False
        self._old = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        if self.flag:  # a second Ctrl-C means "now"
            raise KeyboardInterrupt
        self.flag = True

    def restore(self):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def _seed_everything(cfg: Config, rank: int) -> None:
    torch.manual_seed(cfg.train.seed + rank)
    if cfg.train.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False


def train(cfg: Config, data: str | Path, out: str | Path, progress: bool = True) -> dict:
    """Train (or resume) the acoustic model. Returns the run summary."""
    out = Path(out)
    info = D.setup()
    device = pick_device(info.local_rank)
    precision = resolve(cfg.train.precision, device)
    _seed_everything(cfg, info.rank)
    cache = Cache(data, expect=cfg)
    vocab = cache.vocab.symbols

    core = XTTS(cfg.model, len(vocab), cfg.audio.n_mels).to(device)
    model = D.wrap(core, info, device)
    opt = build_optimizer(core, cfg.train)
    sched = build_scheduler(opt, cfg.train)
    step_fn = TrainStep(model, core, opt, sched, precision, cfg.train)
    batches = Batches(cache, cfg, device, info)
    log = RunLog(out, cfg, info.is_main, progress)

    step, best_val = 0, math.inf
    last = ckpt.latest(out)
    if last is not None:
        state = ckpt.load_state(last)
        from myxtts.models.checkpoint import load_weights

        load_weights(core, last / "model.safetensors")
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        step_fn.load_state_dict(state["step_fn"])
        batches.load_state_dict(state["batches"])
        ckpt.set_rng_state(state["rng"][min(info.rank, len(state["rng"]) - 1)])
        step, best_val = int(state["step"]), float(state["best_val"])
        log.say(f"resuming from {last} at step {step}")
    elif info.is_main:
        out.mkdir(parents=True, exist_ok=True)
        cfg.save(out / "config.yaml")
    log.say(f"model: {count_parameters(core) / 1e6:.2f} M parameters | device {device} "
            f"({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}) | "
            f"precision {precision.name} | compile {cfg.train.compile} | world size {info.world_size}")
    log.say(f"data: {len(cache)} utterances, {cache.seconds() / 3600:.2f} h | "
            f"{len(batches.shapes)} batch shapes, padding {batches.padding_pct:.1f}%")

    fps = cfg.audio.sample_rate / cfg.audio.hop_length
    timer = StepTimer(device, warmup_steps=len(batches.shapes), frames_per_second=fps)
    stopper = StopRequested()
    seen_shapes: set = set()
    graphs_after_warmup = 0
    t_start = time.perf_counter()
    try:
        while step < cfg.train.max_steps:
            micro = []
            frames = samples = 0
            with timer.data_wait():
                for _ in range(cfg.train.grad_accum):
                    b = batches.next()
                    micro.append(b.tensors)
                    frames += b.frames
                    samples += b.samples
            shape = tuple(micro[0]["mel"].shape)
            new_shape = shape not in seen_shapes
            seen_shapes.add(shape)
            graphs = compiled_graphs()
            with timer.compute(shape):
                step_fn(micro)
            if not new_shape and compiled_graphs() > graphs:
                graphs_after_warmup += compiled_graphs() - graphs
            step += 1
            timer.step_done(frames=frames, samples=samples)

            # Host reads happen on logging steps, plus one scalar every max_nonfinite steps so a
            # run of non-finite steps is caught in time even when logging is sparse.
            check_every = min(cfg.train.log_every, cfg.train.max_nonfinite)
            if step % cfg.train.log_every == 0 or step == cfg.train.max_steps:
                window = step_fn.read_window(lambda t: D.all_reduce_mean(t, info))
                _check_finite(window["skipped_in_a_row"], step, cfg)
                log.metrics(step, window, timer.window(), sched.get_last_lr()[0],
                            graphs_after_warmup)
            elif step % cfg.train.max_nonfinite == 0:
                # Gradients are all-reduced, so every rank holds the same count: no collective.
                _check_finite(int(step_fn.skipped_run.item()), step, cfg)
            if step % cfg.train.val_every == 0 or step == cfg.train.max_steps:
                val = _validate(core, batches, precision, info)
                if val is not None:
                    log.scalars(step, {"val_loss": val})
                    if val < best_val:
                        best_val = val
                        log.best = True
            if info.is_main and step % cfg.train.sample_every == 0:
                log.sample(step, core, cache, cfg)
            out_of_time = bool(cfg.train.time_budget_s) and \
                time.perf_counter() - t_start > cfg.train.time_budget_s
            # Under DDP agreeing on a stop costs a collective, so ranks only compare notes on
            # logging steps; a single process reacts within the step.
            stop = False
            if not info.enabled or step % check_every == 0:
                stop = D.any_flag(stopper.flag or out_of_time, info, device)
            if step % cfg.train.checkpoint_every == 0 or step == cfg.train.max_steps or stop:
                _save(out, step, core, cfg, vocab, opt, sched, step_fn, batches, best_val, log, info)
            if stop:
                log.say(stop_notice(out_of_time, step, out))
                break
    except torch.OutOfMemoryError:
        half = max(64, cfg.data.frame_budget // 2)
        raise UserError(f"out of GPU memory at data.frame_budget={cfg.data.frame_budget}; try "
                        f"data.frame_budget={half} (or train.grad_accum=2 to keep the batch size), "
                        "or let `myxtts tune` find the largest budget that fits") from None
    finally:
        stopper.restore()
    summary = timer.summary()
    if device.type == "cuda":
        summary["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    if info.enabled:
        summary["params_identical_across_ranks"] = _params_agree(core, info, device)
    summary.update(steps=step, wall_seconds=time.perf_counter() - t_start,
                   recompiles_after_warmup=graphs_after_warmup, shapes_seen=len(seen_shapes),
                   padding_pct=batches.padding_pct, device=str(device), precision=precision.name,
                   compile=cfg.train.compile, world_size=info.world_size)
    log.finish(summary)
    D.teardown(info)
    return summary


def stop_notice(out_of_time: bool, step: int, out) -> str:
    why = "time budget reached" if out_of_time else "stop requested"
    return f"{why}: stopped at step {step}; checkpoint saved. Resume with the same command (--out {out})."


def _check_finite(in_a_row: int, step: int, cfg: Config) -> None:
    if in_a_row >= cfg.train.max_nonfinite:
        raise UserError(f"the loss or gradients were not finite for {in_a_row} steps in a row "
                        f"(at step {step}); lower train.lr, check the data, or use "
                        "train.precision=fp32")


@torch.no_grad()
def _params_agree(core, info, device) -> bool:
    """DDP keeps replicas identical; verify it at the end with one small collective."""
    vec = torch.stack([p.detach().double().sum() for p in core.parameters()]).to(device)
    gathered = [torch.empty_like(vec) for _ in range(info.world_size)]
    torch.distributed.all_gather(gathered, vec)
    return all(torch.equal(gathered[0], g) for g in gathered[1:])


@torch.no_grad()
def _validate(core, batches: Batches, precision, info) -> float | None:
    """Mean validation loss over the held-out split (all ranks, averaged)."""
    total, n = None, 0
    core.eval()
    # Prenet dropout stays on in eval; forking the RNG keeps validation from shifting the
    # training run's random stream (exact resume depends on it).
    with torch.random.fork_rng(devices=[precision.device] if precision.device.type == "cuda" else []):
        for b in batches.validation():
            with precision.autocast():
                out = core(b.tensors)
            loss = core.losses(b.tensors, {k: v.float() for k, v in out.items()})["loss"]
            total = loss if total is None else total + loss
            n += 1
    core.train()
    if total is None:
        return None
    return float(D.all_reduce_mean(total / n, info).item())


def _save(out, step, core, cfg, vocab, opt, sched, step_fn, batches, best_val, log, info) -> None:
    rng = [ckpt.rng_state()]
    if info.enabled:
        gathered = [None] * info.world_size
        torch.distributed.all_gather_object(gathered, rng[0])
        rng = gathered
    if info.is_main:
        state = {"step": step, "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                 "step_fn": step_fn.state_dict(), "batches": batches.state_dict(), "rng": rng,
                 "best_val": best_val}
        path = ckpt.save(out, step, core, cfg, vocab, state, cfg.train.keep_last)
        if log.best:
            ckpt.save_best(out, path)
            log.best = False
    D.barrier(info)
