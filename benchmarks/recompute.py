"""What ``train.recompute`` buys: activation memory and step time, with and without it.

    PYTHONPATH=. python benchmarks/recompute.py CACHE [--preset base] [--steps 6] [--json OUT]

For each bucket shape of the preset on CACHE (one real batch each, ``observe.measure.FixedBatches``)
it counts the bytes a training step keeps for its backward pass (``train.recompute.saved_bytes``:
the activation memory, the same on every device), and it times eager steps with the one harness
(``observe.measure``), both with ``train.recompute`` off and on. On a GPU, where
``data.frame_budget=auto`` sizes the batch to memory, the largest budget that fits is the
sizing's own answer (run with and without the setting); on a CPU the bytes per frame are the
device-independent part of that answer.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from myxtts.config import load
from myxtts.observe.measure import FixedBatches, measure
from myxtts.train.build import build_run
from myxtts.train.precision import device_name
from myxtts.train.recompute import saved_bytes


def one(data: str, preset: str, recompute: bool, steps: int) -> dict:
    cfg = load(preset, ["data.num_workers=0", "train.compile=off", f"train.recompute={str(recompute).lower()}"])
    run = build_run(cfg, data, with_batches=False)
    batches = FixedBatches(run.cache, run.cfg, run.device)
    model = run.model

    def step(b):
        with run.precision.autocast():
            out = model(b)
        return model.losses(b, {k: v.float() for k, v in out.items()})["loss"]

    kept = {"x".join(map(str, s)): saved_bytes(lambda b=b: step(b.tensors)) for s, b in
            zip(batches.shapes, batches.batches)}
    frames = {"x".join(map(str, s)): s[0] * s[2] for s in batches.shapes}
    timed = measure(run, steps * len(batches), batches=batches)
    return {"saved_mib_by_shape": {k: round(v / 2**20, 1) for k, v in kept.items()},
            "saved_kib_per_padded_frame": round(max(kept[k] / frames[k] for k in kept) / 1024, 1),
            "step_ms": round(timed["step_ms"], 1), "step_ms_by_shape": {
                k: round(v["mean_ms"], 1) for k, v in timed["step_by_shape"].items()},
            "device": device_name(run.device), "precision": run.precision.name}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--preset", default="base")
    ap.add_argument("--steps", type=int, default=6, help="timed steps per shape")
    ap.add_argument("--json")
    a = ap.parse_args()
    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "preset": a.preset,
           "torch": torch.__version__, "data": a.data}
    for name, on in (("off", False), ("on", True)):
        res[name] = one(a.data, a.preset, on, a.steps)
        print(name, json.dumps(res[name]), flush=True)
    res["saved_ratio"] = round(res["on"]["saved_kib_per_padded_frame"] / res["off"]["saved_kib_per_padded_frame"], 3)
    res["step_time_ratio"] = round(res["on"]["step_ms"] / res["off"]["step_ms"], 3)
    text = json.dumps(res, indent=2)
    if a.json:
        open(a.json, "w").write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
