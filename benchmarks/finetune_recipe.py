"""One voice, several models: how well each says a new voice's held-out sentences in that voice.

    python benchmarks/finetune_recipe.py --voice VOICE_CACHE --voices ALL_VOICES_CACHE \
        --model zero-shot=RUN --model fine-tuned=RUN [...] --out RECORD [--device-label ...]

``VOICE_CACHE`` holds the new voice alone (prepared with ``prepare --match``); its held-out
sentences are spoken by every model, cloned from the voice's first training clip, and scored as
``myxtts eval`` scores them (WER and CER of Whisper tiny.en, DNSMOS), with the recordings'
own WER and CER as the ceiling. ``ALL_VOICES_CACHE`` holds every voice, the new one included:
each voice's centroid is the mean speaker embedding of up to 8 of its training recordings, and
each output is compared with all of them:

- ``cos_own``: mean cosine of the outputs to the new voice's centroid;
- ``cos_best_other``, ``closest_other``: the highest mean cosine to another voice's centroid,
  and that voice;
- ``identified``: the share of outputs whose closest centroid is the new voice's.

Writes ``RECORD.json`` and a table in ``RECORD.md``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from myxtts.data.cache import Cache
from myxtts.evaluate import metrics
from myxtts.evaluate.evaluation import Listener, evaluate, plan, recording
from myxtts.infer import Synthesizer
from myxtts.speaker_encoder import cosine

PER_VOICE = 8  # recordings per voice centroid


def centroids(cache: Cache, listener: Listener) -> dict[str, np.ndarray]:
    sr = cache.audio_cfg.sample_rate
    train = [int(i) for i in cache.indices("train")]
    out = {}
    for s, name in enumerate(cache.speakers):
        mine = [i for i in train if int(cache.index.speaker[i]) == s][:PER_VOICE]
        embs = [e for e in (listener.speaker.embed(recording(cache, i), sr) for i in mine) if e is not None]
        mean = np.mean(embs, axis=0)
        out[name] = mean / np.linalg.norm(mean)
    return out


def voice_scores(wavs: list[np.ndarray], sr: int, voice: str, cents: dict, listener: Listener) -> dict:
    embs = [listener.speaker.embed(w, sr) for w in wavs]
    cos = {name: statistics.fmean(cosine(e, c) for e in embs if e is not None) for name, c in cents.items()}
    nearest = [max(cents, key=lambda n: cosine(e, cents[n])) for e in embs if e is not None]
    other = max((n for n in cos if n != voice), key=cos.get)
    return {"cos_own": cos[voice], "cos_best_other": cos[other], "closest_other": other,
            "identified": sum(n == voice for n in nearest) / max(1, len(nearest)),
            "cos_by_voice": cos}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--voice", required=True, help="cache of the new voice alone")
    p.add_argument("--voices", required=True, help="cache holding every voice, for their centroids")
    p.add_argument("--model", action="append", default=[], metavar="LABEL=RUN")
    p.add_argument("--out", required=True, help="record path without extension")
    p.add_argument("--device-label", default="")
    args = p.parse_args(argv)

    cache, every = Cache(args.voice), Cache(args.voices)
    (voice,) = cache.speakers
    sr = cache.audio_cfg.sample_rate
    sentences = plan(cache)
    listener = Listener(threads=torch.get_num_threads())
    cents = centroids(every, listener)
    rows = []
    recs = [recording(cache, s.index) for s in sentences]
    texts = [s.text for s in sentences]
    hyps = [listener.asr.transcribe(r, sr) for r in recs]
    row = {"model": "recordings", "wer": metrics.wer(texts, hyps), "cer": metrics.cer(texts, hyps),
           **voice_scores(recs, sr, voice, cents, listener)}
    rows.append(row)
    print(json.dumps(row), flush=True)
    for spec in args.model:
        label, run = spec.split("=", 1)
        synth = Synthesizer(run, device="cpu", log=lambda *a: None)
        result = evaluate(synth, cache, sentences, listener, ground_truth=False)
        s = result.summary
        row = {"model": label, "run": run, "step": synth.meta["step"], "vocoder": synth.to_wave.name,
               "wer": s["wer"], "cer": s["cer"], "dnsmos_ovrl": s["dnsmos_ovrl"],
               "speaker_cosine_to_reference": s["speaker_cosine"],
               **voice_scores([sp.wav for sp in result.spoken], sr, voice, cents, listener)}
        rows.append(row)
        print(json.dumps(row), flush=True)

    out = Path(args.out)
    record = {"date": time.strftime("%Y-%m-%d"), "device": args.device_label, "voice": voice,
              "voice_cache": args.voice, "sentences": len(sentences), "reference": cache.index.id[sentences[0].ref],
              "torch": torch.__version__, "rows": rows}
    out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    cols = ["model", "step", "wer", "cer", "dnsmos_ovrl", "cos_own", "cos_best_other", "closest_other",
            "identified"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join("" if r.get(c) is None else f"{r[c]:.3f}" if isinstance(r[c], float)
                                       else str(r[c]) for c in cols) + " |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
