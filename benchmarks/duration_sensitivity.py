"""How much of what a duration-decoder model says rests on getting the durations exactly right?
Each trained clip is spoken by the frame decoder from four sets of durations, everything else
as in training (its reference, eval mode), and heard by the recogniser:

    aligner             the aligner's frames per token (the teacher-forced mels)
    aligner_jitter      the same, each token moved by -1, 0 or +1 frame at random (seed 0)
    predicted           the duration predictor's, as synthesis uses them
    predicted_rescaled  the predictor's, scaled so the clip keeps its true length

    PYTHONPATH=. python benchmarks/duration_sensitivity.py RUN CACHE [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from teacher_forced_asr import teacher_forced  # noqa: E402

from myxtts.data.cache import Cache  # noqa: E402
from myxtts.evaluate import metrics  # noqa: E402
from myxtts.evaluate.evaluation import Listener, plan  # noqa: E402
from myxtts.models.aligner import durations_to_alignment  # noqa: E402
from myxtts.models.checkpoint import load_model  # noqa: E402
from myxtts.models.mel_decoder import denormalize_mel  # noqa: E402
from myxtts.text import TextProcessor, Vocabulary  # noqa: E402
from myxtts.vocode import MelToWave  # noqa: E402

KINDS = ("aligner", "aligner_jitter", "predicted", "predicted_rescaled")


@torch.no_grad()
def spoken_mel(model, batch, dur: torch.Tensor) -> torch.Tensor:
    """The frame decoder's mel (T, M) raw log-mel for durations ``dur`` (Tt,) integer frames."""
    memory, _ = model.encode(batch["tokens"], batch["token_lens"], batch["ref_mel"], batch["ref_lens"])
    n_text = batch["tokens"].shape[1]
    n = int(dur.sum())
    align = durations_to_alignment(dur[None], n)  # (1, T, Tt)
    _, post = model.decoder._decode(align, memory[:, :n_text], memory[:, n_text:], torch.tensor([n]))
    return denormalize_mel(post)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("cache")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    model, cfg, symbols, meta = load_model(args.run)
    text, cache = TextProcessor(cfg.text, Vocabulary(symbols)), Cache(args.cache)
    listener, vocode, sr = Listener(threads=torch.get_num_threads()), MelToWave(cache.audio_cfg), cfg.audio.sample_rate
    g = torch.Generator().manual_seed(0)
    rows = []
    for s in plan(cache, split="train"):
        batch, out = teacher_forced(model, cfg, text, cache, s)
        aligned = out["dur"][0].long()  # (Tt,)
        predicted = torch.expm1(out["log_dur"][0]).round().clamp(min=1).long()
        durs = {"aligner": aligned,
                "aligner_jitter": (aligned + torch.randint(-1, 2, aligned.shape, generator=g)).clamp(min=1),
                "predicted": predicted,
                "predicted_rescaled": (predicted * aligned.sum() / predicted.sum()).round().clamp(min=1).long()}
        rows.append({"id": s.id, "text": s.text, **{k: listener.asr.transcribe(vocode(spoken_mel(model, batch, d)), sr)
                                                    for k, d in durs.items()}})
    refs = [r["text"] for r in rows]
    result = {"checkpoint": meta["path"], "step": meta["step"],
              **{f"wer_{k}": metrics.wer(refs, [r[k] for r in rows]) for k in KINDS},
              **{f"cer_{k}": metrics.cer(refs, [r[k] for r in rows]) for k in KINDS}, "per_clip": rows}
    text_out = json.dumps(result, indent=1)
    print(text_out)
    if args.json:
        args.json.write_text(text_out)


if __name__ == "__main__":
    main()
