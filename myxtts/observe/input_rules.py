"""The input pipeline's rules of a diagnosis (``observe.diagnose``): does the training loop
wait for its batches, and why (the copy, raw audio decoded every epoch, too few loader workers,
a loader that cannot keep up); how many workers would keep up; how much of the computed frames
is padding. The thresholds are those of docs/design.md, "Diagnosis"; ``doctor``, ``tune``, the
report and ``bench loader`` judge against the same ones.
"""
from __future__ import annotations

import math

from myxtts.observe.findings import Finding
from myxtts.observe.measured import Measured

INPUT_BOUND_MODERATE_PCT = 5.0   # the TensorFlow profiler's input-pipeline thresholds
INPUT_BOUND_HIGH_PCT = 20.0
INPUT_BOUND_TARGET_PCT = 1.0
PADDING_LOW_PCT, PADDING_HIGH_PCT = 10.0, 25.0
WORKER_MARGIN = 1.25             # head-room when sizing loader workers


def workers_needed(ms_per_batch: float, step_ms: float, cpus: int) -> tuple[int, int]:
    """Loader workers that keep up with the step, if the loader's throughput grows linearly with
    them: one process's time per batch over the step time, with WORKER_MARGIN head-room; and
    that number capped at the CPUs but one."""
    need = max(1, math.ceil(ms_per_batch / max(step_ms, 1e-6) * WORKER_MARGIN))
    return need, max(1, min(need, cpus - 1))


def input_findings(m: Measured, bound: str, why: str):
    """The loop waits for batches: the copy, decoding raw audio, too few workers, or a loader
    that cannot keep up, each with its fix."""
    ib, s = m.input_bound_pct, m.settings
    if ib is None or ib < INPUT_BOUND_MODERATE_PCT:
        return
    sev = "high" if ib >= INPUT_BOUND_HIGH_PCT else "medium"
    h2d, wait = m.h2d_pct or 0.0, m.data_wait_pct
    w, cpus = s.num_workers, s.cpu_count
    ev = f"{why}; target < {INPUT_BOUND_TARGET_PCT:g} %"
    if h2d > wait:
        ev += f"; of which the host-to-device copy is {h2d:.1f} %"
        act = ("`data.pin_memory=true` (pageable memory makes the copy synchronous)"
               if s.pin_memory is False else
               "`myxtts profile`: the copy is not overlapped with compute; check the device prefetcher")
        yield Finding(sev, "Input-bound: the host-to-device copy is not overlapped", ev, act, "input-h2d", ib)
        return
    if s.on_the_fly:
        yield Finding(sev, "Input-bound: loaders decode raw audio on every epoch", ev,
                      "`myxtts prepare` once, then `data.on_the_fly=false` (workers only slice arrays)",
                      "input-onthefly", ib)
        return
    if w is not None and cpus:
        # w workers that leave the loop waiting a share f of the time build a batch in w / (1 - f) steps
        need, n = workers_needed(w / max(1e-3, 1 - wait / 100), 1.0, cpus) if w else (4, max(1, min(4, cpus - 1)))
        ev += f"; {w} loader workers on {cpus} CPUs"
        if n > w:
            cap = (f" (about {need} would be needed; with {cpus} CPUs the loader stays CPU-limited: "
                   f"check the cache is on local disk)" if need > n else "")
            ev += (f" (needed ~ {w} / (1 - {wait / 100:.2f}) x {WORKER_MARGIN:g} head-room, at most CPUs - 1)"
                   if w else " (loading in the training process itself)")
            yield Finding(sev, "Input-bound: too few loader workers", ev, f"`data.num_workers={n}`{cap}",
                          "input-workers", ib)
            return
    yield Finding(sev, "Input-bound: the loader cannot keep up", ev,
                  "`myxtts tune` (sizes workers and prefetch for this machine), then `myxtts profile` "
                  "to time the loader alone", "input-tune", ib)


def padding_findings(m: Measured, bound: str, why: str):
    """Padding that wastes the GPU's work, and the bucketing setting that cuts it."""
    p, s = m.padding_pct, m.settings
    if p is None or p < PADDING_LOW_PCT:
        return
    pm, mb = s.pad_multiple, s.max_buckets
    if pm and pm > 16:
        act = f"`data.pad_multiple={pm // 2}` (finer bucket lengths; more shapes to compile once)"
    elif mb:
        act = f"`data.max_buckets={min(64, mb * 2)}` (more buckets; more shapes to compile once)"
    else:
        act = "`data.pad_multiple` smaller or `data.max_buckets` larger"
    yield Finding("medium" if p >= PADDING_HIGH_PCT else "low", f"{p:.0f} % of computed frames are padding",
                  f"padding waste {p:.1f} % (>= {PADDING_LOW_PCT:g} %): that share of the GPU's work is thrown away",
                  act, "padding", p)
