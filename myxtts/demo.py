"""The whole job on the bundled demo corpus, end to end, on any machine (``myxtts demo``).

prepare → train briefly (the tiny preset on a CPU, the small preset on a GPU; both the duration
decoder on phonemes) → with ``vocoder_minutes``, train the run's vocoder too → synthesize in a
voice cloned from a held-out clip, timing each stage. Everything lands in one output folder:
the cache, the run, the wav and the timings.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from myxtts.config import load
from myxtts.data.prepare import DEMO_CORPUS, prepare
from myxtts.files import write_json
from myxtts.rundir import RunDir
from myxtts.text import phonemes_missing

if TYPE_CHECKING:
    from myxtts.infer import Synthesis

DEFAULT_MINUTES = 3.0
SENTENCE = "Thank you for trying this demo, the next batch is already on its way."
TIMINGS = "demo_timings.json"  # beside the run and the cache: where the demo's time went
VOCODER_MAX_STEPS = 1_000_000  # the vocoder demo ends on its time budget, not on a step count
VOICE_SPEAKER = "spk5-"  # the held-out clips of this speaker give the cloned voice


def text_settings(say=print) -> list[str]:
    """The demo keeps the presets' model (the duration decoder on phonemes) on every device. It
    falls back to characters, saying so, where espeak-ng is missing (an install without the
    phonemes extra): the model reads them far less well, but the demo still runs."""
    missing = phonemes_missing()
    if missing:
        say(f"note: training on characters, which the model reads far less well: {missing}")
        return ["text.mode=characters"]
    return []


def step_cap(preset_steps: int, minutes: float) -> int:
    """The step cap of a demo given ``minutes``: the preset's ``train.max_steps`` serves the
    three-minute default, and a longer demo scales it, so that the time asked for, not the cap,
    ends training (on 2 CPU cores the duration decoder does the tiny preset's 2,000 in 8 minutes)."""
    return max(preset_steps, round(preset_steps * minutes / DEFAULT_MINUTES))


@dataclass
class Demo:
    """What a demo made, and where its time went."""

    out: Path
    timings: dict  # stage → seconds, in the order the stages ran
    training: dict  # the training run's summary
    wav: Path
    reference: Path  # the held-out clip whose voice the wav speaks in
    spoken: Synthesis  # what the wav holds
    vocoder: str  # what turned its mels into audio
    decoder_cap: int  # model.max_decoder_steps: where the decoder is cut

    @property
    def run(self) -> Path:
        return self.out / "run"


def run_demo(out: Path, minutes: float, steps: int | None = None, vocoder_minutes: float = 0.0,
             say=print, prepared=lambda report, cache: None) -> Demo:
    """Every stage of the demo into ``out``: training for ``minutes`` (or exactly ``steps``
    steps), the vocoder for ``vocoder_minutes`` (0: none, Griffin-Lim). ``say`` gets the
    progress lines, ``prepared(report, cache)`` the cache's report as soon as it is written."""
    timings: dict[str, float] = {}
    preset = "small" if torch.cuda.is_available() else "tiny"
    settings = text_settings(say)
    cache, run = out / "cache", out / "run"
    with _timed(timings, "prepare"):
        cfg = load(preset, settings)
        prepared(prepare(DEMO_CORPUS, cache, cfg, workers=os.cpu_count() or 1), cache)

    from myxtts.observe.runlog import RunLog
    from myxtts.train.trainer import train, train_vocoder

    with _timed(timings, "train"):
        overrides = [*settings, f"train.max_steps={steps or step_cap(cfg.train.max_steps, minutes)}"]
        if steps is None:
            overrides.append(f"train.time_budget_s={minutes * 60}")
        cfg = load(preset, overrides)
        say(f"\ntraining the {preset} preset for up to {minutes:g} min "
            f"({cfg.train.max_steps} steps at most) → {run}")
        training = train(cfg, cache, run, log=RunLog)
    if vocoder_minutes:
        with _timed(timings, "vocoder"):
            vcfg = load(preset, [*settings, f"train.time_budget_s={vocoder_minutes * 60}",
                                 f"train.max_steps={VOCODER_MAX_STEPS}"])
            say(f"\ntraining the vocoder for {vocoder_minutes:g} min → {RunDir(run).vocoder.path}")
            train_vocoder(vcfg, cache, RunDir(run).vocoder.path, log=RunLog)
    with _timed(timings, "synthesize"):
        wav, reference, synth, spoken = _speak(out, run)
    write_json(out / TIMINGS, timings)
    return Demo(out=out, timings=timings, training=training, wav=wav, reference=reference, spoken=spoken,
                vocoder=synth.to_wave.name, decoder_cap=synth.cfg.model.max_decoder_steps)


def _speak(out: Path, run: Path):
    """The demo sentence in the voice of a held-out clip, through the run → (out/demo.wav, the
    clip, the Synthesizer, the wav's Synthesis)."""
    from myxtts.infer import Synthesizer

    held_out = (DEMO_CORPUS / "val.txt").read_text(encoding="utf-8").split()
    voice = next(i for i in held_out if i.startswith(VOICE_SPEAKER))
    reference = next(iter(sorted((DEMO_CORPUS / "wavs").glob(f"{voice}.*"))))
    synth = Synthesizer(run)
    wav = out / "demo.wav"
    return wav, reference, synth, synth.synthesize_to_file([SENTENCE], wav, reference=reference)[0]


@contextlib.contextmanager
def _timed(timings: dict, stage: str):
    t = time.perf_counter()
    yield
    timings[stage] = time.perf_counter() - t
