"""``myxtts eval`` of one checkpoint with the inference attention window (``model.attn_window``)
set from the command line instead of from the checkpoint's config: the same trained weights
scored with and without the window, so the comparison holds everything else fixed.

    PYTHONPATH=. python benchmarks/eval_window.py RUN CACHE OUT --window N [--limit N]
"""
from __future__ import annotations

import argparse
import json

import myxtts.infer as infer
from myxtts.evaluate.suite import evaluate_checkpoint

KEYS = ("step", "wer", "cer", "wer_ground_truth", "wer_copy_synthesis", "speaker_cosine", "speaker_cosine_mismatched",
        "stopped_share", "duration_ratio")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("cache")
    ap.add_argument("out")
    ap.add_argument("--window", type=int, required=True, help="model.attn_window; 0: the whole text")
    ap.add_argument("--limit", type=int, help="the first N held-out sentences only")
    args = ap.parse_args()
    load = infer.load_model

    def load_with_window(path, device="cpu"):
        model, cfg, vocab, meta = load(path, device)
        if meta.get("kind") == "acoustic":
            cfg.model.attn_window = args.window  # the model holds this very ModelConfig
        return model, cfg, vocab, meta

    infer.load_model = load_with_window
    summary = evaluate_checkpoint(args.checkpoint, args.cache, args.out, limit=args.limit)
    print(json.dumps({"attn_window": args.window, **{k: summary.get(k) for k in KEYS}}))


if __name__ == "__main__":
    main()
