"""The training log the command line uses: ``TrainLog`` plus GPU utilisation sampled beside the
run (with the warm-up compile marked apart), TensorBoard, ``report.html`` and the closing "where
the time went" summary in words, ending in one verdict line. The full figures go to
``summary.json`` and the report, never as raw JSON to the console."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from myxtts.config import Config
from myxtts.observe.diagnose import diagnose
from myxtts.observe.findings import Diagnosis
from myxtts.observe.flops import meta_step_flops, summary_mfu
from myxtts.observe.format import fmt
from myxtts.observe.gpu import start_sampler, stop_sampler
from myxtts.observe.gpu_summary import GpuSummary
from myxtts.observe.measured import Measured, Settings
from myxtts.observe.report import write_report
from myxtts.rundir import RunDir
from myxtts.train.collectives import ranks_text
from myxtts.train.log import TrainLog

SAMPLE_INTERVAL_S = 1.0
# Samples this long after the compile (or the run's start) are warm-up, not steady training: the
# first step of each shape, its CUDA graph recording. On an H100 (2026-11-27) they read 25-91 %
# for 9 s after compiling, against 93-100 % in steady training.
WARMUP_EDGE_S = 10.0


class RunLog(TrainLog):
    def __init__(self, out: Path, cfg: Config, is_main: bool, progress: bool):
        super().__init__(out, cfg, is_main, progress)
        self._tb = self._gpu = None
        self._tb_tried = False
        self._compile: list[float] = []  # [start, end] of the warm-up compile, on the sampler's clock
        self._last_step_t: float | None = None  # the latest logged step, on the sampler's clock
        self._no_gpu = "no CUDA device" if not torch.cuda.is_available() else "not rank 0"
        self._flops = None  # shapes -> {shape: FLOPs} of the run's step, once it is built
        if is_main and torch.cuda.is_available():
            self._gpu, self._no_gpu = start_sampler(SAMPLE_INTERVAL_S)
            if self._gpu is None:
                self.say(f"GPU utilisation not sampled: {self._no_gpu}")

    def _board(self):
        """The TensorBoard writer, opened on first use (a finished run re-run writes nothing)."""
        if not self._tb_tried:
            self._tb_tried = True
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.run.tensorboard))
            except ImportError:
                self.say(f"TensorBoard is not installed; metrics go to {RunDir.METRICS} only "
                         "(pip install tensorboard)")
        return self._tb

    def run_built(self, run) -> None:
        if run.stage == "acoustic":  # the vocoder's step is not the model's
            self._flops = lambda shapes: meta_step_flops(run.cfg, run.cache, shapes)[0]

    def _mfu(self, summary: dict) -> dict:
        """MFU per batch shape and over the run, from the step's FLOPs counted on meta tensors
        for each shape the run timed (observe/flops.py)."""
        return summary_mfu(summary, self._flops) if self._flops is not None else {}

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

    def metrics(self, step: int, losses: dict, timing: dict, lr: float, recompiles: int) -> None:
        if self._gpu is not None:
            self._last_step_t = self._gpu.now()
        super().metrics(step, losses, timing, lr, recompiles)

    def _steady(self) -> tuple[float, float] | None:
        """Steady training on the sampler's clock: from WARMUP_EDGE_S after the compile (or
        the start) to the latest logged step; what follows it is the closing checkpoint."""
        if self._last_step_t is None:
            return None
        return (self._compile[1] if self._compile else 0.0) + WARMUP_EDGE_S, self._last_step_t

    def compiling(self, k: int, n: int, elapsed: float) -> None:
        """Marks the compile window on the sampler's clock, so its samples count as compiling."""
        if self._gpu is not None:
            if k == 0:
                self._compile = [self._gpu.now()] * 2
            elif self._compile:
                self._compile[1] = self._gpu.now()
        super().compiling(k, n, elapsed)

    def already_done(self, step: int) -> dict:
        stop_sampler(self._gpu)
        self._gpu = None
        return super().already_done(step)

    def finish(self, summary: dict) -> None:
        if not self.main:
            return
        samples = self._gpu.samples() if self._gpu is not None else []
        gpu = stop_sampler(self._gpu, tuple(self._compile) if self._compile else None, self._steady())
        self._gpu = None
        if gpu is not None:
            summary["gpu"] = gpu.as_dict()
        summary.update(self._mfu(summary))
        m, diag = run_diagnosis(summary, self.cfg, self._no_gpu)
        summary["diagnosis"] = diag.as_dict()
        super().finish(summary)
        write_report(self.run.report, m, diag, title=f"MyXTTS report: {self.out}",
                     gpu_samples=samples, metrics=self.run.read_metrics(), samples=self.run.all_samples,
                     mfu_basis=summary.get("mfu_basis"), achieved_tflops=summary.get("achieved_tflops"))
        self.say(where_the_time_went(summary, m, diag, self.out))
        if self._tb is not None:
            self._tb.close()


def run_diagnosis(summary: dict, cfg: Config, no_gpu: str = "") -> tuple[Measured, Diagnosis]:
    """The figures of a run's summary as diagnosis inputs, and the diagnosis. ``cfg``: the run's
    own config (its folder's config.yaml). A summary written before runs stated their MFU gets
    it here, from ``cfg``'s FLOPs for each shape it timed, added to ``summary`` as the trainer's
    log adds it. Only a summary that names its stage: earlier ones named their shapes B x Tm x mels."""
    if "mfu_basis" not in summary and summary.get("stage") == "acoustic":
        summary.update(summary_mfu(summary, lambda shapes: meta_step_flops(cfg, None, shapes)[0]))
    gpu = GpuSummary.from_dict(summary.get("gpu"))
    name = gpu.gpus[0].name if gpu and gpu.gpus else ""
    # the cores of the machine that ran it (summaries before they were written: this machine's)
    cpus = (summary.get("software") or {}).get("cpu_count")
    settings = Settings.from_config(cfg, device=summary.get("device", ""), device_name=name, cpu_count=cpus,
                                    compile=summary.get("compile"), world_size=summary.get("world_size", 1))
    if summary.get("frame_budget"):  # what data.frame_budget=auto chose: the budget the run trained with
        settings = dataclasses.replace(settings, frame_budget=summary["frame_budget"])
    m = Measured.from_summary(summary, settings)
    if summary.get("gpu") is None and no_gpu:
        m.not_measured["gpu"] = f"GPU utilisation not sampled: {no_gpu}"
    return m, diagnose(m)


def mfu_text(s: dict, m: Measured) -> str:
    """MFU in words: over the run, its range over the shapes, the peak it is against, and GPM's
    tensor-core activity beside it where there is one."""
    tensor = m.tensor_active()
    gpm = f"; tensor cores active {tensor:.0f} % (GPM)" if tensor is not None else ""
    if m.mfu_pct is None:
        tflops = s.get("achieved_tflops")
        done = f"{tflops:.3g} TFLOP/s achieved; " if tflops is not None else ""
        return f"MFU: {done}{s.get('mfu_basis') or 'not measured'}{gpm}"
    shapes = [v["mfu_pct"] for v in m.mfu_by_shape.values() if v.get("mfu_pct") is not None]
    spread = f" ({min(shapes):.0f}-{max(shapes):.0f} % over {len(shapes)} shapes)" if len(shapes) > 1 else ""
    return (f"MFU {m.mfu_pct:.1f} %{spread}: {s.get('achieved_tflops', 0):.0f} TFLOP/s of "
            f"{s.get('mfu_basis')}{gpm}")


def where_the_time_went(s: dict, m: Measured, diag: Diagnosis, out: Path | None = None) -> str:
    """The closing summary in words: warm-up apart from training, where the training's wall time
    went, how busy the GPU was (NVML, GPM), throughput, and the verdict in one line."""
    warm = (f" after {m.compile_s:.0f} s of warm-up compiling the step" if m.compile_s else "")
    lines = [f"where the time went: {fmt(m.steps, '{}', '0')} steps in {fmt(m.train_s, '{:.1f}')} s "
             f"of training{warm} (timed with {s.get('timing', '?')}, after each shape's first step):",
             f"  waiting for data {fmt(m.data_wait_pct)} % | host-to-device {fmt(m.h2d_pct)} % | "
             f"{m.step_label} {fmt(m.step_pct)} % | other {fmt(m.other_pct)} %"]
    u, sm = m.util(), m.sm()
    if m.only_compiled():
        gpu = (f"GPU: the run compiled its step for {m.compile_s:.0f} s and trained no step after it; "
               "the GPU waits for the compiler meanwhile")
    elif u:
        gpm = f"; GPM SM active {sm.mean:.0f} %" if sm else ""
        gpu = f"GPU busy {u.mean:.0f} % of the training time (NVML utilisation{gpm}), {u.verdict}"
    else:
        gpu = "GPU busy: " + m.not_measured.get("gpu", "not measured")
    compiling = m.gpu.compiling if m.gpu else None
    if compiling:
        gpu += f"; {compiling.samples} samples taken while compiling counted apart"
    lines.append(f"  {gpu}")
    t = m.throughput
    lines.append(f"  step {fmt(m.step_ms)} ms (CoV {fmt(m.step_cov_pct)} %) | "
                 f"{fmt(t.get('frames_per_s'), '{:,.0f}')} mel frames/s, "
                 f"{fmt(t.get('audio_s_per_s'), '{:,.1f}')} s of audio/s | input-bound {fmt(m.input_bound_pct)} %")
    mem = f"; {m.memory.text()}" if m.memory is not None else ""
    lines.append("  " + mfu_text(s, m))
    lines.append(f"  {fmt(m.n_shapes, '{}', '0')} batch shapes, padding {fmt(m.padding_pct)} %, "
                 f"recompiles after warm-up: {fmt(m.recompiles, '{}', '0')}{mem}")
    if m.ranks:  # under DDP, and the rank the others wait for where there is one
        lines.append("  " + ranks_text(m.ranks))
        lines += [f"  {f.title}: {f.evidence}; next: {f.action}" for f in diag.findings if f.rule == "straggler"]
    lines.append(f"verdict: {diag.headline()}")
    if out is not None:
        lines.append(f"  all figures and findings: {RunDir(out).summary}, {RunDir(out).report}")
    return "\n".join(lines)
