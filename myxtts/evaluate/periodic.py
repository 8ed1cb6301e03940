"""Evaluation during training (``train.eval_every``): a few held-out sentences, spoken with the
model being trained and scored, so a run shows intelligibility and naturalness (DNSMOS) next to
its loss.

The trainer only sees a callable ``(step, model, cache) -> {name: figure}``; this module, and the
ASR, DNSMOS and speaker packages behind it, stay optional.
"""
from __future__ import annotations

import time

import torch

from myxtts import vocode
from myxtts.evaluate import require
from myxtts.evaluate.evaluation import FIGURES, Listener, evaluate, plan
from myxtts.infer import Synthesizer
from myxtts.text import TextProcessor

SENTENCES = 8  # held-out sentences per evaluation: enough for a WER trend, cheap on a CPU


class TrainingEval:
    """Scores the model every ``train.eval_every`` steps; → ``eval_*`` figures for the run's log,
    and ``eval_vocoder``, what turned mels into audio: the run's own vocoder (``RUN/vocoder``)
    once one is there, else Griffin-Lim. The recordings and copy synthesis are scored at the
    first call and again when the vocoder changes: otherwise they do not change."""

    def __init__(self, cfg, run, sentences: int = SENTENCES, asr_model=None):
        require()  # fail before training starts, not at the first evaluation
        self.cfg, self.run, self.n, self.asr_model = cfg, run, sentences, asr_model
        self.listener: Listener | None = None
        self.scored_with: str | None = None  # the vocoder the recordings' copy synthesis went through

    def __call__(self, step: int, model, cache) -> dict:
        t0 = time.perf_counter()
        device = next(model.parameters()).device
        # Forked RNG: evaluating must not shift the training run's random stream (exact resume);
        # building the speaker encoder draws from it too (its layers initialise before loading).
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            if self.listener is None:
                self.listener = Listener(self.asr_model, threads=torch.get_num_threads())
            to_wave = vocode.load(self.cfg.audio, checkpoint=self.run, device=device)
            first = to_wave.name != self.scored_with
            synth = Synthesizer.of(model, self.cfg, TextProcessor(cache.text_cfg, cache.vocab), to_wave,
                                   log=lambda _: None)
            result = evaluate(synth, cache, plan(cache, self.n), self.listener, ground_truth=first,
                              trained_voices=cache.voices("train"))
        self.scored_with = to_wave.name
        figures = {f"eval_{k}": result.summary[k] for k in FIGURES if result.summary.get(k) is not None}
        return {**figures, "eval_seconds": time.perf_counter() - t0, "eval_vocoder": to_wave.name}
