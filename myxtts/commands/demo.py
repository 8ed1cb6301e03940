"""`myxtts demo`: the whole job on the bundled demo corpus, end to end, on any machine.

prepare → train briefly (the tiny preset on a CPU, the small preset on a GPU; both the duration
decoder on phonemes) → with ``--vocoder-minutes``, train the run's vocoder too → synthesize in a
voice cloned from a held-out clip → print where the time went.
Everything lands in one output folder.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from myxtts.commands.common import add_command, check_output
from myxtts.commands.prepare import print_report
from myxtts.config import load
from myxtts.data.prepare import DEMO_CORPUS, prepare
from myxtts.errors import UserError
from myxtts.files import write_json
from myxtts.rundir import RunDir
from myxtts.text import phonemes_missing

DEFAULT_MINUTES = 3.0
SENTENCE = "Thank you for trying this demo, the next batch is already on its way."
TIMINGS = "demo_timings.json"  # beside the run and the cache: where the demo's time went
VOCODER_MAX_STEPS = 1_000_000  # the vocoder demo ends on its time budget, not on a step count


def text_settings() -> list[str]:
    """The demo keeps the presets' model (the duration decoder on phonemes) on every device. It
    falls back to characters, saying so, where espeak-ng is missing (an install without the
    phonemes extra): the model reads them far less well, but the demo still runs."""
    missing = phonemes_missing()
    if missing:
        print(f"note: training on characters, which the model reads far less well: {missing}")
        return ["text.mode=characters"]
    return []


def step_cap(preset_steps: int, minutes: float) -> int:
    """The step cap of a demo given ``minutes``: the preset's ``train.max_steps`` serves the
    three-minute default, and a longer demo scales it, so that the time asked for, not the cap,
    ends training (on 2 CPU cores the duration decoder does the tiny preset's 2,000 in 8 minutes)."""
    return max(preset_steps, round(preset_steps * minutes / DEFAULT_MINUTES))


def run_demo(out: Path, minutes: float, steps: int | None, vocoder_minutes: float = 0.0) -> int:
    # Both checked before preparing: --steps 0 would otherwise mean "no cap" (the preset's
    # thousands of steps, with no time budget either), and --minutes 0 no time budget.
    if steps is not None and steps < 1:
        raise UserError(f"--steps must be at least 1, got {steps}")
    if not minutes > 0:
        raise UserError(f"--minutes must be positive, got {minutes:g}")
    if not vocoder_minutes >= 0:
        raise UserError(f"--vocoder-minutes must be 0 or more, got {vocoder_minutes:g}")
    check_output(out, "--out", folder=True)
    timings = {}
    preset = "small" if torch.cuda.is_available() else "tiny"
    settings = text_settings()

    t = time.perf_counter()
    cache = out / "cache"
    cfg = load(preset, settings)
    report = prepare(DEMO_CORPUS, cache, cfg, workers=os.cpu_count() or 1)
    print_report(report, cache)
    timings["prepare"] = time.perf_counter() - t

    from myxtts.observe.runlog import RunLog
    from myxtts.train.trainer import train, train_vocoder

    t = time.perf_counter()
    run = out / "run"
    overrides = [*settings, f"train.max_steps={steps or step_cap(cfg.train.max_steps, minutes)}"]
    if steps is None:
        overrides.append(f"train.time_budget_s={minutes * 60}")
    cfg = load(preset, overrides)
    print(f"\ntraining the {preset} preset for up to {minutes:g} min "
          f"({cfg.train.max_steps} steps at most) → {run}")
    summary = train(cfg, cache, run, log=RunLog)
    timings["train"] = time.perf_counter() - t

    if vocoder_minutes:
        t = time.perf_counter()
        vcfg = load(preset, [*settings, f"train.time_budget_s={vocoder_minutes * 60}",
                             f"train.max_steps={VOCODER_MAX_STEPS}"])
        print(f"\ntraining the vocoder for {vocoder_minutes:g} min → {RunDir(run).vocoder.path}")
        train_vocoder(vcfg, cache, RunDir(run).vocoder.path, log=RunLog)
        timings["vocoder"] = time.perf_counter() - t

    from myxtts.infer import Synthesizer

    t = time.perf_counter()
    held_out = (DEMO_CORPUS / "val.txt").read_text(encoding="utf-8").split()
    voice = next(i for i in held_out if i.startswith("spk5-"))
    reference = next(iter(sorted((DEMO_CORPUS / "wavs").glob(f"{voice}.*"))))
    synth = Synthesizer(run)
    wav_path = out / "demo.wav"
    result = synth.synthesize_to_file([SENTENCE], wav_path, reference=reference)[0]
    timings["synthesize"] = time.perf_counter() - t

    total = sum(timings.values())
    print("\nwhere the time went (whole demo):")
    for stage, sec in timings.items():
        print(f"  {stage:<11} {sec:7.1f} s  {100 * sec / total:5.1f}%")
    ib = summary.get("input_bound_pct")
    print(f"  training loop: input-bound {ib:.1f}% | {summary.get('steps')} steps"
          if ib is not None else f"  training loop: {summary.get('steps')} steps")
    write_json(out / TIMINGS, timings)
    print(f"\nwrote {wav_path} (reference voice: {reference.name}; audio through {synth.to_wave.name}); "
          f"training run in {run}")
    print(describe(result, synth.cfg.model.max_decoder_steps))
    return 0


def describe(result, cap: int) -> str:
    """What the demo wav holds, in figures, with a warning when it is silent or was cut."""
    from myxtts.infer import dbfs

    line = (f"  {result.seconds:.2f} s, peak {dbfs(result.peak):.1f} dBFS, "
            f"RMS {dbfs(result.rms):.1f} dBFS, "
            + ("stopped on its own" if result.stopped else
               f"cut at model.max_decoder_steps={cap}"))
    if result.silent:
        line += ("\n  WARNING: the wav is silent: the model produced no sound (train longer with "
                 "--minutes, or look at the training log)")
    if not result.stopped:
        line += ("\n  WARNING: the model did not stop on its own, so the wav is cut where the "
                 "decoder cap ends it (train longer with --minutes)")
    return line


def add_parser(sub) -> None:
    p = add_command(sub, "demo", "prepare, train and synthesize on the bundled demo corpus")
    p.add_argument("--out", default="demo_out", help="folder for the cache, run and wav")
    p.add_argument("--minutes", type=float, default=DEFAULT_MINUTES, help="training time budget")
    p.add_argument("--steps", type=int, default=None, help="train exactly this many steps instead")
    p.add_argument("--vocoder-minutes", type=float, default=0.0,
                   help="also train the run's vocoder (RUN/vocoder) for this long; 0: Griffin-Lim")
    p.set_defaults(func=lambda a: run_demo(Path(a.out), a.minutes, a.steps, a.vocoder_minutes))
