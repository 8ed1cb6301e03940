"""Learning on real speech: the default model, trained on two LJSpeech clips alone, says them back.

The learning guard (``test_learning.py``) watches a validation loss on the synthetic demo corpus,
which a model can lower while saying less (``benchmarks/results/2026-11-28-dropout-cpu.md``).
Here a listener judges: ``tiny`` as a user trains it (``myxtts prepare``, ``myxtts train``), 250
steps on the first two LJSpeech test clips (31 words), then each clip synthesised with the
model's own durations through Griffin-Lim, as ``myxtts synthesize`` speaks, and heard by Whisper.
It is the short form of ``benchmarks/memorise_clips.py`` (8 clips, 20 minutes).

Dropout is off, as in the learning guard: torch draws CPU dropout masks another way on Intel
CPUs than on others, and with it on, where a run stands at 250 steps swings with the seed
(6.5-58.1 % WER over six). Two runs of other seeds are scored together, which narrows it again.
The bound has a measured margin on both sides (``benchmarks/results/2026-11-29-memorise-guard-cpu.md``:
the default at 10 seeds, 45 pairs): the default's worst pair said 20 words of 62 wrong; the
decoder of format-4 model files (``local``) at least 35 (5 seeds), and that of every file before
them (``absolute``, which said the 8 clips at 54 % WER) at least 51 (3 seeds). That margin was
measured with the frame decoder convolving over 3 frames; ``tiny`` now convolves over 5, which
said the 8 clips as well or better (``2026-11-29-frame-kernel-cpu.md``), and passes here.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.memorise_clips import corpus, speak_clips
from benchmarks.teacher_forced_asr import teacher_forced

ROOT = Path(__file__).resolve().parents[2]
STEPS = 250
# The schedule every time-budgeted run has (peak rate, its last fifth annealed), as in the record;
# the budget itself is never reached.
SETTINGS = [f"train.max_steps={STEPS}", "train.time_budget_s=3600", "data.num_workers=0",
            "model.dropout=0", "model.prenet_dropout=0", "model.ref_dropout=0"]
SEEDS = (1234, 2)  # two runs side by side, scored together: one run's WER swings with its seed
BOUND = 0.44  # WER of the two together; between the record's extremes (the module docstring)


def myxtts(log: Path, *args: str) -> subprocess.Popen:
    """A ``myxtts`` command as a user runs it, its output in ``log``, not waited for."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # as the record ran
    with log.open("w") as f:
        return subprocess.Popen([sys.executable, "-m", "myxtts", *args], env=env, cwd=ROOT,
                                stdout=f, stderr=subprocess.STDOUT)


def finished(p: subprocess.Popen, log: Path) -> None:
    assert p.wait() == 0, log.read_text()[-3000:]


def heard(run: Path, cache_dir: Path, asr) -> tuple[list[str], list[str]]:
    """The training clips' texts, and what ``asr`` hears of them said by ``run`` (its own durations)."""
    from myxtts.data.cache import Cache
    from myxtts.infer import Synthesizer

    synth = Synthesizer(run, log=lambda *_: None)
    sentences, spoken = speak_clips(synth, Cache(cache_dir))
    return [s.text for s in sentences], [asr.transcribe(sp.wav, synth.cfg.audio.sample_rate) for sp in spoken]


def loss_terms(run: Path, cache_dir: Path) -> dict:
    """Every term of ``run``'s training loss on its first clip, teacher-forced in eval mode: what
    the 8-clip record's decomposition reads (``memorise_clips.py``)."""
    from myxtts.data.cache import Cache
    from myxtts.evaluate.evaluation import plan
    from myxtts.infer import Synthesizer

    synth, cache = Synthesizer(run, log=lambda *_: None), Cache(cache_dir)
    sentence = plan(cache, split="train")[0]
    batch, out = teacher_forced(synth.model, synth.cfg, synth.text, cache, sentence)
    return {k: float(v) for k, v in synth.model.losses(batch, out).items()}


def test_the_default_model_says_two_real_clips_it_trained_on(tmp_path):
    from myxtts.evaluate import metrics
    from myxtts.evaluate.asr import Recognizer

    cache, log = tmp_path / "cache", tmp_path / "prepare.log"
    finished(myxtts(log, "prepare", str(corpus(tmp_path, 2)), "--out", str(cache), "--workers", "1"), log)
    runs = {seed: tmp_path / f"run-{seed}" for seed in SEEDS}
    started = {seed: myxtts(run.with_suffix(".log"), "train", "--config", "tiny", "--data", str(cache),
                            "--out", str(run), "--no-progress", *SETTINGS, f"train.seed={seed}")
               for seed, run in runs.items()}
    for seed, p in started.items():
        finished(p, runs[seed].with_suffix(".log"))
    asr = Recognizer(threads=1)
    refs, hyps = [], []
    for run in runs.values():
        texts, said = heard(run, cache, asr)
        refs += texts
        hyps += said
    wer = metrics.wer(refs, hyps)
    assert wer <= BOUND, f"two runs said their two training clips at {wer:.1%} WER: {hyps}"
    # the record's decomposition runs on the trained model (a one-clip batch: the speaker term is 0)
    terms = loss_terms(runs[SEEDS[0]], cache)
    assert {"mel_l1", "duration", "speaker"} <= terms.keys() and all(map(math.isfinite, terms.values())), terms
