"""What the recogniser makes of a cache's own recordings, and of copy synthesis (the true mel
through Griffin-Lim): the ceiling a model's ``myxtts eval`` WER is compared with.

    python benchmarks/eval_ceiling.py CACHE [--split val|train|all] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from myxtts.data.cache import Cache
from myxtts.evaluate import metrics
from myxtts.evaluate.evaluation import Listener, recording
from myxtts.vocode import MelToWave


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache")
    ap.add_argument("--split", default="val", choices=["val", "train", "all"])
    ap.add_argument("--json")
    args = ap.parse_args()
    cache = Cache(args.cache)
    idx = list(range(len(cache))) if args.split == "all" else [int(i) for i in cache.indices(args.split)]
    listener = Listener(threads=torch.get_num_threads())
    vocode = MelToWave(cache.audio_cfg)
    sr = cache.audio_cfg.sample_rate
    rows, t0 = [], time.perf_counter()
    for i in idx:
        mel = torch.from_numpy(np.asarray(cache.mel(i), dtype=np.float32))
        rows.append({"id": cache.index.id[i], "text": cache.index.text[i],
                     "recording": listener.asr.transcribe(recording(cache, i), sr),
                     "copy_synthesis": listener.asr.transcribe(vocode(mel), sr)})
    refs = [r["text"] for r in rows]
    out = {"cache": args.cache, "split": args.split, "sentences": len(rows),
           "asr_model": str(listener.asr.path), "seconds": round(time.perf_counter() - t0, 1)}
    for key in ("recording", "copy_synthesis"):
        hyps = [r[key] for r in rows]
        out[f"wer_{key}"], out[f"cer_{key}"] = metrics.wer(refs, hyps), metrics.cer(refs, hyps)
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**out, "per_sentence": rows}, f, indent=1)


if __name__ == "__main__":
    main()
