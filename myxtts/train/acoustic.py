"""The acoustic stage's builders (its :class:`~myxtts.train.spec.StageSpec`): the XTTS model
and its :class:`~myxtts.train.step.TrainStep`, DDP-wrapped and compiled as the plan says; the
speaker embeddings its cache must hold first; its run header; and what runs after each of its
steps (validation and the best weights, samples, the periodic evaluation).
"""
from __future__ import annotations

import torch

from myxtts.config import MIN_FRAME_BUDGET, Config
from myxtts.data import embeddings
from myxtts.data.cache import Cache
from myxtts.data.sampler import make_sampler
from myxtts.errors import UserError
from myxtts.models.monotonic import run_on_host
from myxtts.models.xtts import XTTS, count_parameters
from myxtts.speaker_encoder import resolve_setting
from myxtts.train import distributed as D
from myxtts.train import finetune
from myxtts.train.batches import Batches
from myxtts.train.compile import compile_step
from myxtts.train.distributed import DistInfo
from myxtts.train.optim import Horizon, build_optimizer, build_scheduler
from myxtts.train.plan import plan_lines
from myxtts.train.precision import usable_cpus
from myxtts.train.recompute import recompute_blocks
from myxtts.train.spec import Run, Setup
from myxtts.train.step import TrainStep


def speaker_embeddings(cfg: Config, data, info: DistInfo) -> None:
    """A ``model.speaker_embedding=ge2e`` run's cache embeddings, computed where missing by rank 0
    while the others wait, before anything sizes or builds a run (whose loaders then read them)."""
    if resolve_setting(cfg.model.speaker_embedding) != "ge2e":
        return
    if info.is_main:
        embeddings.ensure(Cache(data, expect=cfg), workers=usable_cpus())
    D.barrier(info)


def host_copies(cfg: Config) -> bool:
    """Whether the step copies to the host: the duration decoder's aligner run on the CPU."""
    return cfg.train.aligner_on_host and cfg.model.decoder == "duration"


def build(s: Setup) -> dict:
    """The model, frozen where ``train.freeze`` says before the optimizer and the step list what
    they train; the step around it (DDP-wrapped, compiled as the plan says); the batches."""
    cfg, device = s.cfg, s.device
    cache = Cache(s.data, expect=cfg)
    languages = finetune.languages_spoken(s.plan.init_from, cache)
    cache.number_languages(languages)  # the batches' language: a row of the model's table
    run_on_host(host_copies(cfg))
    core = XTTS(cfg.model, len(cache.vocab.symbols), cfg.audio.n_mels, languages).to(device)
    if cfg.train.recompute:
        recompute_blocks(core)
    finetune.freeze(core, cfg.train.freeze)
    opt = build_optimizer(core, cfg.train)
    horizon = Horizon.of(cfg.train)
    sched = build_scheduler(opt, cfg.train, horizon)
    step_fn = TrainStep(D.wrap(core, s.info, device), core, opt, sched, s.precision, cfg.train)
    compile_step(step_fn, cfg.train.compile, s.backend)
    batches = Batches(cache, cfg, device, s.info) if s.with_batches else None
    sampler = batches.sampler if batches else make_sampler(cache, cfg, "train")
    return dict(cache=cache, model=core, step_fn=step_fn, optimizer=opt, scheduler=sched,
                sampler=sampler, batches=batches, horizon=horizon)


def header(asked: Config, run: Run) -> list[str]:
    """The run header: the model, the plan (with how each ``auto`` resolved) and the data."""
    frozen = count_parameters(run.model, trainable_only=False) - count_parameters(run.model)
    return [f"model: {count_parameters(run.model) / 1e6:.2f} M parameters"
            + (f" (+{frozen / 1e6:.2f} M frozen: {run.cfg.train.freeze})" if frozen else "") + " | "
            + " | ".join(f"{k} {v}" for k, v in plan_lines(asked, run.plan).items()),
            *run.plan.notes,
            f"data: {len(run.cache)} utterances, {run.cache.seconds() / 3600:.2f} h | "
            f"{len(run.shapes)} batch shapes, padding {run.batches.padding_pct:.1f}%"]


def after_step(run: Run, loop, log, evaluate=None, beside=None):
    """What runs after each step: the switch to the compiled step once ``beside`` (a
    ``CompileBeside``) has it, validation (and the best weights), samples and the periodic
    evaluation, each on its schedule."""
    cfg, info = run.cfg, run.info

    def after(step: int, ending: bool = False) -> None:
        if beside is not None and beside.poll(step):
            loop.timer.restart()  # the switch's time is not a step's
        if step % cfg.train.val_every == 0 or step == cfg.train.max_steps or ending:
            loop.watch.phase("validation", step)
            vals = validate(run)
            if vals is not None:
                log.scalars(step, vals)
                val = vals["val_loss"]
                if val < loop.state.best_val:
                    loop.state.best_val = val
                    loop.state.save_best = True
        if info.is_main and step % cfg.train.sample_every == 0:
            loop.watch.phase("samples", step)
            log.sample(step, run.model, run.cache, cfg)
        if evaluate is not None and info.is_main and cfg.train.eval_every and step % cfg.train.eval_every == 0:
            loop.watch.phase("evaluation", step)
            log.evaluation(step, evaluate(step, run.model, run.cache))
            loop.timer.restart()  # evaluation time is not step time
    return after


@torch.no_grad()
def validate(run: Run) -> dict[str, float] | None:
    """Mean validation loss over the held-out split (all ranks, averaged), by the step's own
    forward and loss (eager: the held-out batches' shapes are not the compiled ones):
    ``val_loss`` and each of its terms as ``val_TERM``."""
    core, device = run.model, run.precision.device
    totals: dict[str, torch.Tensor] = {}
    n = 0
    core.eval()
    # Prenet dropout stays on in eval; forking the RNG keeps validation from shifting the
    # training run's random stream (exact resume depends on it).
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        for b in run.batches.validation():
            for k, v in run.step_fn.forward_loss(b.tensors).items():
                v = v.detach()
                totals[k] = v if k not in totals else totals[k] + v
            n += 1
    core.train()
    if not n:
        return None
    return {f"val_{k}": float(D.all_reduce_mean(v / n, run.info).item()) for k, v in sorted(totals.items())}


def voices(run: Run) -> list | None:
    """The voices a checkpoint names: those its weights have heard, fine-tuning included."""
    return finetune.voices_heard(run.plan.init_from, run.cache)


def out_of_memory(cfg: Config) -> UserError:
    fb = cfg.data.frame_budget
    return UserError(f"out of GPU memory at data.frame_budget={fb}; try data.frame_budget="
                     f"{max(MIN_FRAME_BUDGET, fb // 2)} (or train.grad_accum=2 to keep the batch size), or let "
                     "`myxtts tune` find the largest budget that fits")
