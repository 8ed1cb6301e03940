"""Can the default model learn a few real clips by heart? Trains it on the LJSpeech test clips
alone and asks the recogniser what it says, decomposed so a failure points at its cause:

    copy synthesis      the clips' true mels through Griffin-Lim (the ceiling of this path)
    teacher-forced      the model's mels with the aligner's durations, as in training
    synthesis           the model's mels with its own predicted durations, as ``myxtts speak``
    durations           predicted against the aligner's frames per token
    mel L1 by region    teacher-forced, on quiet frames, frames at a token change, and the
                        steady inside of tokens of 5+ frames
    losses              every term of the training loss, eval mode, per clip, averaged
    alignment           the aligner's word starts against the speech onsets after pauses and
                        Whisper's word times, and which tokens it gives the pauses
                        (``alignment_check.py``)

    PYTHONPATH=. python benchmarks/memorise_clips.py --out DIR [--clips 8] [--minutes 20]
        [--json FILE] [KEY=VALUE ...]

KEY=VALUE settings go to ``myxtts train`` after the defaults below (``--config tiny``, the
2026-11-26 sampler record's ``train.max_steps=6800`` schedule cut by ``train.time_budget_s``).
An existing DIR/run is scored as it is (``--score-only``) or resumed by the trainer.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alignment_check import check as check_alignment  # noqa: E402
from alignment_check import durations, quiet_frames  # noqa: E402
from teacher_forced_asr import teacher_forced  # noqa: E402

from myxtts.commands.common import EXIT_OK, EXIT_STOPPED  # noqa: E402
from myxtts.data.cache import Cache  # noqa: E402
from myxtts.evaluate import metrics  # noqa: E402
from myxtts.evaluate.evaluation import Listener, plan, speak_sentences  # noqa: E402
from myxtts.infer import Synthesizer  # noqa: E402

CLIPS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "ljspeech"
TRAIN = ["--config", "tiny", "train.max_steps=6800"]  # the 2026-11-26 record's command


def corpus(out: Path, n: int) -> Path:
    """The first ``n`` test clips as an LJSpeech folder under ``out`` (links, no copies)."""
    folder = out / f"clips{n}"
    folder.mkdir(parents=True, exist_ok=True)
    lines = (CLIPS / "metadata.csv").read_text().splitlines()[:n]
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n")
    if not (folder / "wavs").exists():
        (folder / "wavs").symlink_to(CLIPS / "wavs")
    return folder


def myxtts(*args: str, threads: int) -> None:
    """A ``myxtts`` command as a user runs it; training stopped by its time budget is a success."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    code = subprocess.run([sys.executable, "-m", "myxtts", *args], env=env).returncode
    if code not in (EXIT_OK, EXIT_STOPPED):
        raise SystemExit(f"myxtts {args[0]} failed (exit status {code})")


def regions(mel: torch.Tensor, dur: torch.Tensor) -> dict[str, torch.Tensor]:
    """True mel (T, M) and the aligner's frames per token (Tt,) → boolean masks (T,)."""
    token = torch.repeat_interleave(torch.arange(dur.numel()), dur.long())[: mel.shape[0]]  # (T,)
    quiet = quiet_frames(mel)  # (T,)
    change = torch.zeros_like(quiet)
    change[1:] |= token[1:] != token[:-1]
    change[:-1] |= change[1:].clone()  # the frame on either side of a boundary
    long_token = dur.long()[token] >= 5
    return {"quiet": quiet, "token_change": change & ~quiet,
            "steady": long_token & ~change & ~quiet}


def speak_clips(synth: Synthesizer, cache: Cache) -> tuple[list, list]:
    """The training clips (the cache's train split) and the model saying each, with its own
    durations, as ``myxtts synthesize`` speaks."""
    sentences = plan(cache, split="train")
    return sentences, [said for said, _ in speak_sentences(synth, cache, sentences, seed=0)]


def score(run: Path, cache_dir: Path, threads: int) -> dict:
    synth = Synthesizer(run, log=lambda *_: None)  # Griffin-Lim: the run has no vocoder
    model, cfg, text, vocode, meta = synth.model, synth.cfg, synth.text, synth.to_wave, synth.meta
    cache = Cache(cache_dir)
    listener = Listener(threads=threads)
    sr = cfg.audio.sample_rate
    sentences, spoken = speak_clips(synth, cache)
    rows, terms, region_err, forced = [], {}, {}, []
    for s, sp in zip(sentences, spoken):
        batch, out = teacher_forced(model, cfg, text, cache, s)
        forced.append((s, batch, out))
        n = int(batch["mel_lens"][0])
        for k, v in model.losses(batch, out).items():
            terms.setdefault(k, []).append(float(v))
        true_mel = batch["mel"][0, :n]
        dur = torch.tensor(durations(out, cfg.model.reduction, batch["tokens"].shape[1]))  # (Tt,)
        err = (out["mel_post"][0, :n] - true_mel).abs().mean(dim=1)  # (T,)
        for name, m in regions(true_mel, dur).items():
            region_err.setdefault(name, []).append((float(err[m].sum()), int(m.sum())))
        copy = vocode(true_mel)
        rows.append({
            "id": s.id, "text": s.text,
            "copy_synthesis": listener.asr.transcribe(np.asarray(copy, dtype=np.float32), sr),
            "teacher_forced": listener.asr.transcribe(vocode(out["mel_post"][0, :n]), sr),
            "synthesis": listener.asr.transcribe(sp.wav, sr), "frames": n,
            "frames_predicted": sp.mel.shape[0]})
        if "log_dur" in out:  # the duration decoder's predictor against its aligner
            predicted = torch.expm1(out["log_dur"][0]).round().clamp(min=1)  # (Tt,) as generate
            rows[-1].update(duration_abs_error_frames=float((predicted - dur).abs().mean()),
                            duration_log_mse=float((out["log_dur"][0] - torch.log1p(dur)).pow(2).mean()))
    refs = [r["text"] for r in rows]
    result = {"run": str(run), "checkpoint": meta["path"], "step": meta["step"],
              "clips": len(rows), "seed": cfg.train.seed}
    for key in ("copy_synthesis", "teacher_forced", "synthesis"):
        hyps = [r[key] for r in rows]
        result[f"wer_{key}"], result[f"cer_{key}"] = metrics.wer(refs, hyps), metrics.cer(refs, hyps)
    result["losses"] = {k: float(np.mean(v)) for k, v in terms.items()}
    result["mel_l1_by_region"] = {k: {"l1": sum(e for e, _ in v) / max(1, sum(c for _, c in v)),
                                      "frames": sum(c for _, c in v)} for k, v in region_err.items()}
    result["length_ratio"] = sum(r["frames_predicted"] for r in rows) / sum(r["frames"] for r in rows)
    if "duration_abs_error_frames" in rows[0]:
        result["duration_abs_error_frames"] = float(np.mean([r["duration_abs_error_frames"] for r in rows]))
    result["alignment"] = check_alignment(forced, cfg, text.vocab.symbols, cache, listener.asr)
    result["per_clip"] = rows
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--clips", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--score-only", action="store_true")
    ap.add_argument("--json", type=Path)
    args, settings = ap.parse_known_args()
    torch.set_num_threads(args.threads)
    cache, run = args.out / f"cache{args.clips}", args.out / "run"
    t0 = time.perf_counter()
    if not (cache / "index.json").exists():
        myxtts("prepare", str(corpus(args.out, args.clips)), "--out", str(cache), "--workers", "1",
               threads=args.threads)
    if not args.score_only:
        myxtts("train", *TRAIN, "--data", str(cache), "--out", str(run), "--no-progress",
               f"train.time_budget_s={args.minutes * 60:g}", *settings, threads=args.threads)
    t1 = time.perf_counter()
    trained = None if args.score_only else TRAIN + [f"train.time_budget_s={args.minutes * 60:g}"] + settings
    result = {"train_command_settings": trained,
              "threads": args.threads, "prepare_and_train_seconds": round(t1 - t0, 1),
              **score(run, cache, args.threads)}
    result["score_seconds"] = round(time.perf_counter() - t1, 1)
    text = json.dumps(result, indent=1)
    print(text)
    (args.json or args.out / "memorise.json").write_text(text)


if __name__ == "__main__":
    main()
