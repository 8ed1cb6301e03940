import pytest

from myxtts.config import Config
from myxtts.observe.diagnose import SEVERITIES, classify, diagnose, settings_from_config
from myxtts.observe.stats import summarize

from . import synthetic_runs as runs


@pytest.mark.parametrize("build", runs.ALL, ids=lambda f: f.__name__)
def test_synthetic_runs_get_the_known_answer(build):
    run, verdict, bound, top_rule, action = build()
    assert summarize(run["gpu_util"]).verdict == verdict
    d = diagnose(run)
    assert d.bound == bound, d.text()
    assert d.top.rule == top_rule, d.text()
    assert action in d.top.action, d.text()


@pytest.mark.parametrize("build", runs.ALL, ids=lambda f: f.__name__)
def test_findings_are_ranked_and_actionable(build):
    d = diagnose(build()[0])
    ranks = [SEVERITIES.index(f.severity) for f in d.findings]
    assert ranks == sorted(ranks)
    for f in d.findings:
        assert f.title and f.evidence and f.action
        assert "`" in f.action or f.rule == "throttle"  # a setting or a command, quoted


def test_steady_run_raises_nothing_serious():
    d = diagnose(runs.steady()[0])
    assert all(f.severity in ("low", "info") for f in d.findings), d.text()


def test_input_bound_thresholds():
    assert classify({"input_bound_pct": 4.9, "gpu_busy_pct": 95})[0] == "compute-bound"
    bound, why = classify({"input_bound_pct": 5.0})
    assert bound == "input-bound" and why.startswith("moderately")
    assert classify({"input_bound_pct": 20.0})[1].startswith("highly")
    sev = {ib: diagnose({"input_bound_pct": ib}).top.severity for ib in (6, 25)}
    assert sev == {6: "medium", 25: "high"}


def test_launch_bound_definition_uses_profile_before_nvml():
    # NVML reads busy (one kernel at a time counts as 100 %), the profile says 40 %: profile wins.
    run = {"input_bound_pct": 1.0, "gpu_util": [95] * 20, "gpu_busy_pct": 40.0, "compile": "off"}
    d = diagnose(run)
    assert d.bound == "launch-bound" and "profiled kernel time" in d.reason
    assert d.top.action.startswith("`train.compile=default`")
    run.update(compile="cudagraphs", frame_budget=12000)
    assert "`data.frame_budget=24000`" in diagnose(run).top.action


def test_workers_are_capped_by_cpus_and_say_so():
    d = diagnose(dict(runs.SETTINGS, input_bound_pct=80.0, num_workers=2, cpu_count=4))
    assert "`data.num_workers=3`" in d.top.action and "CPU-limited" in d.top.action


def test_other_input_causes():
    base = dict(runs.SETTINGS, input_bound_pct=30.0)
    assert "data.on_the_fly=false" in diagnose(dict(base, on_the_fly=True)).top.action
    d = diagnose(dict(base, data_wait_pct=5.0, h2d_pct=25.0, pin_memory=False))
    assert d.top.rule == "input-h2d" and "`data.pin_memory=true`" in d.top.action
    d = diagnose(dict(base, num_workers=15, cpu_count=16))
    assert d.top.rule == "input-tune" and "myxtts tune" in d.top.action


def test_gpm_underfill_padding_precision_throttle():
    run = dict(runs.SETTINGS, input_bound_pct=0.5, gpu_util=[97] * 20, sm_active=[30] * 20, padding_pct=30.0,
               precision="fp32",
               gpu={"gpus": [{"index": 0, "util": None, "throttle_pct": {"hw_thermal": 40.0, "gpu_idle": 90.0}}]})
    rules = {f.rule: f for f in diagnose(run).findings}
    assert "`data.frame_budget=24000`" == rules["underfill"].action
    assert rules["padding"].severity == "high" or rules["padding"].severity == "medium"
    assert "`data.pad_multiple=32`" in rules["padding"].action
    assert rules["precision"].action == "`train.precision=bf16`"
    assert "hw_thermal 40 %" in rules["throttle"].evidence and "gpu_idle" not in rules["throttle"].evidence


def test_missing_measurements_are_reported_not_guessed():
    d = diagnose({"not_measured": {"gpu": "no NVIDIA GPU"}})
    assert d.bound == "unknown"
    assert [f.rule for f in d.findings] == ["unmeasured"] and d.findings[0].evidence == "no NVIDIA GPU"


def test_cpu_device_and_config_settings():
    s = settings_from_config(Config(), device="cpu")
    assert s["num_workers"] == Config().data.num_workers and s["compile"] == "auto"
    d = diagnose(dict(s, gpu_util=None))
    assert d.bound == "cpu" and d.top.rule == "cpu"


def test_gpu_summary_input_uses_the_least_busy_gpu():
    run = {"input_bound_pct": 0.5, "gpu": {"gpus": [
        {"index": 0, "util": summarize([97] * 10).as_dict(), "throttle_pct": {}},
        {"index": 1, "util": summarize([60] * 10).as_dict(), "throttle_pct": {}}]}}
    assert classify(run)[0] == "launch-bound"
