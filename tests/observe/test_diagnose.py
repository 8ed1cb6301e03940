import dataclasses

import pytest

from myxtts.config import Config
from myxtts.observe.diagnose import BUDGET_STEP, MEMORY_FILL_PCT, budget_to_fill, classify, diagnose
from myxtts.observe.findings import SEVERITIES
from myxtts.observe.gpu_summary import GpuStats, GpuSummary
from myxtts.observe.measured import BUSY_DISAGREE_PTS, Measured, Settings
from myxtts.observe.stats import summarize

from . import synthetic_runs as runs

S = runs.SETTINGS


def with_settings(**kw) -> Settings:
    return dataclasses.replace(S, **kw)


@pytest.mark.parametrize("build", runs.ALL, ids=lambda f: f.__name__)
def test_synthetic_runs_get_the_known_answer(build):
    m, verdict, bound, top_rule, action = build()
    assert m.util().verdict == verdict
    d = diagnose(m)
    assert d.bound == bound, d.text()
    assert d.top.rule == top_rule, d.text()
    assert action in d.top.action, d.text()
    assert d.text().startswith(f"verdict: {bound}: ")


@pytest.mark.parametrize("build", runs.ALL, ids=lambda f: f.__name__)
def test_findings_are_ranked_and_actionable(build):
    d = diagnose(build()[0])
    ranks = [SEVERITIES.index(f.severity) for f in d.findings]
    assert ranks == sorted(ranks)
    for f in d.findings:
        assert f.title and f.evidence and f.action
        assert "`" in f.action or f.rule in ("throttle", "compute")  # a setting or a command, quoted


def test_a_misspelt_figure_is_an_error_not_a_silent_rule():
    with pytest.raises(TypeError):
        Measured(input_bound=30.0)
    with pytest.raises(TypeError):
        Settings(num_worker=4)


def test_compute_bound_needs_big_kernels_and_says_so():
    m = runs.compute_bound()[0]
    d = diagnose(m)
    assert d.bound == "compute-bound" and "the GPU itself is the limit" in d.reason
    assert all(f.severity in ("low", "info") for f in d.findings), d.text()
    # The same busy share with tiny kernels and a saturated host is the launch signature instead.
    tiny = dataclasses.replace(m, median_kernel_us=6.0, cpu_dispatch_pct=97.0, kernels_per_step=2900)
    d = diagnose(tiny)
    assert d.bound == "launch-bound" and "cannot issue work any faster" in d.reason, d.text()


def test_the_two_gpu_split_names_the_idle_gpu_and_judges_the_busy_one():
    d = diagnose(runs.data_gpu_idle_model_gpu_busy()[0])
    assert d.bound != "idle"
    idle = d.findings[0]
    assert idle.rule == "idle-gpus" and idle.severity == "high"
    assert "GPU 0 1 %" in idle.evidence or "GPU 0 0 %" in idle.evidence
    assert "GPU 1 96 %" in idle.evidence


def test_input_bound_thresholds():
    assert classify(Measured(settings=S, input_bound_pct=4.9, gpu_busy_pct=95))[0] == "busy"
    bound, why = classify(Measured(input_bound_pct=5.0))
    assert bound == "input-bound" and why.startswith("moderately")
    assert classify(Measured(input_bound_pct=20.0))[1].startswith("highly")
    sev = {ib: diagnose(Measured(input_bound_pct=ib)).top.severity for ib in (6, 25)}
    assert sev == {6: "medium", 25: "high"}


def test_busy_share_cross_check_trusts_nvml_when_they_disagree():
    # The profile's busy share agrees with NVML within the limit: the profile is used.
    m = Measured(settings=with_settings(compile="off"), input_bound_pct=1.0, gpu=runs.gpu_summary([60] * 20),
                 gpu_busy_pct=45.0)
    busy = m.busy()
    assert busy.pct == 45.0 and "profiled kernel time" in busy.basis and not busy.note
    # 87 % from the profile against 30 % from NVML: NVML decides, and the finding says why.
    m = dataclasses.replace(m, gpu=runs.gpu_summary([30] * 20), gpu_busy_pct=87.0)
    busy = m.busy()
    assert busy.pct == 30.0 and "NVML" in busy.basis
    assert f"more than {BUSY_DISAGREE_PTS:g} points" in busy.note and "87 %" in busy.note
    d = diagnose(m)
    assert d.bound == "launch-bound" and "NVML" in d.reason
    assert busy.note in d.top.evidence


def test_launch_action_names_graphs_budget_or_both():
    base = Measured(input_bound_pct=1.0, gpu=runs.gpu_summary([30] * 20), mem_peak_pct=8.0)
    act = diagnose(dataclasses.replace(base, settings=with_settings(compile="off"))).top.action
    assert "`train.compile=cudagraphs`" in act and "`data.frame_budget=" in act  # both
    act = diagnose(dataclasses.replace(base, settings=with_settings(compile="cudagraphs"))).top.action
    assert "train.compile" not in act and "`data.frame_budget=127488`" in act  # 12000 x 85 / 8, to a multiple of 64
    full = dataclasses.replace(base, settings=with_settings(compile="off"), mem_peak_pct=85.0)
    act = diagnose(full).top.action
    assert "`train.compile=cudagraphs`" in act and "frame_budget" not in act
    ddp = dataclasses.replace(full, settings=with_settings(compile="off", world_size=4))
    assert diagnose(ddp).top.action.startswith("`train.compile=default`")


def test_budget_to_fill_scales_memory_and_rounds_down():
    m = Measured(settings=S, mem_peak_pct=7.0)
    b = budget_to_fill(m)
    assert b % BUDGET_STEP == 0 and b <= 12000 * MEMORY_FILL_PCT / 7.0 < b + BUDGET_STEP
    assert budget_to_fill(Measured(settings=S)) is None


def test_a_frame_budget_that_leaves_the_gpu_empty_is_named():
    d = diagnose(Measured(settings=S, mem_peak_pct=7.2, step_ms=90.0))
    f = next(f for f in d.findings if f.rule == "memory")
    assert "7 % of the GPU at data.frame_budget=12000 (< 25 %)" in f.evidence
    assert f"`data.frame_budget={budget_to_fill(Measured(settings=S, mem_peak_pct=7.2))}`" in f.action
    assert not any(f.rule == "memory" for f in diagnose(Measured(settings=S, mem_peak_pct=40.0)).findings)
    cpu = dataclasses.replace(S, device="cpu")
    assert not any(f.rule == "memory" for f in diagnose(Measured(settings=cpu, mem_peak_pct=5.0)).findings)


def test_workers_are_capped_by_cpus_and_say_so():
    d = diagnose(Measured(settings=with_settings(num_workers=2, cpu_count=4), input_bound_pct=80.0))
    assert "`data.num_workers=3`" in d.top.action and "CPU-limited" in d.top.action


def test_other_input_causes():
    base = Measured(settings=S, input_bound_pct=30.0)
    assert "data.on_the_fly=false" in diagnose(
        dataclasses.replace(base, settings=with_settings(on_the_fly=True))).top.action
    d = diagnose(dataclasses.replace(base, settings=with_settings(pin_memory=False), h2d_pct=25.0))
    assert d.top.rule == "input-h2d" and "`data.pin_memory=true`" in d.top.action
    d = diagnose(dataclasses.replace(base, settings=with_settings(num_workers=15, cpu_count=16)))
    assert d.top.rule == "input-tune" and "myxtts tune" in d.top.action


def test_gpm_underfill_padding_precision_throttle():
    throttle = [("hw_thermal", "gpu_idle")] * 8 + [("gpu_idle",)] * 10 + [()] * 2  # 40 % and 90 % of samples
    m = Measured(settings=with_settings(precision="fp32"), input_bound_pct=0.5, padding_pct=30.0,
                 gpu=runs.gpu_summary([97] * 20, sm_active=[30.0] * 20, throttle=throttle))
    rules = {f.rule: f for f in diagnose(m).findings}
    assert "`data.frame_budget=24000`" == rules["underfill"].action
    assert rules["padding"].severity == "medium"
    assert "`data.pad_multiple=32`" in rules["padding"].action
    assert rules["precision"].action == "`train.precision=bf16`"
    assert "hw_thermal 40 %" in rules["throttle"].evidence and "gpu_idle" not in rules["throttle"].evidence


def test_missing_measurements_are_reported_not_guessed():
    d = diagnose(Measured(not_measured={"gpu": "no NVIDIA GPU"}))
    assert d.bound == "unknown"
    assert [f.rule for f in d.findings] == ["unmeasured"] and d.findings[0].evidence == "no NVIDIA GPU"


def test_cpu_device_and_config_settings():
    s = Settings.from_config(Config(), device="cpu")
    assert s.num_workers == Config().data.num_workers and s.compile == "auto"
    d = diagnose(Measured(settings=s))
    assert d.bound == "cpu" and d.top.rule == "cpu"


def test_gpu_summary_input_uses_the_least_busy_working_gpu():
    m = Measured(input_bound_pct=0.5, gpu=GpuSummary(0.5, 5.0, [
        GpuStats(index=0, util=summarize([97] * 10)), GpuStats(index=1, util=summarize([60] * 10))]))
    assert classify(m)[0] == "launch-bound"


def test_skipped_cuda_graphs_and_a_step_compiled_apart_are_named():
    """A skipped CUDA graph reads as launch-bound, and shapes compiled apart before step 1 read
    as zero recompiles: both come from counts the run keeps, and each gets its own finding."""
    m, *_ = runs.launch_bound()
    m = dataclasses.replace(m, settings=with_settings(compile="cudagraphs"), cudagraph_skips=2,
                            cudagraph_recordings=16, graphs_compiled=8, n_shapes=8, recompiles=0)
    rules = {f.rule: f for f in diagnose(m).findings}
    assert "TORCH_LOGS=cudagraphs" in rules["cudagraph-skips"].action
    assert "8 graphs for 8 shapes" in rules["compiled-apart"].evidence
    clean = dataclasses.replace(m, cudagraph_skips=0, graphs_compiled=1)
    assert not {"cudagraph-skips", "compiled-apart"} & {f.rule for f in diagnose(clean).findings}
