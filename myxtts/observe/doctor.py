"""``myxtts doctor``: check this machine, this configuration and this cache before training.

Generic tips printed the same on every machine help nobody. This command measures instead, in
well under a minute, and ranks what it finds by the share of step time at stake, each finding
naming the exact setting or command to change:

* environment: GPU visible, driver vs the torch build's CUDA, CPU-only torch on a GPU machine,
  bf16/TF32, NVML, triton (torch.compile on CUDA), usable CPU cores vs ``data.num_workers``,
  shared memory for the workers, pinned memory, RAM vs the cache, the cache disk's read speed
  (page cache dropped first, so the figure is close to a first epoch's);
* configuration: workers, frame budget, compile mode, precision, the bucket shapes the sampler
  plans and their padding waste (rules of observe.diagnose);
* a step test (``observe.measure``: a few eager steps of the configured model on real batches,
  one per bucket shape first: it runs, the loss is finite, its time, host syncs and peak memory
  on a GPU, so a frame budget that leaves most of the memory unused is named with the budget
  that would fill it) and a loader test (time per
  batch of the cached loader, in-process and with the configured workers, against that step
  time: the input-bound share a run would see, docs/design.md "Input-bound").

On a CPU-only machine it says so in one line and runs every check that still applies. The
checks of the machine itself (environment, host, disk) and the ``Doc`` they all write into are in
``observe.machine``; the configuration, the two tests and the flow are here.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from myxtts.observe import loaders as R
from myxtts.observe.diagnose import diagnose
from myxtts.observe.findings import ranked
from myxtts.observe.input_rules import (
    INPUT_BOUND_HIGH_PCT,
    INPUT_BOUND_MODERATE_PCT,
    INPUT_BOUND_TARGET_PCT,
    PADDING_LOW_PCT,
    workers_needed,
)
from myxtts.observe.machine import Doc, DoctorFigures, disk, environment, host
from myxtts.observe.measure import FixedBatches, measure
from myxtts.observe.measured import Measured, Settings
from myxtts.observe.ops import count_host_syncs
from myxtts.train.build import build_run, sizing_probe
from myxtts.train.distributed import DistInfo
from myxtts.train.memory import read_memory
from myxtts.train.precision import usable_cpus
from myxtts.train.sizing import size_batches

STEP_TEST_S = 8.0        # time cap of the timed steps
LOADER_TEST_S = 2.5      # per loader configuration
SECTIONS = ("environment", "configuration", "tests")


# ---------------------------------------------------------------------------- configuration
def configuration(doc: Doc, cfg, dev, sampler) -> None:
    C, d, t = "configuration", cfg.data, cfg.train
    doc.check(C, "loader", "info", f"data.num_workers={d.num_workers}, prefetch_factor={d.prefetch_factor}, "
              f"pin_memory={d.pin_memory}, on_the_fly={d.on_the_fly}")
    doc.check(C, "step", "info", f"train.precision={t.precision}, train.compile={t.compile}, "
              f"grad_accum={t.grad_accum}, data.frame_budget={d.frame_budget}")
    if dev.type == "cpu" and t.compile != "off":
        cost = "once for every shape, a minute or more" if t.compile == "regional" else "for every shape, minutes each"
        doc.find("low", "torch.compile on the CPU", f"train.compile={t.compile}: inductor builds C++ "
                 f"kernels {cost} on a small CPU", "`train.compile=off`", "cpu-compile", 5)
    if sampler is not None:
        rep = sampler.padding_report()
        doc.note(padding_pct=rep["mel_padding_pct"], n_shapes=len(sampler.shapes()))
        shapes = ", ".join("x".join(map(str, s)) for s in sampler.shapes())
        doc.check(C, "buckets", "ok" if rep["mel_padding_pct"] < PADDING_LOW_PCT else "warn",
                  f"{len(sampler.shapes())} shapes (B x Tt x Tm): {shapes}; padding {rep['mel_padding_pct']:.1f} % "
                  f"of mel frames, filler {rep['filler_pct']:.1f} %")


# ------------------------------------------------------------------------------------ tests
def step_test(doc: Doc, cfg, data) -> dict | None:
    """A few eager steps of the configured model on real batches (``observe.measure``)."""
    T = "tests"
    run = build_run(cfg, data, compile="off", with_batches=False)
    cuda = run.device.type == "cuda"
    try:
        st = measure(run, 3, seconds=STEP_TEST_S)
        if cuda:
            with count_host_syncs() as sc:
                run.step_fn([FixedBatches(run.cache, run.cfg, run.device).next().tensors])
            st["host_syncs_per_step"] = sc.count
            st["memory"] = read_memory(run.device)
            st["mem_peak_pct"] = st["memory"].reserved_peak_pct
    except torch.OutOfMemoryError:
        run.step_fn.opt.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        doc.check(T, "step test", "fail", f"out of GPU memory at data.frame_budget={run.cfg.data.frame_budget}")
        doc.find("high", "The largest batch does not fit in GPU memory", f"a step of a bucket shape "
                 f"ran out of memory at data.frame_budget={run.cfg.data.frame_budget}",
                 f"`myxtts tune --config ... --data {data}` finds the largest budget that fits", "oom", 100)
        return None
    loss = st["loss"]
    finite = loss is not None and math.isfinite(loss)
    frames_s = st["throughput"].get("frames_per_s", 0.0)
    doc.note(step_ms=st["step_ms"], loss=loss, **{k: st[k] for k in ("host_syncs_per_step", "mem_peak_pct", "memory")
                                                   if k in st})
    doc.check(T, "step test", "ok" if finite else "fail",
              f"{st['steps']} eager steps at {st['step_ms']:,.1f} ms/step on {run.plan.device_name}, "
              f"{frames_s:,.0f} mel frames/s, loss {loss if loss is None else round(loss, 3)}"
              + (f", peak memory {st['mem_peak_pct']:.0f} %" if "mem_peak_pct" in st else "")
              + " (`myxtts profile` times the compiled step)")
    if not finite:
        doc.find("high", "The loss is not finite", f"loss {loss} after {st['steps']} steps",
                 "check the cache (`myxtts cache verify`), lower `train.lr`, or `train.precision=fp32`", "nan", 100)
    return {"step_ms": st["step_ms"], "frames_per_s": frames_s}


def _workers(w: int) -> str:
    return "in-process (0 workers)" if w == 0 else f"{w} worker" + ("s" if w > 1 else "")


def loader_test(doc: Doc, cfg, cache, step_ms: float, dev) -> None:
    T, w, cpus = "tests", cfg.data.num_workers, usable_cpus()
    base = R.loader_speed(cache, cfg, 0, seconds=LOADER_TEST_S)
    runs = [base] + ([R.loader_speed(cache, cfg, w, seconds=LOADER_TEST_S)] if w > 0 else [])
    mine = runs[-1]
    ib = R.predicted_input_bound(mine["ms_per_batch"], step_ms, w)
    doc.note(loader_ms_per_batch=mine["ms_per_batch"], loader_ms_in_process=base["ms_per_batch"],
             predicted_input_bound_pct=ib)
    label = "GPU" if dev.type == "cuda" else "CPU"
    doc.check(T, "loader test", "ok" if ib < INPUT_BOUND_TARGET_PCT else "warn",
              "; ".join(f"{_workers(r['workers'])}: {r['ms_per_batch']:.1f} ms/batch "
                        f"({r['batches_per_s']:,.0f} batches/s)" for r in runs)
              + f"; against the {label} step of {step_ms:,.1f} ms: predicted input-bound {ib:.1f} % with "
                f"data.num_workers={w}")
    if ib < INPUT_BOUND_TARGET_PCT:
        return
    need, n = workers_needed(base["ms_per_batch"], step_ms, cpus)
    sev = "high" if ib >= INPUT_BOUND_HIGH_PCT else "medium" if ib >= INPUT_BOUND_MODERATE_PCT else "low"
    ev = (f"the loader needs {base['ms_per_batch']:.1f} ms per batch in one process; with {w} workers the "
          f"loop would wait {ib:.1f} % of the time (target < {INPUT_BOUND_TARGET_PCT:g} %)")
    if n > w:
        act = f"`data.num_workers={n}`" + (f" (about {need} needed; {cpus} CPUs cap it: use a machine with more "
                                           "cores or a larger data.frame_budget)" if need > n else "")
    else:
        act = "`myxtts tune` (measures the workers this machine needs); check the cache is on local disk"
    doc.find(sev, "The loader would not keep up with the step", ev, act, "loader", ib)


# -------------------------------------------------------------------------------------- run
def doctor(cfg, data=None, say=lambda s: None) -> dict:
    doc = Doc()
    dev = environment(doc, cfg)
    cache = sampler = None
    if data is not None:
        from myxtts.data.cache import Cache
        from myxtts.data.sampler import make_sampler
        cache = Cache(data, expect=cfg)
        cfg = sized(doc, cfg, data, dev)
        sampler = make_sampler(cache, cfg, "train")
    host(doc, cfg, dev, cache, sampler)
    configuration(doc, cfg, dev, sampler)
    step = None
    if cache is None:
        doc.check("tests", "step and loader tests", "skip", "need a cache: pass --data CACHE")
    else:
        say("step test ...")
        step = step_test(doc, cfg, data)
        say("loader test ...")
        if step:
            loader_test(doc, cfg, cache, step["step_ms"], dev)
        disk(doc, cache, step, cfg)
    diag = diagnose(measured(doc.figures, cfg, dev))
    # "unmeasured" asks for NVML samples, which are monitor's job; "cpu" is said more precisely
    # by an environment finding when there is one.
    skip = {"unmeasured"} | ({"cpu"} if {f.rule for f in doc.findings} & {"env-cpu-torch", "env-no-gpu"} else set())
    found = ranked(doc.findings + [f for f in diag.findings if f.rule not in skip])
    cpu_line = (f"no GPU: running on the CPU (torch {torch.__version__}); GPU checks are skipped, the rest applies"
                if dev.type == "cpu" else None)
    return {"device": str(dev), "cpu_note": cpu_line, "checks": doc.checks,
            "measurements": dataclasses.asdict(doc.figures),
            "verdict": {"bound": diag.bound, "reason": diag.reason, "headline": diag.headline()},
            "findings": [vars(f) | {"rank": i} for i, f in enumerate(found, 1)]}


def sized(doc: Doc, cfg, data, dev: torch.device):
    """``data.frame_budget=auto`` resolved as a training run on this machine resolves it (measured
    on a GPU), so that the buckets, the step test and the figures the diagnosis reads all belong
    to the budget a run would train with."""
    cfg, note = size_batches(cfg, data, dev, DistInfo(), sizing_probe(data, DistInfo(), dev))
    if note:
        doc.check("configuration", "frame budget", "info", note)
    return cfg


def measured(f: DoctorFigures, cfg, dev: torch.device) -> Measured:
    """The doctor's figures that the diagnosis reads."""
    settings = Settings.from_config(cfg, device=str(dev), device_name=f.device_name,
                                    bf16_supported=f.bf16_supported, cpu_count=f.cpu_count)
    return Measured(settings=settings, step_ms=f.step_ms, host_syncs_per_step=f.host_syncs_per_step,
                    mem_peak_pct=f.mem_peak_pct, memory=f.memory, padding_pct=f.padding_pct, n_shapes=f.n_shapes)
