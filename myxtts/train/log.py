"""What a run tells its user: the live progress line, metrics.jsonl, TensorBoard, samples, and
the closing "where did the time go" summary. Only rank 0 writes; other ranks stay quiet."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from myxtts.config import Config
from myxtts.observe.diagnose import settings_from_config
from myxtts.observe.report import write_report


class RunLog:
    def __init__(self, out: Path, cfg: Config, is_main: bool, progress: bool):
        self.out, self.cfg, self.main = out, cfg, is_main
        self.best = False
        self._bar = self._tb = self._gpu = None
        self._t0 = time.perf_counter()
        if not is_main:
            return
        out.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(out / "metrics.jsonl", "a")
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(out / "tensorboard"))
        except ImportError:
            self.say("TensorBoard is not installed; metrics go to metrics.jsonl only "
                     "(pip install tensorboard)")
        if torch.cuda.is_available():
            from myxtts.observe.gpu import GpuSampler, GpuUnavailable

            try:
                self._gpu = GpuSampler(interval=1.0).start()
            except GpuUnavailable as e:
                self.say(f"GPU utilisation not sampled: {e}")
        if progress:
            from tqdm import tqdm

            self._bar = tqdm(total=cfg.train.max_steps, desc="train", unit="step", file=sys.stderr,
                             dynamic_ncols=True)

    def say(self, text: str) -> None:
        if not self.main:
            return
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def _gpu_util(self) -> float | None:
        if self._gpu is None:
            return None
        latest = self._gpu.latest()
        return latest[0].util if latest else None

    def metrics(self, step: int, losses: dict, timing: dict, lr: float, recompiles: int) -> None:
        if not self.main:
            return
        tput = timing.get("throughput", {})
        rec = {"step": step, "loss": losses.get("loss"), **{k: v for k, v in losses.items() if k != "loss"},
               "lr": lr, "samples_per_s": tput.get("samples_per_s"), "frames_per_s": tput.get("frames_per_s"),
               "step_ms": timing.get("step_ms"), "input_bound_pct": timing.get("input_bound_pct"),
               "gpu_util_pct": self._gpu_util(), "recompiles_after_warmup": recompiles,
               "time_s": round(time.perf_counter() - self._t0, 3)}
        self._jsonl.write(json.dumps(rec) + "\n")
        self._jsonl.flush()
        self.scalars(step, {k: v for k, v in rec.items() if isinstance(v, (int, float)) and k != "step"})
        parts = [f"loss {rec['loss']:.4f}"]
        for key, fmt in (("samples_per_s", "{:.1f} samples/s"), ("frames_per_s", "{:.0f} frames/s"),
                         ("step_ms", "{:.0f} ms/step"), ("input_bound_pct", "input-bound {:.1f}%"),
                         ("gpu_util_pct", "GPU {:.0f}%")):
            if rec.get(key) is not None:
                parts.append(fmt.format(rec[key]))
        if self._bar is not None:
            self._bar.n = step
            self._bar.set_postfix_str(" | ".join(parts), refresh=True)
        else:
            self.say(f"step {step}/{self.cfg.train.max_steps} | " + " | ".join(parts))

    def scalars(self, step: int, values: dict) -> None:
        if self.main and self._tb is not None:
            for k, v in values.items():
                if v is not None:
                    self._tb.add_scalar(k, v, step)
        if self.main and "val_loss" in values:
            self._jsonl.write(json.dumps({"step": step, "loss": None, **values}) + "\n")
            self._jsonl.flush()
            self.say(f"step {step}: validation loss {values['val_loss']:.4f}")

    def sample(self, step: int, core, cache, cfg: Config) -> None:
        """Synthesize the fixed sentence into RUN/samples/step-N/ (wav, mel and attention)."""
        from myxtts.train.samples import write_sample

        paths = write_sample(self.out / "samples" / f"step-{step:08d}", core, cache, cfg)
        if self._tb is not None and "wav" in paths:
            import soundfile as sf

            wav, sr = sf.read(paths["wav"], dtype="float32")
            self._tb.add_audio("sample", torch.from_numpy(wav)[None], step, sample_rate=sr)

    def finish(self, summary: dict) -> None:
        if not self.main:
            return
        if self._gpu is not None:
            self._gpu.stop()
            summary["gpu"] = self._gpu.summary()
        if self._bar is not None:
            self._bar.close()
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        write_report(self.out / "report.html", {
            **settings_from_config(self.cfg), **summary, "title": f"MyXTTS run {self.out.name}",
            "recompiles": summary.get("recompiles_after_warmup"), "n_shapes": summary.get("shapes_seen")})
        self.say(where_the_time_went(summary))
        if self._tb is not None:
            self._tb.close()
        self._jsonl.close()


def _f(v, fmt="{:.1f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def where_the_time_went(s: dict) -> str:
    """The closing summary: loader vs compute vs other, throughput, recompiles."""
    t = s.get("throughput", {})
    lines = [f"where the time went ({s.get('steps', 0)} steps, {s.get('wall_seconds', 0):.1f} s, "
             f"timed with {s.get('timing', '?')}, after warm-up):",
             f"  waiting for data {_f(s.get('data_wait_pct'))}% | host-to-device {_f(s.get('h2d_pct'))}% "
             f"| compute {_f(s.get('compute_pct'))}% | other {_f(s.get('other_pct'))}%",
             f"  input-bound {_f(s.get('input_bound_pct'))}% | step {_f(s.get('step_ms'), '{:.1f}')} ms "
             f"(CoV {_f(s.get('step_cov_pct'))}%) | {_f(t.get('frames_per_s'), '{:.0f}')} mel frames/s, "
             f"{_f(t.get('audio_s_per_s'), '{:.1f}')} s of audio/s",
             f"  {s.get('shapes_seen', 0)} batch shapes, padding {_f(s.get('padding_pct'))}%, "
             f"recompiles after warm-up: {s.get('recompiles_after_warmup', 0)}"]
    gpu = s.get("gpu")
    if gpu:
        lines.append(f"  GPU utilisation: {json.dumps(gpu, default=str)[:300]}")
    ib = s.get("input_bound_pct")
    if ib is not None and ib >= 5:
        lines.append(f"  the loop waited on data {ib:.0f}% of the time: raise data.num_workers "
                     "(and check `myxtts bench loader`)")
    return "\n".join(lines)
