"""The real traces of the first H100 run (tests/fixtures/h100-2026-11-23, see its README),
diagnosed by the code `myxtts profile` and the trainer's log run: each must name the right cause."""
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from myxtts.commands.profile import text as profile_text
from myxtts.config import load
from myxtts.observe.diagnose import diagnose
from myxtts.observe.gpu import GpuSampler, _Device
from myxtts.observe.gpu_summary import read_csv, summarize_samples
from myxtts.observe.profile import measured_from_profile
from myxtts.observe.runlog import RunLog, run_diagnosis, where_the_time_went
from myxtts.train.memory import DeviceMemory

H100 = Path(__file__).parents[1] / "fixtures" / "h100-2026-11-23"


def _json(name):
    return json.loads((H100 / name).read_text())


def _monitor(name):
    """A `myxtts monitor` CSV, summarised as the sampler summarises its samples."""
    return summarize_samples(read_csv(H100 / name), 0.5, {0: ("NVIDIA H100 80GB HBM3", "")})


def _eager_cfg():
    return load("base", ["train.compile=off", "data.num_workers=8"])


def test_eager_profile_with_its_monitor_samples_is_launch_bound_with_the_cuda_graphs_action():
    rec = _json("profile_eager_base.json")
    m = measured_from_profile(rec["run"], _monitor("eager-base-monitor.csv"))
    d = diagnose(m)
    assert d.bound == "launch-bound", d.text()
    top = d.top
    assert top.rule == "launch" and top.severity == "high"
    assert "`train.compile=cudagraphs`" in top.action and "CUDA graph" in top.action
    assert "`data.frame_budget=" in top.action  # 7 % of the memory used: both fixes apply
    # The profile's 87 % (annotation ranges counted as kernels) and NVML's ~28 % disagree: NVML
    # decides, and the evidence says so with both figures.
    assert "NVML" in d.reason and "87 %" in top.evidence and "verdict uses NVML" in top.evidence
    assert "2,905 small kernels a step (median 6.3 µs)" in d.reason
    assert "compute-bound" not in d.text()


def test_eager_profile_alone_is_launch_bound_from_its_kernel_figures():
    # Without NVML the inflated busy share stands, but 6 µs kernels and a host launching 98 % of
    # the step are the launch signature.
    d = diagnose(measured_from_profile(_json("profile_eager_base.json")["run"]))
    assert d.bound == "launch-bound" and "cannot issue work any faster" in d.reason, d.text()
    assert "`train.compile=cudagraphs`" in d.top.action
    assert "compute-bound" not in d.text()


def test_profile_command_prints_the_new_verdict_for_the_real_trace():
    rec = _json("profile_eager_base.json")
    gpu = _monitor("eager-base-monitor.csv")
    m = measured_from_profile(rec["run"], gpu)
    rec.update(gpu=gpu.as_dict(), diagnosis=diagnose(m).as_dict())
    out = profile_text(rec)
    assert "verdict: launch-bound: the GPU is busy 28 % of the time" in out
    assert "NVML utilisation beside the timed steps: mean 28 %" in out and "GPM SM active 18 %" in out
    assert "compute-bound" not in out


def test_eager_training_summary_in_words_is_launch_bound_and_has_no_raw_json():
    s = _json("eager-base-summary.json")
    m, d = run_diagnosis(s, _eager_cfg())
    text = where_the_time_went(s, m, d)
    assert d.bound == "launch-bound" and "compute-bound" not in d.text() + text
    assert "step (host + GPU) 98.3 %" in text and "compute 98" not in text
    assert "GPU busy 32 % of the training time (NVML utilisation; GPM SM active 20 %)" in text
    verdict = [line for line in text.splitlines() if line.startswith("verdict: ")]
    assert len(verdict) == 1 and verdict[0].startswith("verdict: launch-bound: the GPU is busy 32 % of the time")
    assert "try `train.compile=cudagraphs`" in verdict[0]
    assert "{" not in text  # the figures go to summary.json and the report, not to the console


def test_the_closing_summary_gives_peak_memory_with_the_allocators_retries_and_ooms():
    s = _json("eager-base-summary.json")
    m, d = run_diagnosis(s, _eager_cfg())
    assert "peak memory" not in where_the_time_went(s, m, d)  # its peak_memory_gib was the allocated peak
    s["memory"] = asdict(DeviceMemory(capacity_gib=79.1, reserved_peak_gib=6.2, reserved_peak_pct=7.8,
                                      active_peak_gib=5.1, alloc_retries=2, ooms=0))
    m, d = run_diagnosis(s, _eager_cfg())
    assert ("peak memory 6.2 GiB (8 % of 79.1 GiB reserved by the allocator), 2 allocator retries, 0 OOMs"
            in where_the_time_went(s, m, d)) and m.mem_peak_pct == 7.8


def test_training_diagnosis_reads_the_budget_the_run_trained_with():
    # data.frame_budget=auto: the run's summary names the budget sizing chose, and a suggested
    # larger budget must scale that one, not data.base_frame_budget.
    s = _json("eager-base-summary.json")
    cfg = load("base")
    assert cfg.data.frame_budget == "auto"
    m, _ = run_diagnosis(s, cfg)
    assert m.settings.frame_budget == cfg.data.base_frame_budget
    m, _ = run_diagnosis(dict(s, frame_budget=48000), cfg)
    assert m.settings.frame_budget == 48000


def test_compile_default_run_is_compiling_not_idle():
    s = _json("compile-default-base-summary.json")
    s["gpu"] = _monitor("compile-default-base-monitor.csv").as_dict()
    m, d = run_diagnosis(s, load("base"))
    assert d.bound == "compiling", d.text()
    assert "not idle" in d.reason and "idle" not in {f.rule for f in d.findings}
    text = where_the_time_went(s, m, d)
    assert "after 150 s of warm-up compiling the step" in text and "0 steps" not in text
    assert "the GPU waits for the compiler" in text and "IDLE" not in text


class ReplaySampler(GpuSampler):
    """Samples read back from a monitor CSV, on a clock the test sets."""

    def __init__(self, samples):
        super().__init__(0.5)
        self._samples, self.clock = samples, 0.0
        self._devices = [_Device(0, None, "NVIDIA H100 80GB HBM3")]

    def now(self):
        return self.clock

    def stop(self):
        pass


@pytest.fixture
def run_log(tmp_path):
    log = RunLog(tmp_path / "run", load("base"), True, False)
    yield log
    log.close()


def test_the_trainers_log_counts_samples_during_compilation_as_compiling(run_log, capsys):
    samples = read_csv(H100 / "compile-default-base-monitor.csv")
    run_log._gpu = sampler = ReplaySampler(samples)
    started = next(x.t for x in samples if x.mem_used_mib > 600)  # the trainer holds GPU memory
    sampler.clock = started
    run_log.compiling(0, 8, 0.0)
    for k in range(1, 9):
        sampler.clock = started + 18.0 * k
        run_log.compiling(k, 8, 18.0 * k)
    summary = {**_json("compile-default-base-summary.json"), "compile_s": 144.0, "wall_seconds": 6.0}
    summary.pop("gpu")
    run_log.finish(summary)
    err = capsys.readouterr().err
    assert "compiling the step for shape 1 of 8" in err
    assert "compiled shape 4 of 8, 72 s elapsed, about 72 s left; compiling shape 5 of 8" in err
    written = json.loads((run_log.out / "summary.json").read_text())
    comp = written["gpu"]["compiling"]
    assert comp["samples"] == sum(started <= x.t <= started + 144.0 for x in samples) > 200
    assert written["diagnosis"]["bound"] == "compiling"
    assert "verdict: compiling:" in err and "IDLE" not in err
    assert "samples taken while compiling counted apart" in err
    assert "those samples count as compiling" in (run_log.out / "report.html").read_text()


# --------------------------------------------------------- the compiled step, 2026-11-27
H100_27 = Path(__file__).parents[1] / "fixtures" / "h100-2026-11-27"
SIZING_END_S = 17.0  # on the monitor's clock: the batch sizing's probes released their memory


def _compiled_run_2027() -> dict:
    """The run's summary as the trainer's log makes it now: GPU samples judged over steady
    training (the compile window and the run's edges apart, each placed on the monitor's clock
    from the run's own figures) and MFU from the FLOPs counted for each of its shapes."""
    from myxtts.observe.flops import run_mfu
    from myxtts.observe.runlog import WARMUP_EDGE_S

    s = json.loads((H100_27 / "cold-base-summary.json").read_text())
    compiled = SIZING_END_S + s["gpu"]["compiling"]["to_s"]
    samples = read_csv(H100_27 / "cold-base-monitor.csv")
    gpu = summarize_samples(samples, 0.5, {0: ("NVIDIA H100 80GB HBM3", "")}, (SIZING_END_S, compiled),
                            (compiled + WARMUP_EDGE_S, compiled + s["wall_seconds"]))
    s["gpu"] = asdict(gpu)
    flops = json.loads((H100_27 / "flops_by_shape.json").read_text())["flops_by_shape"]
    s.update(run_mfu(flops, s["step_by_shape"], s["device"], s["device_name"]))
    return s


def test_the_compiled_h100_run_is_kernel_bound_with_its_mfu_and_no_cooling_advice():
    s = _compiled_run_2027()
    assert 23 < s["mfu_pct"] < 26  # 17.8 TFLOP in 71.7 ms against 989 TFLOP/s
    m, d = run_diagnosis(s, load("base", ["text.mode=characters"]))
    assert d.bound == "kernel-bound", d.text()
    assert "MFU 25 %" in d.reason and "tensor cores active 26 %" in d.reason  # steady training
    text = d.text()
    assert "cooling" not in text and "power limit and supply" not in text
    assert "data.frame_budget" not in text  # MFU is flat over the shapes: no larger batch
    kernel = next(f for f in d.findings if f.rule == "kernel")
    assert "flat across the batch shapes" in kernel.evidence and "`myxtts profile`" in kernel.action
    throttle = next(f for f in d.findings if f.rule == "throttle")
    assert throttle.severity == "info" and "-1.0 %" in throttle.title, throttle  # 1,960 of 1,980 MHz
    assert d.findings.index(kernel) < d.findings.index(throttle)
    # steady training read 93-100 %: the dips right after compiling and at the checkpoint are edges
    u = m.util()
    assert u.verdict == "steady" and u.mean > 95 and m.gpu.edge_samples > 0, u
    assert not any(f.rule == "oscillation" for f in d.findings)
    out = where_the_time_went(s, m, d)
    assert "MFU 24.6 %" in out and "H100 SXM dense bf16 989 TFLOP/s" in out and "tensor cores active 26 %" in out


def test_a_summary_is_judged_with_the_cores_of_the_machine_that_ran_it(monkeypatch):
    """Read on a 2-core laptop, the H100 host's 8 loader workers on 16 cores are not too many."""
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    s = _compiled_run_2027()
    cfg = load("base", ["text.mode=characters", "data.num_workers=8"])
    s["software"] = {"cpu_count": 16}
    m, d = run_diagnosis(s, cfg)
    assert m.settings.cpu_count == 16 and not any(f.rule == "workers-oversubscribed" for f in d.findings)
    del s["software"]  # a summary written before the count was: the reading machine's, as before
    m, d = run_diagnosis(s, cfg)
    assert m.settings.cpu_count == 2 and any(f.rule == "workers-oversubscribed" for f in d.findings)


# ------------------------------------------------- every stored GPU trace, as it was written
def _stored(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


COLD_CFG = H100_27 / "cold-base-config.yaml"
# (summary as stored, the run's config, bound, the first action starts with, MFU range or None).
# 2026-11-27: 17.6-18.1 TFLOP a step (meta count of its saved config, within 2 % of the bench's
# count in flops_by_shape.json) over 53-78 ms steps against 989 TFLOP/s: 24-25 %.
TRACES = [
    (H100 / "eager-base-summary.json", lambda: _eager_cfg(), "launch-bound", "`train.compile=cudagraphs`", None),
    (H100 / "compile-default-base-summary.json", lambda: load("base"), "compiling",
     "a larger `train.time_budget_s`", None),
    (H100_27 / "cold-base-summary.json", lambda: load(COLD_CFG, saved=True), "kernel-bound", "`myxtts profile`",
     (23.5, 25.5)),
]


@pytest.mark.parametrize("path, cfg, bound, action, mfu", TRACES, ids=lambda x: getattr(x, "parent", None)
                         and f"{x.parent.name}/{x.stem}")
def test_every_stored_trace_reads_as_it_happened(path, cfg, bound, action, mfu):
    s = json.loads(path.read_text())
    m, d = run_diagnosis(s, cfg())
    text = d.text() + where_the_time_went(s, m, d)
    assert d.bound == bound, d.text()
    assert d.top.action.startswith(action), d.text()
    assert "cooling" not in text and "power limit and supply" not in d.headline()
    # no trace recompiled after warm-up: no finding advises looking for recompiles
    assert not [f.action for f in d.findings if "recompiles" in f.action], d.text()
    if mfu is None:
        assert m.mfu_pct is None and "MFU: not measured" in text  # its shapes lack the text length
    else:
        assert mfu[0] < m.mfu_pct < mfu[1] and f"MFU {m.mfu_pct:.0f} %" in d.reason, d.text()
        assert f"MFU {m.mfu_pct:.1f} %" in text and "H100 SXM dense bf16 989 TFLOP/s" in text


def test_the_stored_cold_summary_weighs_its_clock_against_the_h100s_maximum():
    """The summary has no highest sampled clock: 1,962 MHz is weighed against the H100 SXM's
    1,980, and oscillation with no cause seen while training borrows no action."""
    s = _stored(H100_27, "cold-base-summary.json")
    assert "sm_clock_max_mhz" not in s["gpu"]["gpus"][0] and s["recompiles_after_warmup"] == 0
    m, d = run_diagnosis(s, load(COLD_CFG, saved=True))
    throttle = next(f for f in d.findings if f.rule == "throttle")
    assert throttle.severity == "info" and "-0.9 %" in throttle.title, throttle
    assert "1,980 MHz the H100 SXM's maximum" in throttle.evidence
    osc = next(f for f in d.findings if f.rule == "oscillation")
    assert osc.severity == "low" and "no cause seen while training" in osc.evidence
    assert "0 recompiles after warm-up" in osc.evidence and "TORCH_LOGS" not in osc.action
    assert "TORCH_LOGS" not in d.headline()
    # An unknown card: the share of samples alone is information, never the headline.
    s["gpu"]["gpus"][0]["name"] = "NVIDIA Unlisted"
    m, d = run_diagnosis(s, load(COLD_CFG, saved=True))
    throttle = next(f for f in d.findings if f.rule == "throttle")
    assert throttle.severity == "info" and "not known" in throttle.evidence and "power" not in d.headline()


def test_the_saved_config_counts_the_flops_the_bench_counted_on_the_gpu():
    """The cold run's config.yaml predates model.frame_position: read as saved, it builds the
    model that ran, whose FLOPs the bench counted on the same machine (flops_by_shape.json)."""
    from myxtts.observe.flops import meta_step_flops

    bench = _stored(H100_27, "flops_by_shape.json")["flops_by_shape"]
    shapes = {k: tuple(int(x) for x in k.split("x")) for k in bench}
    cfg = load(COLD_CFG, saved=True)
    assert cfg.model.frame_position == "absolute" and load("base").model.frame_position != "absolute"
    counted = meta_step_flops(cfg, None, list(shapes.values()))[0]
    for k, shape in shapes.items():
        assert abs(counted[shape] / bench[k] - 1) < 0.02, k


def test_oscillation_borrows_only_a_cause_seen_while_training():
    s = _stored(H100_27, "cold-base-summary.json")
    for key, value, cause in (("input_bound_pct", 30.0, "loader"), ("recompiles_after_warmup", 6, "recompiles"),
                              ("other_pct", 20.0, "between steps")):
        m, d = run_diagnosis(dict(s, **{key: value}), load(COLD_CFG, saved=True))
        osc = next(f for f in d.findings if f.rule == "oscillation")
        assert osc.severity == "medium" and cause in osc.evidence.lower(), (key, osc)
