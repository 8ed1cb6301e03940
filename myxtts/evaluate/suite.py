"""Evaluate a trained checkpoint on a cache's held-out split, or on new sentences in its voices,
and write the report (``myxtts eval``): the library side of the command."""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import torch

from myxtts.errors import UserError
from myxtts.evaluate import require
from myxtts.evaluate.evaluation import Listener, evaluate, plan, plan_texts
from myxtts.evaluate.report import write_report
from myxtts.models.checkpoint import trained_voices
from myxtts.vocode import MEL_KEYS


@dataclass(frozen=True, kw_only=True)
class EvalOptions:
    """What ``myxtts eval`` evaluates and how; every field is an option of the command."""

    checkpoint: str | Path  # a run, a checkpoint folder or a .safetensors file
    data: str | Path | None = None  # the cache (default: the one the run recorded)
    out: str | Path = "eval"  # where eval.json, eval.html and audio/ go
    vocoder: str | None = None  # a vocoder run or file (default: the run's own, else Griffin-Lim)
    limit: int | None = None  # the first N sentences only
    device: str | None = None
    asr_model: str | Path | None = None  # a CTranslate2 Whisper model directory for every language
    seed: int = 0  # the pre-net dropout's
    split: str = "val"  # val: held-out sentences; train: sentences the model trained on
    step: int | None = None  # a run's weights of this step instead of its best
    sentences: str | Path | None = None  # a text file of new sentences, one per line


def evaluate_checkpoint(opts: EvalOptions, log=print) -> dict:
    """Synthesize, score and report; → the summary written to ``opts.out/eval.json``. With
    ``opts.sentences``, its new sentences are spoken in the cache's training voices instead of
    ``opts.split``."""
    require()  # before loading anything: a missing extra is the first thing to say
    from myxtts.infer import Synthesizer

    if opts.limit is not None and opts.limit < 1:
        raise UserError("--limit must be at least 1")
    texts, sentences, limit, split = None, opts.sentences, opts.limit, opts.split
    if sentences is not None:
        try:
            texts = Path(sentences).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"--sentences {sentences}: cannot read it ({e})") from None
    synth = Synthesizer(opts.checkpoint, opts.vocoder, opts.device, log=log, step=opts.step)
    cache = synth.cache(opts.data)  # --data, else the one the run recorded, as serve and export take it
    data = cache.path
    diff = [f"audio.{k}: {getattr(cache.audio_cfg, k)} in the cache, {getattr(synth.cfg.audio, k)} "
            "in the model" for k in MEL_KEYS if getattr(cache.audio_cfg, k) != getattr(synth.cfg.audio, k)]
    if diff:
        raise UserError(f"{data} holds other mel features than the model was trained on: " + "; ".join(diff))
    if texts is not None:
        chosen, which, split = plan_texts(cache, texts, limit), f"new ({sentences})", "new"
    else:
        chosen, which = plan(cache, limit, split), "held-out" if split == "val" else "training"
    log(f"evaluating {len(chosen)} {which} sentence(s) in the voices of {data} with "
        f"{synth.meta['path']}, mels to audio through {synth.to_wave.name}")
    listener = Listener(opts.asr_model, threads=torch.get_num_threads())
    result = evaluate(synth, cache, chosen, listener, seed=opts.seed, trained_voices=trained_voices(synth.meta))
    meta = {"checkpoint": synth.meta["path"], "step": synth.meta["step"], "data": str(data),
            "split": split, "sentences_file": None if sentences is None else str(sentences),
            "vocoder": synth.to_wave.name,
            "speaker_model": "resemblyzer GE2E (pretrained.pt)",  # the recognisers: the summary's asr
            "device": str(synth.device), "seed": opts.seed,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    paths = write_report(Path(opts.out), result, meta, synth.sample_rate)
    return {**meta, **result.summary, "paths": {k: str(v) for k, v in paths.items()}}
