"""What the recogniser makes of a checkpoint's *teacher-forced* mels on the held-out split: the
decoder fed the true previous frames, as in training. Next to ``myxtts eval`` (free-running) it
separates the two ways a model can fail new sentences: teacher-forced speech that is already
unintelligible means the model has not learned text → sound yet (train longer or differently);
intelligible teacher-forced speech with free-running babble means exposure to its own
predictions is what breaks it.

    PYTHONPATH=. python benchmarks/teacher_forced_asr.py RUN CACHE [--limit N] [--split val|train]
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from myxtts.data.cache import Cache
from myxtts.data.dataset import ref_frames_for
from myxtts.evaluate import metrics
from myxtts.evaluate.evaluation import Listener, plan
from myxtts.models.checkpoint import load_model
from myxtts.rundir import resolve_checkpoint
from myxtts.text import TextProcessor, Vocabulary
from myxtts.vocode import MelToWave


def teacher_forced(model, cfg, text, cache, s):
    """One sentence ``s`` (evaluation.plan's) through the model as in training, eval mode: its
    true mel (padded to a multiple of r), its reference's first ``data.ref_seconds`` →
    (batch, outputs), both as the model's ``forward`` and ``losses`` take them."""
    ids = text.encode(s.text)
    n_ref, r = ref_frames_for(cfg.audio, cfg.data.ref_seconds), cfg.model.reduction
    mel = torch.from_numpy(np.asarray(cache.mel(s.index), dtype=np.float32))  # (T, M)
    n = mel.shape[0]
    pad = (-n) % r
    mel_in = torch.cat([mel, mel[-1:].expand(pad, -1)])[None]  # (1, T', M), T' a multiple of r
    ref = torch.from_numpy(np.asarray(cache.mel(s.ref)[:n_ref], dtype=np.float32))[None]  # (1, Tr, M)
    batch = {"tokens": torch.tensor([ids]), "token_lens": torch.tensor([len(ids)]), "mel": mel_in,
             "mel_lens": torch.tensor([n]), "ref_mel": ref, "ref_lens": torch.tensor([ref.shape[1]]),
             "speaker": torch.tensor([int(cache.index.speaker[s.index])])}  # the speaker loss reads it
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return batch, model(batch)
    finally:
        model.train(was_training)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("cache")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--split", default="val", choices=["val", "train"])
    args = ap.parse_args()
    model, cfg, symbols, meta = load_model(resolve_checkpoint(args.checkpoint))
    text = TextProcessor(cfg.text, Vocabulary(symbols))
    cache = Cache(args.cache)
    listener = Listener(threads=torch.get_num_threads())
    vocode = MelToWave(cache.audio_cfg)
    sr = cfg.audio.sample_rate
    rows = []
    for s in plan(cache, args.limit, args.split):
        batch, out = teacher_forced(model, cfg, text, cache, s)
        n = int(batch["mel_lens"][0])
        wav = vocode(out["mel_post"][0, :n])
        rows.append({"id": s.id, "text": s.text, "teacher_forced": listener.asr.transcribe(wav, sr)})
    refs, hyps = [r_["text"] for r_ in rows], [r_["teacher_forced"] for r_ in rows]
    print(json.dumps({"checkpoint": meta["path"], "step": meta["step"], "sentences": len(rows),
                      "wer_teacher_forced": metrics.wer(refs, hyps), "cer_teacher_forced": metrics.cer(refs, hyps),
                      "per_sentence": rows}, indent=1))


if __name__ == "__main__":
    main()
