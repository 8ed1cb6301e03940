"""The vocoder's learning curve: copy synthesis of a cache's held-out clips through each
checkpoint of a vocoder run, next to the recordings and Griffin-Lim.

    python benchmarks/vocoder_curve.py --data CACHE --run VOCODER_RUN [--run ...] --out RECORD
        [--limit 32] [--device-label "CPU, 2 cores"]

For every checkpoint under each run's ``checkpoints/`` (and for the recordings and Griffin-Lim
once) it scores the held-out clips' ground-truth mels turned back into audio:

- DNSMOS OVRL / SIG / BAK / P.808 (``myxtts.evaluate.naturalness``);
- log-spectral distance to the recording in dB (``lsd_db``: per frame, the RMS over the STFT
  bins up to ``audio.fmax`` of the difference of 20 log10 magnitudes, averaged over frames; 0 is
  identical);
- WER and CER of Whisper tiny.en's transcript (``myxtts.evaluate.asr``);
- the real-time factor of mel-to-audio alone on this machine (seconds taken / seconds of audio).

Training time comes from the run's ``metrics.jsonl`` (``time_s`` of the checkpoint's step).
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

from myxtts import audio
from myxtts.data.cache import Cache
from myxtts.evaluate import metrics
from myxtts.evaluate.asr import Recognizer
from myxtts.evaluate.evaluation import recording
from myxtts.evaluate.naturalness import SCORES, Naturalness
from myxtts.models.checkpoint import load_model
from myxtts.rundir import RunDir


def lsd_db(wav: np.ndarray, ref: np.ndarray, cfg) -> float:
    """Log-spectral distance (dB) between two waveforms of the same framing, over the STFT bins
    the mel describes (up to ``audio.fmax``): above it a mel holds nothing to invert, so
    Griffin-Lim leaves it empty and the distance there would measure the band, not the vocoder."""
    n = min(wav.size, ref.size)
    spec = audio.MelSpectrogram(cfg).magnitude
    top = round((cfg.fmax or cfg.sample_rate / 2) * cfg.n_fft / cfg.sample_rate) + 1  # bins ≤ fmax
    with torch.no_grad():
        a, b = (spec(torch.from_numpy(np.ascontiguousarray(x[:n]))[None])[0, :top] for x in (wav, ref))
    da, db = (20 * torch.log10(x.clamp(min=1e-5)) for x in (a, b))  # (F, T)
    return float(((da - db) ** 2).mean(0).sqrt().mean())


def score(name: str, wavs: list[np.ndarray], refs: list[np.ndarray], texts: list[str], seconds_taken,
          audio_cfg, judge: Naturalness, asr: Recognizer) -> dict:
    sr = audio_cfg.sample_rate
    mos = [judge.score(w, sr) for w in wavs]
    hyps = [asr.transcribe(w, sr) for w in wavs]
    row = {"name": name, "clips": len(wavs)}
    for k in SCORES:
        row[f"dnsmos_{k}"] = statistics.fmean(m[k] for m in mos if m[k] is not None)
    row["lsd_db"] = statistics.fmean(lsd_db(w, r, audio_cfg) for w, r in zip(wavs, refs))
    row["wer"], row["cer"] = metrics.wer(texts, hyps), metrics.cer(texts, hyps)
    audio_s = sum(w.size for w in wavs) / sr
    row["rtf"] = None if seconds_taken is None else seconds_taken / audio_s
    print(json.dumps(row), flush=True)
    return row


def train_time(run: Path, step: int) -> float | None:
    times = {}
    for rec in RunDir(run).read_metrics():
        if "time_s" in rec:
            times[rec["step"]] = rec["time_s"]
    done = [s for s in times if s <= step]
    return times[max(done)] if done else None


def vocode_all(gen, mels) -> tuple[list[np.ndarray], float]:
    t0 = time.perf_counter()
    with torch.no_grad():
        wavs = [gen(torch.from_numpy(m)[None])[0].numpy() for m in mels]
    return wavs, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--run", action="append", default=[], help="vocoder run folder (repeatable)")
    p.add_argument("--out", required=True, help="record path without extension")
    p.add_argument("--limit", type=int, default=32)
    p.add_argument("--every", type=int, default=1, help="score every N-th checkpoint (and the last)")
    p.add_argument("--device-label", default="")
    args = p.parse_args(argv)

    cache = Cache(args.data)
    idx = [int(i) for i in cache.indices("val")][: args.limit]
    refs = [recording(cache, i) for i in idx]
    mels = [np.asarray(cache.mel(i), dtype=np.float32) for i in idx]
    texts = [cache.index.text[i] for i in idx]
    judge, asr = Naturalness(), Recognizer()
    a = cache.audio_cfg
    rows = []
    for run in map(Path, args.run):
        cks = sorted((run / "checkpoints").glob("step-*"))
        for ck in cks[args.every - 1::args.every] + cks[-1:] * (len(cks) % args.every != 0):
            gen, cfg, _, meta = load_model(ck, "cpu")
            wavs, took = vocode_all(gen, mels)
            row = score(f"{run.name} step {meta['step']}", wavs, refs, texts, took, a, judge, asr)
            row.update(run=str(run), step=meta["step"], train_s=train_time(run, meta["step"]))
            rows.append(row)
    rows.insert(0, score("recordings", refs, refs, texts, None, a, judge, asr))
    t0 = time.perf_counter()
    gl = [audio.griffin_lim(torch.from_numpy(m), a).numpy() for m in mels]
    rows.insert(1, score("griffin-lim", gl, refs, texts, time.perf_counter() - t0, a, judge, asr))

    out = Path(args.out)
    record = {"date": time.strftime("%Y-%m-%d"), "device": args.device_label, "data": args.data,
              "clips": len(idx), "torch": torch.__version__, "rows": rows}
    out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    cols = ["name", "train_s", "dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak", "dnsmos_p808", "lsd_db", "wer",
            "cer", "rtf"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append("" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
