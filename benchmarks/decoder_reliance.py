"""How much a checkpoint's decoder leans on its previous frames rather than on the text, on the
held-out split. For each sentence the teacher-forced pass runs three times: with the true previous
frames (as in training), with them shuffled in time, and with every one replaced by the silent
"go" frame; then the sentence is generated free-running. Reported per sentence and on average:

- ``l1``: mean |output - recording| over frames and mel bins (log-mel), teacher-forced passes;
- ``std``: the output's spread over time (std over frames, averaged over mel bins), next to the
  recording's: an over-smoothed output, the sound of babble, has a small one;
- ``monotonic``: the share of free-running decoder steps whose most-attended token is not behind
  the previous step's, and ``reached``: the last most-attended token / the number of tokens.

A decoder that reads the text keeps most of its accuracy with shuffled inputs; one that mostly
extrapolates its inputs loses it, and free-running (its own smooth outputs as inputs) it
produces a smooth average at the right pace.

    PYTHONPATH=. python benchmarks/decoder_reliance.py RUN CACHE [--limit N]
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from myxtts.data.cache import Cache
from myxtts.data.dataset import ref_frames_for
from myxtts.evaluate.evaluation import plan
from myxtts.models.checkpoint import load_model
from myxtts.models.mel_decoder import MEL_MEAN
from myxtts.text import TextProcessor, Vocabulary


def spread(mel: torch.Tensor) -> float:
    """(T, M) → std over time, averaged over mel bins."""
    return float(mel.std(0).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("cache")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    model, cfg, symbols, meta = load_model(args.checkpoint)
    text = TextProcessor(cfg.text, Vocabulary(symbols))
    cache = Cache(args.cache)
    n_ref, r = ref_frames_for(cfg.audio, cfg.data.ref_seconds), cfg.model.reduction
    shuffle = torch.Generator().manual_seed(args.seed)
    rows = []
    for s in plan(cache, args.limit):
        ids = text.encode(s.text)
        mel = torch.from_numpy(np.asarray(cache.mel(s.index), dtype=np.float32))  # (T, M)
        n = mel.shape[0]
        mel_in = torch.cat([mel, mel[-1:].expand((-n) % r, -1)])[None]  # (1, T', M), T' % r == 0
        ref = torch.from_numpy(np.asarray(cache.mel(s.ref)[:n_ref], dtype=np.float32))[None]
        inputs = {"true": mel_in,
                  "shuffled": mel_in[:, torch.randperm(mel_in.shape[1], generator=shuffle)],
                  "go_frames": torch.full_like(mel_in, MEL_MEAN)}  # normalises to the zero go frame
        row = {"id": s.id, "text": s.text, "std_recording": round(spread(mel), 3)}
        with torch.no_grad():
            for name, m_in in inputs.items():
                batch = {"tokens": torch.tensor([ids]), "token_lens": torch.tensor([len(ids)]),
                         "mel": m_in, "mel_lens": torch.tensor([n]), "ref_mel": ref,
                         "ref_lens": torch.tensor([ref.shape[1]])}
                out = model(batch)["mel_post"][0, :n]  # (T, M)
                row[f"l1_{name}"] = round(float((out - mel).abs().mean()), 3)
                row[f"std_{name}"] = round(spread(out), 3)
            mels, lens, attn = model.generate(batch["tokens"], batch["token_lens"], ref,
                                              batch["ref_lens"], generator=torch.Generator().manual_seed(args.seed))
        steps = int(lens[0]) // r
        top = attn[0, :steps].argmax(-1)  # (S,) most-attended token per decoder step
        row["std_free_running"] = round(spread(mels[0, :int(lens[0])]), 3)
        row["monotonic"] = round(float((top[1:] >= top[:-1]).float().mean()), 3)
        row["reached"] = round(float(top[-1]) / (len(ids) - 1), 3)
        rows.append(row)
    keys = [k for k in rows[0] if k not in ("id", "text")]
    mean = {k: round(float(np.mean([row[k] for row in rows])), 3) for k in keys}
    print(json.dumps({"checkpoint": meta["path"], "step": meta["step"], "sentences": len(rows),
                      "mean": mean, "per_sentence": rows}, indent=1))


if __name__ == "__main__":
    main()
