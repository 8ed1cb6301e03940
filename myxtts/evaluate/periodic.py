"""Evaluation during training (``train.eval_every``): a few held-out sentences, spoken with the
model being trained and scored, so a run shows intelligibility next to its loss.

The trainer only sees a callable ``(step, model, cache) -> {name: figure}``; this module, and the
ASR and speaker packages behind it, stay optional.
"""
from __future__ import annotations

import time

import torch

from myxtts.evaluate import require
from myxtts.evaluate.evaluation import FIGURES, Listener, evaluate, griffin_lim_vocoder, plan
from myxtts.text import TextProcessor

SENTENCES = 8  # held-out sentences per evaluation: enough for a WER trend, cheap on a CPU


class TrainingEval:
    """Scores the model every ``train.eval_every`` steps; → ``eval_*`` figures for the run's log.
    The recordings and copy synthesis are scored at the first call only: they do not change."""

    def __init__(self, cfg, sentences: int = SENTENCES, asr_model=None):
        require()  # fail before training starts, not at the first evaluation
        self.cfg, self.n, self.asr_model = cfg, sentences, asr_model
        self.listener: Listener | None = None
        self.first = True

    def __call__(self, step: int, model, cache) -> dict:
        t0 = time.perf_counter()
        device = next(model.parameters()).device
        # Forked RNG: evaluating must not shift the training run's random stream (exact resume);
        # building the speaker encoder draws from it too (its layers initialise before loading).
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            if self.listener is None:
                self.listener = Listener(self.asr_model, threads=torch.get_num_threads())
            result = evaluate(model, self.cfg, TextProcessor(cache.text_cfg, cache.vocab), cache,
                              plan(cache, self.n), griffin_lim_vocoder(self.cfg.audio), self.listener,
                              ground_truth=self.first, log=lambda _: None)
        self.first = False
        figures = {f"eval_{k}": result.summary[k] for k in FIGURES if result.summary.get(k) is not None}
        return {**figures, "eval_seconds": time.perf_counter() - t0}
