"""The training log the command line uses: ``TrainLog`` plus GPU utilisation sampled beside the
run, TensorBoard, ``report.html`` and the closing "where the time went" summary in words."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from myxtts.config import Config
from myxtts.observe.diagnose import INPUT_BOUND_MODERATE_PCT, settings_from_config
from myxtts.observe.format import fmt
from myxtts.observe.report import write_report
from myxtts.train.log import TrainLog


class RunLog(TrainLog):
    def __init__(self, out: Path, cfg: Config, is_main: bool, progress: bool):
        super().__init__(out, cfg, is_main, progress)
        self._tb = self._gpu = None
        self._tb_tried = False
        if is_main and torch.cuda.is_available():
            from myxtts.observe.gpu import GpuSampler, GpuUnavailable

            try:
                self._gpu = GpuSampler(interval=1.0).start()
            except GpuUnavailable as e:
                self.say(f"GPU utilisation not sampled: {e}")

    def _board(self):
        """The TensorBoard writer, opened on first use (a finished run re-run writes nothing)."""
        if not self._tb_tried:
            self._tb_tried = True
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.out / "tensorboard"))
            except ImportError:
                self.say("TensorBoard is not installed; metrics go to metrics.jsonl only "
                         "(pip install tensorboard)")
        return self._tb

    def extra_metrics(self) -> dict:
        latest = self._gpu.latest() if self._gpu is not None else None
        return {"gpu_util_pct": latest[0].util if latest else None}

    def scalars(self, step: int, values: dict) -> None:
        super().scalars(step, values)
        tb = self._board() if self.main else None
        if tb is not None:
            for k, v in values.items():
                if v is not None:
                    tb.add_scalar(k, v, step)

    def sample(self, step: int, core, cache, cfg: Config) -> dict:
        paths = super().sample(step, core, cache, cfg)
        tb = self._board()
        if tb is not None and "wav" in paths:
            import soundfile as sf

            wav, sr = sf.read(paths["wav"], dtype="float32")
            tb.add_audio("sample", torch.from_numpy(wav)[None], step, sample_rate=sr)
        return paths

    def already_done(self, step: int) -> dict:
        self._stop_gpu()
        return super().already_done(step)

    def _stop_gpu(self):
        if self._gpu is None:
            return None
        self._gpu.stop()
        gpu, self._gpu = self._gpu.summary(), None
        return gpu

    def finish(self, summary: dict) -> None:
        if not self.main:
            return
        gpu = self._stop_gpu()
        if gpu is not None:
            summary["gpu"] = gpu
        super().finish(summary)
        write_report(self.out / "report.html", {
            **settings_from_config(self.cfg), **summary, "title": f"MyXTTS run {self.out.name}",
            "recompiles": summary.get("recompiles_after_warmup"),
            "n_shapes": summary.get("shapes_seen")})
        self.say(where_the_time_went(summary))
        if self._tb is not None:
            self._tb.close()


def where_the_time_went(s: dict) -> str:
    """The closing summary: loader vs compute vs other, throughput, recompiles."""
    t = s.get("throughput", {})
    lines = [f"where the time went ({s.get('steps', 0)} steps, {s.get('wall_seconds', 0):.1f} s, "
             f"timed with {s.get('timing', '?')}, after warm-up):",
             f"  waiting for data {fmt(s.get('data_wait_pct'))}% | host-to-device "
             f"{fmt(s.get('h2d_pct'))}% | compute {fmt(s.get('compute_pct'))}% | other "
             f"{fmt(s.get('other_pct'))}%",
             f"  input-bound {fmt(s.get('input_bound_pct'))}% | step {fmt(s.get('step_ms'))} ms "
             f"(CoV {fmt(s.get('step_cov_pct'))}%) | {fmt(t.get('frames_per_s'), '{:.0f}')} mel "
             f"frames/s, {fmt(t.get('audio_s_per_s'))} s of audio/s",
             f"  {s.get('shapes_seen', 0)} batch shapes, padding {fmt(s.get('padding_pct'))}%, "
             f"recompiles after warm-up: {s.get('recompiles_after_warmup', 0)}"]
    gpu = s.get("gpu")
    if gpu:
        lines.append(f"  GPU utilisation: {json.dumps(gpu, default=str)[:300]}")
    ib = s.get("input_bound_pct")
    if ib is not None and ib >= INPUT_BOUND_MODERATE_PCT:
        lines.append(f"  the loop waited on data {ib:.0f}% of the time: raise data.num_workers "
                     "(and check `myxtts bench loader`)")
    return "\n".join(lines)
