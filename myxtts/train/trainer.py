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
from myxtts.rundir import RunDir
from myxtts.train import checkpoint as ckpt
from myxtts.train import compile_beside, finetune, watchdog
from myxtts.train import distributed as D
from myxtts.train.build import Run, build_run, resolve_plan
from myxtts.train.compile import CompileTally, compile_shapes, cudagraph_counts, load_artifacts, save_artifacts
from myxtts.train.log import TrainLog
from myxtts.train.loop import Loop, fit
from myxtts.train.plan import Plan, asked_settings
from myxtts.train.precision import device_name, usable_cpus
from myxtts.train.stages import stage_spec
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
    what differs is asked of the stage's spec (train/stages.py): its header, and what runs
    after each step (validation, samples and evaluation are the acoustic model's)."""
    out = Path(out)
    spec = stage_spec(stage)
    # a stage on one process refuses several (build.py) before any process group exists
    info = D.setup(RunDir(out).nccl_trace) if spec.may_distribute else D.DistInfo()
    try:
        last = ckpt.resume_point(out, stage)
        init = init if last is None else None
        spec.prepare(cfg, data, info)
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
    for line in run.spec.header(asked, run):
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
        summary = fit(loop, out, log, run.spec.after_step(run, loop, log, evaluate, beside))
    finally:
        if beside is not None:
            compiled = beside.finish(loop.state.step)
    loop.watch.phase("summary", loop.state.step)
    summary.update(compiled)
    if run.device.type == "cuda" and run.step_fn.compile_mode == "cudagraphs":
        summary.update(cudagraph_counts())
    summary.update(run.plan.to_dict(), asked=asked_settings(asked, run.spec.lr_setting))  # as resolved, and as asked
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
