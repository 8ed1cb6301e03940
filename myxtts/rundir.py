"""A training run's folder: where each thing a run keeps lives, and which weights speak for it.

    RUN/config.yaml                       the settings as asked (train/trainer.py)
    RUN/plan.json                         what they resolved to (train/plan.py)
    RUN/data.json                         the cache it trains on, recorded when training starts
    RUN/checkpoints/step-00001000/        weights, training state, resume plan (train/checkpoint.py):
        model.safetensors, state.pt, resume.json
    RUN/best/model.safetensors            the lowest validation loss so far
    RUN/metrics.jsonl                     one line per logged step, eval_* figures included
    RUN/summary.json                      what the run measured, written when it ends
    RUN/report.html, RUN/tensorboard/     the same for a reader (written by observe/runlog.py)
    RUN/samples/step-00001000/            the fixed sentence spoken at that step (train/samples.py):
        sample.wav, vocoder.txt (what made its sound), mel.png, attention.png
    RUN/compiled.bin                      the kernels it compiled, for a resume on a bare machine
    RUN/nccl-trace/rank0, ...             torch's NCCL flight recorder, dumped on a collective's timeout
    RUN/compiling/                        the compiler process beside the run (train/compile_beside.py):
        config.yaml, plan.json (what it compiles), result.json (what it did), compiler.log
    RUN/mels_from.safetensors             a vocoder run's copy of the acoustic model it reads the mels of
    RUN/vocoder/                          the run's own vocoder: a run of its own, this layout again

A folder is a run when it holds ``checkpoints/`` (made when training starts). Everything that
reads or writes a run finds its files through :class:`RunDir`, writes each whole
(:mod:`myxtts.files`; the metrics and the logs are appended to), and every command that speaks a
run speaks the weights :meth:`RunDir.choose_weights` picks.
"""
from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

from myxtts.errors import UserError
from myxtts.files import Folder, below, write_json

MODEL_FILE = "model.safetensors"
_STEP_DIR = re.compile(r"^step-(\d+)$")


def step_name(step: int) -> str:
    return f"step-{step:08d}"


_in_run = partial(below, "RUN")  # a path of the layout, below the folder


class RunDir(Folder):
    CONFIG = "config.yaml"
    PLAN = "plan.json"
    CHECKPOINTS = "checkpoints"
    BEST = "best"
    METRICS = "metrics.jsonl"
    SUMMARY = "summary.json"
    DATA = "data.json"
    SAMPLES = "samples"
    VOCODER = "vocoder"
    COMPILED = "compiled.bin"
    REPORT = "report.html"
    NCCL_TRACE = "nccl-trace"
    TENSORBOARD = "tensorboard"
    COMPILING = "compiling"
    MELS_FROM = "mels_from.safetensors"
    MODEL = MODEL_FILE
    STATE = "state.pt"  # in a checkpoint: the training state
    RESUME = "resume.json"  # in a checkpoint: the plan a resume from it continues
    SAMPLE_WAV = "sample.wav"
    SAMPLE_VOCODER = "vocoder.txt"
    SAMPLE_MEL = "mel.png"
    SAMPLE_ATTENTION = "attention.png"
    COMPILE_RESULT = "result.json"  # in compiling/
    COMPILE_LOG = "compiler.log"  # in compiling/

    config = _in_run(CONFIG)
    checkpoints = _in_run(CHECKPOINTS)
    best = _in_run(BEST, MODEL_FILE)
    metrics = _in_run(METRICS)
    summary = _in_run(SUMMARY)
    compiled = _in_run(COMPILED)
    report = _in_run(REPORT)
    # the prefix torch appends each rank's number to (TORCH_NCCL_DEBUG_INFO_TEMP_FILE)
    nccl_trace = _in_run(NCCL_TRACE, "rank")
    tensorboard = _in_run(TENSORBOARD)
    all_samples = _in_run(SAMPLES)
    compiling = _in_run(COMPILING)
    mels_from = _in_run(MELS_FROM)

    @classmethod
    def of(cls, path) -> RunDir | None:
        """The run a model file or folder belongs to: the nearest folder, itself included, that
        holds ``checkpoints/`` (``RUN``, ``RUN/checkpoints/step-N/``, ``RUN/best/model.safetensors``,
        ...); None for a file on its own."""
        p = Path(path).resolve()
        for folder in [p, *p.parents][:4]:
            if (folder / cls.CHECKPOINTS).is_dir():
                return cls(folder)
        return None

    # ------------------------------------------------------------------------ the layout
    def step_dir(self, step: int) -> Path:
        return self.checkpoints / step_name(step)

    def step_weights(self, step: int) -> Path:
        return self.step_dir(step) / MODEL_FILE

    def samples(self, step: int) -> Path:
        return self.path / self.SAMPLES / step_name(step)

    @property
    def vocoder(self) -> RunDir:
        return RunDir(self.path / self.VOCODER)

    def kept_steps(self) -> list[int]:
        """Steps whose weights are kept, oldest first."""
        if not self.checkpoints.is_dir():
            return []
        found = (_STEP_DIR.match(d.name) for d in self.checkpoints.iterdir())
        return sorted(int(m.group(1)) for m in found if m and self.step_weights(int(m.group(1))).is_file())

    def has_weights(self) -> bool:
        return bool(self.kept_steps()) or (self.path / MODEL_FILE).is_file()

    # ------------------------------------------------------------------------ the cache
    def record_cache(self, cache) -> None:
        """Training starts on ``cache``: said once, so eval and serve find it without guessing."""
        write_json(self.path / self.DATA, {"cache": str(Path(cache).resolve())})

    def cache(self) -> Path | None:
        """The cache the run trained on, as recorded when it started; None where it is not
        recorded (a run from before the record, or weights copied by hand)."""
        try:
            return Path(json.loads((self.path / self.DATA).read_text(encoding="utf-8"))["cache"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # ------------------------------------------------------------------------ the metrics
    def read_metrics(self) -> list[dict]:
        """``metrics.jsonl`` (train/log.py writes it), one dict a line, in the order written;
        a line cut by a crash is skipped, and a run without the file has none."""
        try:
            lines = self.metrics.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # the last line, cut by a crash
                continue
            if isinstance(rec, dict) and isinstance(rec.get("step"), int):
                out.append(rec)
        return out

    # ------------------------------------------------------------------------ the weights
    def newest_weights(self) -> Path:
        steps = self.kept_steps()
        if steps:
            return self.step_weights(steps[-1])
        if (self.path / MODEL_FILE).is_file():
            return self.path / MODEL_FILE
        raise UserError(f"no checkpoint in {self.path}: expected checkpoints/step-*/{MODEL_FILE} "
                        f"or {MODEL_FILE}")

    def evaluated(self) -> dict[int, tuple[float, float]]:
        """Step → (held-out WER, speaker cosine) of the periodic evaluation, for the steps whose
        weights are still kept; a later line for a step (a resumed run) wins."""
        out = {}
        for rec in self.read_metrics():
            wer = rec.get("eval_wer")
            if isinstance(wer, (int, float)) and self.step_weights(int(rec["step"])).is_file():
                out[int(rec["step"])] = (float(wer), float(rec.get("eval_speaker_cosine") or 0.0))
        return out

    def choose_weights(self, step: int | None = None) -> tuple[Path, str]:
        """The weights the run is spoken with, and why those: ``step`` when given; else, where
        the periodic evaluation (``train.eval_every``) scored kept checkpoints, the one with the
        lowest held-out WER (the higher speaker similarity breaking ties), as that is what a
        listener hears; else ``RUN/best`` (the lowest validation loss); else the newest."""
        if step is not None:
            if not self.step_weights(step).is_file():
                raise UserError(f"--step {step}: {self.path} keeps no weights of that step (kept: "
                                f"{', '.join(map(str, self.kept_steps())) or 'none'})")
            return self.step_weights(step), f"step {step}, as asked"
        scored = self.evaluated()
        if scored:
            best = min(scored, key=lambda s: (scored[s][0], -scored[s][1], -s))
            wer, cos = scored[best]
            return self.step_weights(best), (f"step {best}: the lowest held-out WER of the periodic evaluation "
                                             f"({100 * wer:.1f}%, speaker cosine {cos:.3f}) among "
                                             f"{len(scored)} scored checkpoint(s)")
        if self.best.is_file():
            return self.best, "the lowest validation loss (RUN/best; no periodic evaluation scored a kept checkpoint)"
        return self.newest_weights(), "the newest checkpoint (the run has neither periodic evaluation nor best weights)"


def resolve_checkpoint(run_or_file) -> Path:
    """A ``.safetensors`` file, or a folder: its newest ``checkpoints/step-N/model.safetensors``,
    else its ``model.safetensors``."""
    p = Path(run_or_file)
    if p.is_file():
        return p
    if not p.exists():
        raise UserError(f"checkpoint not found: {p}")
    return RunDir(p).newest_weights()


def choose_weights(run_or_file, step: int | None = None) -> tuple[Path, str]:
    """:meth:`RunDir.choose_weights` of a run folder; a model file is itself, and a checkpoint
    folder (or weights outside a run) its newest weights."""
    p = Path(run_or_file)
    if p.is_file():
        if step is not None:
            raise UserError(f"--step {step}: {p} is a model file, not a run")
        return p, "the file given"
    run = RunDir.of(p) if p.exists() else None
    if run is None or run.path != p.resolve():  # a checkpoint folder, or weights outside a run
        if step is not None:
            raise UserError(f"--step {step}: {p} is not a run folder (it has no checkpoints/)")
        weights = resolve_checkpoint(p)
        return weights, "the folder given" if weights.parent == p else "the newest checkpoint"
    return run.choose_weights(step)


def default_cache(checkpoint) -> Path:
    """The cache the run ``checkpoint`` belongs to trained on, as it recorded; a
    :class:`UserError` where it recorded none."""
    run = RunDir.of(checkpoint) if Path(checkpoint).exists() else None
    cache = run.cache() if run is not None else None
    if cache is None or not cache.is_dir():
        raise UserError("--data CACHE is needed: the run does not record the cache it was trained on "
                        "(written by `myxtts prepare`)" if cache is None else
                        f"--data CACHE is needed: the cache the run was trained on, {cache}, is gone")
    return cache
