"""Zero-shot voice cloning: how close each model comes to voices it never heard.

    python benchmarks/zeroshot_recipe.py --voices ALL_VOICES_CACHE --voice spk5 \\
        --model current=RUN --model pseudo=RUN [...] \\
        --reference-clip NAME=PATH.wav [...] --out RECORD [--device-label TEXT] [--sentences 16]

``ALL_VOICES_CACHE`` holds every voice; ``--voice`` is the one the models never trained on.
Its held-out sentences (the cache's val utterances of that voice, the first ``--sentences``)
are spoken by every model (:class:`myxtts.infer.Synthesizer`: the run's chosen weights, its
trained vocoder, else Griffin-Lim) as ``synthesize`` and ``eval`` speak them
(:meth:`myxtts.infer.Synthesizer.synthesize`), seed 0, one at a time, and scored per *target*:

- the voice itself, cloned from the source file of its first training clip; the ceiling row is
  its recordings of the same sentences;
- each ``--reference-clip NAME=PATH`` (a real speaker, any rate), cloned from that file, on the
  first 8 of the sentences; its row ``reference clip`` is the clip scored as an output.

The *training voices* are the cache's voices minus ``--voice``. Per model and target:

- ``wer``, ``cer``: Whisper tiny.en (``Listener``, as ``myxtts eval``) on the outputs, pooled;
- ``cos_own``: mean GE2E (Resemblyzer) cosine of the outputs to the target: for the voice its
  centroid (finetune_recipe's: mean embedding of up to 8 training recordings), for a clip the
  clip's own embedding; ``cos_best_other``, ``closest_other``: the highest mean cosine to a
  training voice's centroid, and that voice; ``identified``: the share of outputs whose
  nearest of (target, training voices) is the target;
- ``f0_out``: median F0 (Hz) of all outputs' voiced frames pooled: ``librosa.pyin`` on 16 kHz
  audio, fmin 60, fmax 500, 1024-sample (64 ms) frames, its voiced flag; ``f0_ref``: the same
  for the reference file, ``f0_voice`` (the voice only) for its up-to-8 training recordings;
  ``f0_out_over_ref`` / ``f0_out_over_voice``: the ratios;
- ``ltas_target``, ``ltas_nearest_other`` (``ltas_nearest_other_voice``): long-term average
  spectrum distance in dB. LTAS of a set of clips = mean over their speech frames of the
  project's log-mel (``audio.mel_spectrogram`` with the cache's audio settings, outputs
  resampled to its rate) in dB; a speech frame is one whose mean mel magnitude is within 40 dB
  of the clip's loudest frame. Distance = RMS over mel bands of the difference of two LTAS,
  each minus its own mean over bands (level-normalised: loudness is not identity). Targets: the
  voice's up-to-8 training recordings, or the clip; others: each training voice's.

Writes ``RECORD.json`` (every number, the command, the machine, timings) and ``RECORD.md``.
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import soxr
import torch
from finetune_recipe import PER_VOICE, centroids, voice_scores  # benchmarks/, beside this file

from myxtts import audio
from myxtts.data.cache import Cache
from myxtts.errors import UserError
from myxtts.evaluate import metrics
from myxtts.evaluate.evaluation import Listener, recording
from myxtts.infer import Synthesizer
from myxtts.speak import SILENT_DBFS, dbfs

CLIP_SENTENCES = 8  # sentences spoken per reference clip
F0_SR, F0_FRAME, FMIN, FMAX = 16000, 1024, 60.0, 500.0
SPEECH_DB = 40.0  # LTAS frames: within this of the clip's loudest frame
DB = 20 / np.log(10)  # natural-log magnitude → dB


def median_f0(wavs: list[np.ndarray], sr: int) -> float | None:
    import librosa

    voiced = []
    for w in wavs:
        x = soxr.resample(w, sr, F0_SR).astype(np.float32) if sr != F0_SR else w.astype(np.float32)
        if x.size < F0_FRAME:
            continue
        f0, flag, _ = librosa.pyin(x, fmin=FMIN, fmax=FMAX, sr=F0_SR, frame_length=F0_FRAME)
        voiced.append(f0[flag & np.isfinite(f0)])
    pooled = np.concatenate(voiced) if voiced else np.zeros(0)
    return float(np.median(pooled)) if pooled.size else None


def ltas(wavs: list[np.ndarray], sr: int, a) -> np.ndarray | None:
    """(n_mels,) mean dB log-mel over the speech frames of ``wavs``; None when all are silent."""
    frames = []
    for w in wavs:
        if not w.size or dbfs(float(np.abs(w).max())) < SILENT_DBFS:
            continue
        w = soxr.resample(w, sr, a.sample_rate).astype(np.float32) if sr != a.sample_rate else w
        mel = audio.mel_spectrogram(np.asarray(w, dtype=np.float32), a)  # (T, M) natural log
        if not len(mel):
            continue
        level = DB * np.log(np.exp(mel).mean(axis=1))
        frames.append(DB * mel[level > level.max() - SPEECH_DB])
    return np.concatenate(frames).mean(axis=0) if frames else None


def ltas_distance(x: np.ndarray | None, y: np.ndarray | None) -> float | None:
    if x is None or y is None:
        return None
    return float(np.sqrt(np.mean(((x - x.mean()) - (y - y.mean())) ** 2)))


def ratio(x, y):
    return x / y if x is not None and y else None


def load_clip(name, path, a) -> np.ndarray:
    try:
        return audio.preprocess(audio.load_audio(path, a.sample_rate), a)
    except audio.AudioError as e:
        raise UserError(f"--reference-clip {name}: {path}: {e}") from None


def score(wavs, sr, target, ctx, texts=None) -> dict:
    """One set of outputs (or recordings) against one target: every figure of the docstring."""
    try:
        row = voice_scores(wavs, sr, target["name"], target["cents"], ctx["listener"])
    except statistics.StatisticsError:  # every clip silent: no embedding
        row = dict.fromkeys(("cos_own", "cos_best_other", "closest_other", "identified"))
    if texts is not None:
        hyps = [ctx["listener"].asr.transcribe(w, sr) for w in wavs]
        row |= {"wer": metrics.wer(texts, hyps), "cer": metrics.cer(texts, hyps), "transcripts": hyps}
    f0 = median_f0(wavs, sr)
    row |= {"f0_out": f0, "f0_out_over_ref": ratio(f0, target["f0_ref"])}
    if target["kind"] == "voice":
        row["f0_out_over_voice"] = ratio(f0, target["f0_voice"])
    spectrum = ltas(wavs, sr, ctx["a"])
    dist = {n: ltas_distance(spectrum, v) for n, v in ctx["voice_ltas"].items() if n != ctx["voice"]}
    dist = {n: d for n, d in dist.items() if d is not None}
    near = min(dist, key=dist.get) if dist else None
    row |= {"ltas_target": ltas_distance(spectrum, target["ltas"]),
            "ltas_nearest_other": dist.get(near), "ltas_nearest_other_voice": near, "ltas_by_voice": dist}
    return row


def hz(out, ref) -> str:
    """F0 cell: output/reference Hz and the difference in %; "none" where no frame was voiced."""
    cell = f"{'none' if out is None else f'{out:.0f}'}/{'none' if ref is None else f'{ref:.0f}'} Hz"
    return cell + (f" ({100 * (out / ref - 1):+.0f}%)" if out is not None and ref else "")


def table(target: dict) -> list[str]:
    voice = target["kind"] == "voice"
    head = ["model", "step", "WER", "CER", "cos target ¹", "cos nearest other (voice) ¹", "identified",
            "F0 out/ref (%)", *(["F0 out/voice (%)"] if voice else []), "LTAS dist target (dB)",
            "LTAS dist nearest other (voice)"]
    f = lambda x, d=3: "" if x is None else f"{x:.{d}f}"  # noqa: E731
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in target["rows"]:
        cells = [r["model"], str(r.get("step", "")), f(r.get("wer")), f(r.get("cer")), f(r["cos_own"]),
                 f"{f(r['cos_best_other'])} ({r['closest_other']})", f(r["identified"], 2),
                 hz(r["f0_out"], target["f0_ref"])]
        if voice:
            cells.append(hz(r["f0_out"], target["f0_voice"]))
        cells += [f(r["ltas_target"], 2), f"{f(r['ltas_nearest_other'], 2)} ({r['ltas_nearest_other_voice']})"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def run(args) -> int:
    t_start = time.perf_counter()
    cache = Cache(args.voices)
    if args.voice not in cache.speakers:
        raise UserError(f"--voice {args.voice}: not a voice of {args.voices} (it has {', '.join(cache.speakers)})")
    v = cache.speakers.index(args.voice)
    a, sr = cache.audio_cfg, cache.audio_cfg.sample_rate
    held = [int(i) for i in cache.indices("val") if int(cache.index.speaker[i]) == v][:args.sentences]
    if not held:
        raise UserError(f"{args.voices}: {args.voice} has no held-out (val) utterances")
    if len(held) < args.sentences:
        print(f"note: {args.voice} has {len(held)} held-out utterances, fewer than --sentences {args.sentences}")
    texts = [cache.index.text[i] for i in held]
    train = [int(i) for i in cache.indices("train")]
    clips = {name: [i for i in train if int(cache.index.speaker[i]) == s][:PER_VOICE]
             for s, name in enumerate(cache.speakers)}
    first = Path(cache.index.audio[clips[args.voice][0]])
    first = first if first.is_absolute() else cache.source_root / first
    models, refs = [], [(args.voice, str(first))]
    for spec, kind in [(m, "--model") for m in args.model] + [(c, "--reference-clip") for c in args.reference_clip]:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UserError(f"{kind} {spec}: give NAME=PATH")
        if kind == "--model" and not Path(path).exists():
            raise UserError(f"--model {name}: {path}: no such run")
        (models if kind == "--model" else refs).append((name, path))
    if len({n for n, _ in refs}) < len(refs) or len({n for n, _ in models}) < len(models) or \
            any(n in cache.speakers for n, _ in refs[1:]):
        raise UserError("names of --model and of --reference-clip must be unique, and no clip named as a voice")
    ref_wavs = {name: load_clip(name, path, a) for name, path in refs}  # unreadable: one clear line, now

    listener = Listener(threads=torch.get_num_threads())
    recs = {name: [recording(cache, i) for i in idx] for name, idx in clips.items()}
    ctx = {"listener": listener, "a": a, "voice": args.voice,
           "voice_ltas": {name: ltas(w, sr, a) for name, w in recs.items()}}
    cents = centroids(cache, listener)
    others = {n: c for n, c in cents.items() if n != args.voice}
    targets = []
    for k, (name, path) in enumerate(refs):
        t = {"name": name, "kind": "voice" if k == 0 else "clip", "reference": path,
             "texts": texts if k == 0 else texts[:CLIP_SENTENCES], "f0_ref": median_f0([ref_wavs[name]], sr)}
        if k == 0:
            t |= {"cents": cents, "ltas": ctx["voice_ltas"][name], "f0_voice": median_f0(recs[name], sr)}
        else:
            emb = listener.speaker.embed(ref_wavs[name], sr)
            if emb is None:
                raise UserError(f"--reference-clip {name}: {path} holds no sound")
            t |= {"cents": {name: emb, **others}, "ltas": ltas([ref_wavs[name]], sr, a)}
        ceiling = ([recording(cache, i) for i in held], t["texts"], "recordings") if k == 0 else \
            ([ref_wavs[name]], None, "reference clip")
        t["rows"] = [{"model": ceiling[2], **score(ceiling[0], sr, t, ctx, ceiling[1])}]
        print(f"{name}: reference {path}, F0 {t['f0_ref']} Hz", flush=True)
        targets.append(t)
    t_setup = time.perf_counter() - t_start

    synths = []
    for label, path in models:  # all loaded (and every reference conditioned) before any is scored
        synth = Synthesizer(path, device=args.device, log=lambda m, label=label: print(f"[{label}] {m}", flush=True))
        print(f"[{label}] mel-to-audio: {synth.to_wave.name}"
              + (" (no vocoder trained for this run: Griffin-Lim)" if synth.to_wave.griffin_lim else ""), flush=True)
        synths.append((label, path, synth, [synth.reference(t["reference"]) for t in targets]))
    for label, path, synth, conditioned in synths:
        for t, ref in zip(targets, conditioned):
            t0 = time.perf_counter()
            spoken = [synth.synthesize([x], ref, seed=0)[0] for x in t["texts"]]  # one at a time, as eval
            took = time.perf_counter() - t0
            wavs = [sp.wav for sp in spoken]
            if synth.sample_rate != sr:
                wavs = [soxr.resample(w, synth.sample_rate, sr).astype(np.float32) for w in wavs]
            row = {"model": label, "run": path, "step": synth.meta["step"], "weights": str(synth.meta["path"]),
                   "vocoder": synth.to_wave.name, "stopped_share": statistics.fmean(sp.stopped for sp in spoken),
                   "synthesis_seconds": round(took, 2), **score(wavs, sr, t, ctx, t["texts"])}
            row["scored_seconds"] = round(time.perf_counter() - t0 - took, 2)
            t["rows"].append(row)
            print(json.dumps({"target": t["name"], **{k: x for k, x in row.items() if k != "transcripts"}}),
                  flush=True)

    out = Path(args.out)
    seconds = time.perf_counter() - t_start
    record = {"date": time.strftime("%Y-%m-%d"), "command": shlex.join([Path(sys.executable).name, *sys.argv]),
              "device": args.device_label, "torch_device": args.device, "torch": torch.__version__,
              "voices_cache": args.voices, "voice": args.voice, "sentences": texts,
              "held_out_ids": [cache.index.id[i] for i in held], "seconds_total": round(seconds, 1),
              "seconds_setup": round(t_setup, 1),
              "f0": f"librosa.pyin at {F0_SR} Hz, fmin {FMIN:g}, fmax {FMAX:g}, frame {F0_FRAME}; median of "
                    "the voiced frames pooled",
              "ltas": f"mean dB log-mel over frames within {SPEECH_DB:g} dB of each clip's loudest; distance: RMS "
                      "over mel bands of the difference after removing each spectrum's mean over bands",
              "targets": [{k: x for k, x in t.items() if k not in ("cents", "ltas")} | {"ltas_db": None if t["ltas"]
                          is None else np.round(t["ltas"], 2).tolist()} for t in targets]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    md = [f"# Zero-shot cloning of {args.voice} and {len(refs) - 1} reference clip(s)", "",
          f"{record['date']}, {args.device_label or 'machine not given'}; {seconds:.0f} s in all.", ""]
    for t in targets:
        what = (f"held-out voice, {len(t['texts'])} held-out sentences cloned from {Path(t['reference']).name}"
                if t["kind"] == "voice" else f"reference clip {t['reference']}, {len(t['texts'])} sentences")
        md += [f"## {t['name']}: {what}", "", *table(t), ""]
    md += ["¹ GE2E (Resemblyzer) speaker cosine: a model conditioned on GE2E embeddings is scored by the same "
           "encoder, which flatters it.", "",
           f"F0: {record['f0']}. ref = the reference file cloned from; voice = {args.voice}'s training "
           f"recordings (up to {PER_VOICE}). LTAS: {record['ltas']}; others are the training voices "
           f"(the cache's minus {args.voice}). identified: share of outputs nearest the target."]
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--voices", required=True, help="cache holding every voice, the held-out one included")
    p.add_argument("--voice", required=True, help="the voice no model trained on")
    p.add_argument("--model", action="append", default=[], metavar="LABEL=RUN")
    p.add_argument("--reference-clip", action="append", default=[], metavar="NAME=PATH")
    p.add_argument("--out", required=True, help="record path without extension")
    p.add_argument("--device-label", default="")
    p.add_argument("--device", default="cpu", help="where the models run (default cpu)")
    p.add_argument("--sentences", type=int, default=16)
    try:
        return run(p.parse_args(argv))
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
