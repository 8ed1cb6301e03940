"""Training runs of both stages, end to end: build, resume, loop, validate, checkpoint, sum up.

The acoustic model trains with ``train``, the vocoder with ``train_vocoder``; both are
assembled by ``train.build`` and stepped by ``train.loop``. A run directory that exists is
resumed from its newest checkpoint; a finished one is left as it is. A new run may start from
trained weights (``init``, train/finetune.py); a resumed one never reads them again.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from myxtts.config import Config
from myxtts.models.xtts import count_parameters
from myxtts.rundir import RunDir
from myxtts.train import checkpoint as ckpt
from myxtts.train import compile_beside, finetune, watchdog
from myxtts.train import distributed as D
from myxtts.train.build import Run, build_run, resolve_plan, speaker_embeddings
from myxtts.train.compile import CompileTally, compile_shapes, cudagraph_counts, load_artifacts, save_artifacts
from myxtts.train.log import TrainLog
from myxtts.train.loop import Loop, fit
from myxtts.train.plan import Plan, asked_lr
from myxtts.train.precision import device_name, usable_cpus
from myxtts.train.vocoder import keep_teacher


def train(cfg: Config, data: str | Path, out: str | Path, progress: bool = True,
          log=TrainLog, evaluate=None, init: finetune.Source | None = None,
          stage: str = "acoustic", mels_from: finetune.Source | None = None) -> dict:
    """Train (or resume) a stage: the acoustic model, or the vocoder on the cache's waveforms.
    Returns the run summary. ``log`` makes the run's log: ``(out, cfg, is_main, progress) ->
    TrainLog`` (the command line passes the one with GPU sampling, TensorBoard and the report).
    ``evaluate``, if given, is called as ``(step, model, cache) -> {name: figure}`` every
    ``train.eval_every`` steps on rank 0 (the command line passes
    ``myxtts.evaluate.periodic.TrainingEval``). ``init``: the trained weights a new run starts
    from (``cfg`` already configured for them, ``finetune.configure``); ignored when the run
    resumes. ``mels_from``: the acoustic model a new vocoder run reads the mels of
    (train/vocoder.py); a resume reads the one its plan names. Both stages run this one flow;
    what differs is in :func:`_header` and :func:`_after_step` (validation, samples and
    evaluation are the acoustic model's)."""
    out = Path(out)
    # the vocoder stage refuses several processes (build.py) before any process group exists
    info = D.setup(RunDir(out).nccl_trace) if stage == "acoustic" else D.DistInfo()
    try:
        last = ckpt.resume_point(out, stage)
        init = init if last is None else None
        if stage == "acoustic":
            speaker_embeddings(cfg, data, info)
        plan = resolve_plan(cfg, data, stage=stage, info=info, saved=Plan.load(last) if last else None,
                            init_from=init.record() if init else None,
                            mels_from=mels_from.record() if mels_from else None)
        run = build_run(cfg, data, stage=stage, info=info, plan=plan)
        loop = Loop(run)
        log = log(out, cfg, info.is_main, progress)
        loop.watch = watch = watchdog.start(info, cfg.train.stall_timeout_s)
        try:
            summary = _train(cfg, run, loop, last, out, log, evaluate, init)
            watch.phase("leaving", loop.state.step)
            # Every rank leaves the group together, after rank 0 has written the summary: a
            # rank that tore its gloo group down while rank 0 still wrote aborted once at exit
            # ("terminate called without an active exception", two CPU processes, a loaded
            # machine). An exception skips this wait: torchrun then stops the other ranks.
            D.barrier(info)
            watch.stop(finished=True)
            return summary
        finally:
            watch.stop()
            run.close()
    finally:
        D.teardown(info)


def train_vocoder(cfg: Config, data: str | Path, out: str | Path, progress: bool = True,
                  log=TrainLog, init: finetune.Source | None = None,
                  mels_from: finetune.Source | None = None) -> dict:
    """:func:`train` of the vocoder stage."""
    return train(cfg, data, out, progress, log, init=init, stage="vocoder", mels_from=mels_from)


def _train(asked: Config, run: Run, loop: Loop, last, out: Path, log, evaluate=None,
           init: finetune.Source | None = None) -> dict:
    cfg, info = run.cfg, run.info
    if last is not None:
        loop.restore(last)
        log.say(f"resuming from {last} at step {loop.state.step}")
    else:
        if init is not None:  # every rank, before the first step
            finetune.load(run, init)
        if run.plan.mels_from:  # before any checkpoint: each holds the plan
            run.plan = keep_teacher(run.plan, out)
        if info.is_main:  # a resume's plan goes into its checkpoints
            asked.save(RunDir(out).config)  # as asked, auto included: it runs again on any machine
            run.plan.save(out)
            RunDir(out).checkpoints.mkdir(exist_ok=True)  # a run from its start (RunDir.of)
    if loop.state.step >= cfg.train.max_steps:
        return log.already_done(loop.state.step)
    if info.is_main:  # said, so eval and serve find it without guessing (a resume may move it)
        RunDir(out).record_cache(run.cache.path)
    for line in _header(asked, run):
        log.say(line)
    log.run_built(run)
    for note in run.step_fn.compile_notes:
        log.say(note)
    beside = None
    if compile_beside.wanted(cfg.train.compile_beside, run) and not RunDir(out).compiled.is_file():
        beside, compiled = compile_beside.CompileBeside(run, out, log), {}
    else:
        compiled = _compile_up_front(run, log, out)
    try:
        summary = fit(loop, out, log, _after_step(run, loop, log, evaluate, beside))
    finally:
        if beside is not None:
            compiled = beside.finish(loop.state.step)
    loop.watch.phase("summary", loop.state.step)
    summary.update(compiled)
    if run.device.type == "cuda" and run.step_fn.compile_mode == "cudagraphs":
        summary.update(cudagraph_counts())
    summary.update(run.plan.to_dict(), asked=asked_settings(asked, run.stage))  # as resolved, and as asked
    summary["software"] = software()
    if info.enabled:
        summary["params_identical_across_ranks"] = _params_agree(run)
    log.finish(summary)
    return summary


def software() -> dict:
    """What the run ran on besides its device (the plan names that): the host's CPU and the
    versions that decide what the compiler does. A record made elsewhere reads it from here."""
    import importlib.util
    import platform

    triton = importlib.util.find_spec("triton") and __import__("triton").__version__
    return {"host_cpu": device_name(torch.device("cpu")), "cpu_count": usable_cpus(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": triton or None, "python": platform.python_version()}


def _header(asked: Config, run: Run) -> list[str]:
    """The run header: the model, the plan (with how each ``auto`` resolved) and the data."""
    cfg = run.cfg
    if run.stage == "vocoder":
        seg = cfg.vocoder.segment_frames
        return [f"vocoder: {count_parameters(run.model) / 1e6:.2f} M parameters | device {run.plan.device} "
                f"({run.plan.device_name}) | precision {run.precision.name}"
                + (f" | init from {finetune.describe_origin(run.plan.init_from)}" if run.plan.init_from else "")
                + (f" | mels from {finetune.describe_origin(run.plan.mels_from)}" if run.plan.mels_from else
                   " | mels from the recordings"),
                *run.plan.notes,
                f"data: {len(run.cache)} utterances, {run.cache.seconds() / 3600:.2f} h | segments "
                f"of {seg} frames ({seg * cfg.audio.hop_length} samples) | {len(run.shapes)} batch shapes"]
    frozen = count_parameters(run.model, trainable_only=False) - count_parameters(run.model)
    return [f"model: {count_parameters(run.model) / 1e6:.2f} M parameters"
            + (f" (+{frozen / 1e6:.2f} M frozen: {cfg.train.freeze})" if frozen else "") + " | "
            + " | ".join(f"{k} {v}" for k, v in plan_lines(asked, run.plan).items()),
            *run.plan.notes,
            f"data: {len(run.cache)} utterances, {run.cache.seconds() / 3600:.2f} h | "
            f"{len(run.shapes)} batch shapes, padding {run.batches.padding_pct:.1f}%"]


def _after_step(run: Run, loop: Loop, log, evaluate=None, beside=None):
    """What runs after each acoustic step: the switch to the compiled step once ``beside`` (a
    ``CompileBeside``) has it, validation (and the best weights), samples and the periodic
    evaluation, each on its schedule; None for the vocoder."""
    if run.stage == "vocoder":
        return None
    cfg, info = run.cfg, run.info

    def after_step(step: int, ending: bool = False) -> None:
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
    return after_step


def asked_settings(cfg: Config, stage: str = "acoustic") -> dict:
    """The settings a plan resolves, as the user gave them."""
    return {"precision": cfg.train.precision, "compile": cfg.train.compile,
            "frame_budget": cfg.data.frame_budget, "max_batch_size": cfg.data.max_batch_size,
            "lr": asked_lr(cfg, stage)}


def plan_lines(asked: Config, plan: Plan) -> dict:
    """The run header's settings: each as asked, and what it resolved to where that differs."""
    def both(a, b) -> str:
        return f"{a}" if a == b else f"{a} -> {b}"

    a = asked_settings(asked)
    lines = {"device": f"{plan.device} ({plan.device_name})",
             "precision": both(a["precision"], plan.precision),
             "compile": both(a["compile"], plan.compile),
             "frame budget": both(a["frame_budget"], plan.frame_budget),
             "lr": both(f"{a['lr']:.3g}", f"{plan.lr:.3g}"),
             "world size": plan.world_size}
    if plan.init_from:
        lines["init from"] = finetune.describe_origin(plan.init_from)
    return lines


def _compile_up_front(run: Run, log, out: Path) -> dict:
    """Compile every bucket shape before step 1, saying what happens while it happens. The
    kernels the run compiled travel with it (``RUN/compiled.bin``): resumed on a machine whose
    compile cache is empty, it loads them instead of compiling again."""
    if run.step_fn.compile_mode == "off":
        return {"compile_s": 0.0}
    n = len(run.shapes)
    loaded = load_artifacts(RunDir(out).compiled)
    if loaded:
        log.say(loaded)
    log.say(f"compiling the step for {n} batch shapes (kernels cached in "
            f"{os.environ.get('TORCHINDUCTOR_CACHE_DIR')})")

    tally = CompileTally()
    log.compiling(0, n, 0.0)
    by_shape = compile_shapes(run, log.compiling)
    seconds = sum(by_shape)
    did = tally.read()
    graphs, hits, misses = did["graphs_compiled"], did["compile_cache_hits"], did["compile_cache_misses"]
    what = ("a forward and a backward per block kind, shared by every shape" if run.step_fn.compile_mode == "regional"
            else "a forward and a backward per shape")
    log.say(f"compiled {n} shapes in {seconds:.1f} s; compile cache: {hits} of {hits + misses} "
            f"graphs ({what}) loaded, {misses} compiled anew")
    if graphs > 1 and run.step_fn.compile_mode != "regional":
        log.say(f"the step compiled {graphs} times for {n} shapes: something in this torch fixed a size "
                "(TORCH_LOGS=recompiles says which); every such shape costs a compile")
    saved = save_artifacts(RunDir(out).compiled) if misses and run.info.is_main else None
    return {"compile_s": seconds, "compile_s_by_shape": [round(s, 3) for s in by_shape],
            "compile_phases_s": did["phases_s"],
            "graphs_compiled": graphs, "compile_cache_hits": hits, "compile_cache_misses": misses,
            "compile_artifacts_loaded": bool(loaded and "not loaded" not in loaded),
            "compile_artifacts_saved_bytes": saved}


@torch.no_grad()
def _params_agree(run: Run) -> bool:
    """DDP keeps replicas identical; verify it at the end with one small collective."""
    vec = torch.stack([p.detach().double().sum() for p in run.model.parameters()]).to(run.device)
    gathered = [torch.empty_like(vec) for _ in range(run.info.world_size)]
    torch.distributed.all_gather(gathered, vec)
    return all(torch.equal(gathered[0], g) for g in gathered[1:])


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
