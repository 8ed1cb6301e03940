"""What a run tells its user at the least: the live progress line, ``metrics.jsonl``, samples
and ``summary.json``. Only rank 0 writes; other ranks stay quiet.

``myxtts.observe.runlog.RunLog`` extends it with GPU sampling, TensorBoard, the report and the
verdict in words; the training code only ever talks to this interface.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from myxtts.config import Config
from myxtts.files import write_json
from myxtts.rundir import RunDir
from myxtts.train.collectives import ranks_text


class TrainLog:
    def __init__(self, out: Path, cfg: Config, is_main: bool, progress: bool):
        self.out, self.cfg, self.main = out, cfg, is_main
        self.run = RunDir(out)
        self._bar = self._jsonl = None
        self._progress = progress
        self._t0 = time.perf_counter()
        if is_main:
            out.mkdir(parents=True, exist_ok=True)

    # ----------------------------------------------------------------------------- output
    def say(self, text: str) -> None:
        if not self.main:
            return
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def _write(self, rec: dict) -> None:
        if self._jsonl is None:
            self._jsonl = open(self.run.metrics, "a")
        self._jsonl.write(json.dumps(rec) + "\n")
        self._jsonl.flush()

    def run_built(self, run) -> None:
        """The assembled run (``train.build.Run``), before its first step, for a log that
        measures it from the side (FLOPs, observe/runlog.py); nothing here."""

    def training_started(self) -> None:
        """The loop starts: ``train.time_budget_s`` counts from now."""
        self._loop_t0 = time.perf_counter()

    def _line(self, step: int, parts: list[str]) -> None:
        budget = self.cfg.train.time_budget_s
        if self._progress and self._bar is None:
            from tqdm import tqdm

            if budget:  # the budget ends the run: the bar and its ETA follow the clock
                self._bar = tqdm(total=budget, desc="train", unit="s", file=sys.stderr, dynamic_ncols=True,
                                 bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}]{postfix}")
            else:
                self._bar = tqdm(total=self.cfg.train.max_steps, initial=step, desc="train",
                                 unit="step", file=sys.stderr, dynamic_ncols=True)
        if self._bar is not None:
            if budget:
                self._bar.n = min(budget, time.perf_counter() - getattr(self, "_loop_t0", self._t0))
                parts = [f"step {step}/{self.cfg.train.max_steps}", *parts]
            else:
                self._bar.n = step
            self._bar.set_postfix_str(" | ".join(parts), refresh=True)
        else:
            self.say(f"step {step}/{self.cfg.train.max_steps} | " + " | ".join(parts))

    def extra_metrics(self) -> dict:
        """Figures a richer log samples on its own (GPU utilisation); none here."""
        return {}

    # ------------------------------------------------------------------------ the loop's calls
    def metrics(self, step: int, losses: dict, timing: dict, lr: float, recompiles: int) -> None:
        if not self.main:
            return
        tput = timing.get("throughput", {})
        rec = {"step": step, "loss": losses.get("loss"),
               **{k: v for k, v in losses.items() if k != "loss"},
               "lr": lr, "samples_per_s": tput.get("samples_per_s"),
               "frames_per_s": tput.get("frames_per_s"), "step_ms": timing.get("step_ms"),
               "input_bound_pct": timing.get("input_bound_pct"), **self.extra_metrics(),
               "recompiles_after_warmup": recompiles,
               "time_s": round(time.perf_counter() - self._t0, 3)}
        if timing.get("ranks"):  # under DDP: each rank's own figures (train/collectives.py)
            rec["ranks"] = timing["ranks"]
        self._write(rec)
        self.scalars(step, {k: v for k, v in rec.items()
                            if isinstance(v, (int, float)) and k != "step"})
        parts = [f"loss {rec['loss']:.4f}"]
        for key, spec in (("samples_per_s", "{:.1f} samples/s"), ("frames_per_s", "{:.0f} frames/s"),
                          ("step_ms", "{:.0f} ms/step"), ("input_bound_pct", "input-bound {:.1f}%"),
                          ("gpu_util_pct", "GPU {:.0f}%")):
            if rec.get(key) is not None:
                parts.append(spec.format(rec[key]))
        if any(r["step_ms"] is not None for r in rec.get("ranks", [])):  # none during warm-up
            parts.append(ranks_text(rec["ranks"]))
        self._line(step, parts)

    def compiling(self, k: int, n: int, elapsed: float) -> None:
        """Progress of the warm-up compile: ``k`` of ``n`` batch shapes done after ``elapsed``
        seconds (``k == 0``: starting). The GPU waits for the compiler meanwhile; saying so, with
        an estimate of the time left, keeps a silent GPU from reading as a hung run."""
        if k == 0:
            self.say(f"compiling the step for shape 1 of {n} (the GPU waits for the compiler meanwhile)")
            self._compiled_s = 0.0
            return
        # The last shape's time, not the mean: the first shape compiles the step and the others
        # reuse it, so the mean would overstate what is left.
        last, self._compiled_s = elapsed - getattr(self, "_compiled_s", 0.0), elapsed
        left = f", about {last * (n - k):.0f} s left" if k < n else ""
        more = f"; compiling shape {k + 1} of {n}" if k < n else ""
        self.say(f"compiled shape {k} of {n}, {elapsed:.0f} s elapsed{left}{more}")

    def scalars(self, step: int, values: dict) -> None:
        if self.main and "val_loss" in values:
            self._write({"step": step, "loss": None, **values})
            self.say(f"step {step}: validation loss {values['val_loss']:.4f}")

    def evaluation(self, step: int, figures: dict) -> None:
        """Periodic evaluation figures (``train.eval_every``): a metrics.jsonl line and scalars."""
        if not self.main:
            return
        self._write({"step": step, "loss": None, **figures})
        vocoder = figures.get("eval_vocoder")
        self.scalars(step, {k: v for k, v in figures.items() if k != "eval_vocoder"})
        wer, cer = figures.get("eval_wer"), figures.get("eval_cer")
        if wer is not None:
            took = figures.get("eval_seconds")
            how = ([f"evaluated in {took:.0f} s"] if took is not None else []) + \
                  ([f"audio through {vocoder}"] if vocoder else [])
            self.say(f"step {step}: held-out WER {100 * wer:.1f}%, CER {100 * (cer or 0):.1f}%"
                     + (f", DNSMOS {figures['eval_dnsmos_ovrl']:.2f}" if "eval_dnsmos_ovrl" in figures else "")
                     + (f" ({', '.join(how)})" if how else ""))

    def sample(self, step: int, core, cache, cfg: Config) -> dict:
        """Synthesize the fixed sentence into RUN/samples/step-N/ (wav, mel and attention)."""
        from myxtts.train.samples import write_sample

        return write_sample(self.run.samples(step), core, cache, cfg, self.out)

    def already_done(self, step: int) -> dict:
        """A finished run asked to train again: say so and change nothing."""
        self.say(f"{self.out} is already at step {step} of train.max_steps="
                 f"{self.cfg.train.max_steps}: nothing to do (raise train.max_steps to train on)")
        path = self.run.summary
        summary = json.loads(path.read_text()) if path.is_file() else {"steps": step}
        summary["already_done"] = True
        return summary

    def finish(self, summary: dict) -> None:
        if not self.main:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        write_json(self.run.summary, summary, default=str)  # whole or not at all, as every run file
        self.close()

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None

