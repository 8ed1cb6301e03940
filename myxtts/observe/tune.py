"""``myxtts tune``: the largest frame budget that fits this GPU, and the fewest loader workers
that keep the step fed (batch sizing without trial and error).

1. Frame budget (GPU only): what ``data.frame_budget=auto`` chooses when a run starts (the search
   in train/sizing.py: the largest budget whose largest bucket trains within 85 % of the free
   memory), with each measured step printed, and the batch cap and learning rate that go with it.
2. Loader workers. The step time is measured (``observe.measure``) with the chosen budget and
   the configured compile mode; the loader's time per batch is measured in-process
   and with candidate worker counts, and the fewest workers whose predicted input-bound share is
   below 1 % (the target in docs/design.md, "Input-bound"), with ``WORKER_MARGIN`` head-room, is chosen.

It writes a YAML overlay holding only the ``data:`` keys it decided, and the full merged config
next to it (the config loader takes one YAML), and prints the train command that uses it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
import yaml

from myxtts.config import from_dict
from myxtts.files import write_text
from myxtts.observe import loaders as R
from myxtts.observe.input_rules import INPUT_BOUND_TARGET_PCT, WORKER_MARGIN, workers_needed
from myxtts.observe.measure import measure
from myxtts.train.build import build_run, sizing_probe
from myxtts.train.distributed import DistInfo
from myxtts.train.precision import device_name, usable_cpus
from myxtts.train.sizing import describe, size_batches

STEP_TIMING_S = 20.0


def _with_data(cfg, **data):
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, **data))


# ---------------------------------------------------------------------------------- workers
def search_workers(cache, cfg, step_ms: float, say=print) -> tuple[int, str]:
    """Fewest workers whose predicted input-bound % is below the target, with head-room."""
    cpus = usable_cpus()
    maxw = max(1, cpus - 1)
    tried: dict[int, dict] = {}

    def ok(w) -> bool:
        if w not in tried:
            r = R.loader_speed(cache, cfg, w, seconds=3.0)
            ms = r["ms_per_batch"] * (WORKER_MARGIN if w else 1.0)
            r["predicted_input_bound_pct"] = R.predicted_input_bound(ms, step_ms, w)
            tried[w] = r
            say(f"  data.num_workers={w}: {r['ms_per_batch']:.1f} ms/batch -> predicted input-bound "
                f"{r['predicted_input_bound_pct']:.2f} %")
        return tried[w]["predicted_input_bound_pct"] < INPUT_BOUND_TARGET_PCT

    if ok(0):
        return 0, "the training process builds batches fast enough by itself"
    w = workers_needed(tried[0]["ms_per_batch"], step_ms, cpus)[1]
    if ok(w):
        while w > 1 and ok(w - 1):
            w -= 1
        return w, f"fewest workers below {INPUT_BOUND_TARGET_PCT:g} % input-bound"
    while w < maxw:
        w = min(maxw, max(w + 1, int(w * 1.5)))
        if ok(w):
            return w, f"fewest workers below {INPUT_BOUND_TARGET_PCT:g} % input-bound"
    best = min(tried, key=lambda k: (tried[k]["predicted_input_bound_pct"], k))
    return best, (f"no worker count up to {maxw} ({cpus} CPUs) reaches "
                  f"{INPUT_BOUND_TARGET_PCT:g} %: the loader is CPU-limited here")


# -------------------------------------------------------------------------------------- run
def tune(cfg, data, out: str | Path = "tuned.yaml", say=print) -> dict:
    out = Path(out)
    merged_path = out.with_name(out.stem + ".merged.yaml")
    cuda = torch.cuda.is_available()
    decided: dict = {}
    train_decided: dict = {}  # the learning rate that goes with the budget (train/sizing.py)
    res: dict = {}
    if cuda:
        say(f"frame budget: searching from data.base_frame_budget={cfg.data.base_frame_budget} "
            f"({device_name(torch.device('cuda', 0))})")
        probes = []

        def probe(c):
            probes.append(sizing_probe(data, DistInfo(), torch.device("cuda", 0))(c))
            return probes[-1]

        sized, note = size_batches(_with_data(cfg, frame_budget="auto"), data, torch.device("cuda", 0),
                                   DistInfo(), probe=probe)
        for t in probes[0].trials if probes else []:
            say("  " + describe(t))
        decided.update(frame_budget=sized.data.frame_budget, max_batch_size=sized.data.max_batch_size)
        if sized.train.lr != cfg.train.lr:
            train_decided["lr"] = sized.train.lr
        cfg = sized
        res["budget_note"] = note
    else:
        res["budget_note"] = (f"memory search does not apply on the CPU (it sizes data.frame_budget to "
                              f"GPU memory), so data.frame_budget stays {cfg.data.fixed_budget}")
    say(res["budget_note"])

    say(f"step time: data.frame_budget={cfg.data.frame_budget}, train.compile={cfg.train.compile}, "
        "one warm-up step per shape")
    run = build_run(cfg, data, with_batches=False)
    st = measure(run, 6, seconds=STEP_TIMING_S)
    cache = run.cache
    del run
    say(f"  {st['step_ms']:,.1f} ms per step on the {'GPU' if cuda else 'CPU'} ({st['steps']} steps)")

    say("loader workers:")
    decided["num_workers"], res["workers_note"] = search_workers(cache, cfg, st["step_ms"], say)

    overlay = {"data": decided, **({"train": train_decided} if train_decided else {})}
    merged = cfg.to_dict()
    merged["data"].update(decided)
    from_dict(merged)  # validates: what we write loads
    head = (f"# written by `myxtts tune` on {device_name(torch.device('cuda' if cuda else 'cpu'))}; "
            f"measured step {st['step_ms']:.1f} ms\n")
    write_text(out, head + yaml.safe_dump(overlay, sort_keys=False))
    write_text(merged_path, head + yaml.safe_dump(merged, sort_keys=False))
    res["overrides"] = " ".join([f"data.{k}={v}" for k, v in decided.items()] +
                                [f"train.{k}={v:.3g}" for k, v in train_decided.items()])
    return res | {"overlay": str(out), "merged": str(merged_path),
                  "command": f"myxtts train --config {merged_path} --data {data} --out RUN"}
