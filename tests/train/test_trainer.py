import json
import re
import signal
import time
from pathlib import Path

import pytest
import yaml
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from myxtts.rundir import RunDir
from tests.conftest import kill_when

from .conftest import losses, run_train


def test_kill9_and_resume_reproduces_the_uninterrupted_losses(lj_cache, tmp_path):
    steps = ["train.max_steps=10", "train.checkpoint_every=4"]
    whole = run_train(lj_cache, tmp_path / "whole", *steps)
    assert whole.returncode == 0, whole.stderr
    reference = losses(tmp_path / "whole")
    assert sorted(reference) == list(range(1, 11))

    proc = run_train(lj_cache, tmp_path / "killed", *steps, wait=False)
    marker = tmp_path / "killed" / "checkpoints" / "step-00000004" / "state.pt"
    kill_when(proc, marker)
    resumed = run_train(lj_cache, tmp_path / "killed", *steps)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stderr
    assert losses(tmp_path / "killed") == reference  # exactly, step by step


def test_sigterm_checkpoints_and_exits_cleanly(lj_cache, tmp_path):
    proc = run_train(lj_cache, tmp_path / "run", "train.max_steps=100000", wait=False)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.time() + 300
    while (not metrics.exists() or not metrics.read_text().strip()) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 75, err  # "stopped, resumable"
    assert "stop requested" in err and "Resume with the same command" in err
    ckpts = list((tmp_path / "run" / "checkpoints").glob("step-*/model.safetensors"))
    assert len(ckpts) == 1
    assert load_file(str(ckpts[0]))  # plain safetensors, no pickle
    assert not any("val_loss" in line for line in metrics.read_text().splitlines())  # exits at once


def test_a_run_its_time_budget_ends_validates_its_last_weights(lj_cache, tmp_path):
    """The weights a voice is spoken with are the best validated ones: when time is up between
    two validations, the last step's weights are validated too, or the best would be older."""
    r = run_train(lj_cache, tmp_path / "run", "train.max_steps=100000", "train.time_budget_s=0.001")
    assert r.returncode == 75 and "time budget reached: stopped at step 1" in r.stderr, r.stderr
    recs = RunDir(tmp_path / "run").read_metrics()
    assert [x["step"] for x in recs if "val_loss" in x] == [1]
    assert RunDir(tmp_path / "run").best.is_file()
    # the schedule's end is kept where no rate could be measured yet
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["lr_schedule_end"] == 100000


def test_overrides_reach_the_step_and_outputs(lj_cache, tmp_path):
    r = run_train(lj_cache, tmp_path / "run", "train.max_steps=3", "train.lr=0.0",
                  "train.warmup_steps=0", "train.schedule=constant", "train.keep_last=1",
                  "train.checkpoint_every=1", "train.val_every=3")
    assert r.returncode == 0, r.stderr
    recs = RunDir(tmp_path / "run").read_metrics()
    train_recs = [x for x in recs if x.get("loss") is not None]
    assert [x["step"] for x in train_recs] == [1, 2, 3]
    assert all(x["lr"] == 0.0 for x in train_recs)
    assert any("val_loss" in x for x in recs)
    # keep_last=1 leaves a single checkpoint; lr=0 leaves the weights where they started.
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["step-00000003"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["recompiles_after_warmup"] == 0
    assert RunDir(tmp_path / "run").cache() == Path(lj_cache).resolve()  # recorded, so eval and serve find it
    assert summary["frame_budget"] == 1200  # the budget the diagnosis judges (FAST sets it)
    from myxtts.train.precision import usable_cpus
    assert summary["software"]["cpu_count"] == usable_cpus()  # a trace read elsewhere is judged by these
    assert "where the time went" in r.stderr


def test_the_run_keeps_the_settings_as_asked_and_a_resume_reads_its_plan(lj_cache, tmp_path):
    import yaml

    auto = ["data.frame_budget=auto", "train.compile=auto", "train.checkpoint_every=2"]
    out = tmp_path / "run"
    first = run_train(lj_cache, out, "train.max_steps=2", *auto)
    assert first.returncode == 0, first.stderr
    asked = yaml.safe_load((out / "config.yaml").read_text())
    assert asked["data"]["frame_budget"] == "auto" and asked["train"]["compile"] == "auto"
    plan = json.loads((out / "plan.json").read_text())
    assert plan["frame_budget"] == 4000 and plan["compile"] == "off" and plan["precision"] == "fp32"
    assert json.loads((out / "checkpoints" / "step-00000002" / "resume.json").read_text()) == plan
    assert "frame budget auto -> 4000" in first.stderr and "compile auto -> off" in first.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["asked"]["frame_budget"] == "auto" and summary["frame_budget"] == 4000

    again = run_train(lj_cache, out, "train.max_steps=3", *auto)
    assert again.returncode == 0, again.stderr
    assert "resuming from" in again.stderr and "as planned when this run started" in again.stderr
    assert yaml.safe_load((out / "config.yaml").read_text())["data"]["frame_budget"] == "auto"


def test_bad_override_is_a_clear_error(lj_cache, tmp_path):
    r = run_train(lj_cache, tmp_path / "run", "train.max_stesp=3")
    assert r.returncode == 2 and "did you mean 'max_steps'" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_run_of_non_finite_steps_stops_with_a_clear_error(lj_cache, tmp_path):
    # An absurd learning rate blows the weights up after the first update; every later step is
    # skipped on the device, and the run stops once max_nonfinite of them come in a row.
    r = run_train(lj_cache, tmp_path / "run", "train.max_steps=50", "train.lr=1e30",
                  "train.warmup_steps=0", "train.schedule=constant", "train.grad_clip=0",
                  "train.max_nonfinite=3", "train.log_every=10")
    assert r.returncode == 2, r.stderr
    found = re.search(r"not finite for (\d+) steps in a row \(at step (\d+)\)", r.stderr)
    assert found and int(found[1]) >= 3 and int(found[2]) < 50, r.stderr  # stopped early
    assert "Traceback" not in r.stderr


def test_a_finished_run_is_kept_and_a_higher_max_steps_extends_it(lj_cache, tmp_path):
    run = tmp_path / "run"
    first = run_train(lj_cache, run, "train.max_steps=3")
    assert first.returncode == 0, first.stderr
    kept = {p: p.read_bytes() for p in (run / "summary.json", run / "report.html", run / "metrics.jsonl")}
    again = run_train(lj_cache, run, "train.max_steps=3")
    assert again.returncode == 0, again.stderr
    assert "already at step 3" in again.stderr and "Traceback" not in again.stderr
    assert {p: p.read_bytes() for p in kept} == kept  # nothing rewritten
    more = run_train(lj_cache, run, "train.max_steps=5")
    assert more.returncode == 0, more.stderr
    assert sorted(losses(run)) == [1, 2, 3, 4, 5]


def test_a_tiny_run_from_before_its_5_frame_kernel_resumes_with_3_given(lj_cache, tmp_path):
    """tiny's frame decoder convolved over 3 frames before it convolved over 5: such a run,
    resumed with today's preset, names the setting in one line, and resumes with it given."""
    run = tmp_path / "run"
    assert run_train(lj_cache, run, "train.max_steps=2", "model.frame_kernel=3").returncode == 0
    r = run_train(lj_cache, run, "train.max_steps=3")
    assert r.returncode == 2 and "model.frame_kernel=3 (now 5)" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = run_train(lj_cache, run, "train.max_steps=3", "model.frame_kernel=3")
    assert r.returncode == 0 and sorted(losses(run)) == [1, 2, 3], r.stderr


def test_resuming_with_another_model_setting_names_it(lj_cache, tmp_path):
    run = tmp_path / "run"
    assert run_train(lj_cache, run, "train.max_steps=2").returncode == 0
    r = run_train(lj_cache, run, "train.max_steps=4", "model.d_model=32")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "model.d_model=64 (now 32)" in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 3
    # a run from before model files had format 4: its frames had absolute positions, which its
    # header does not say; resumed under today's default, the message names what it meant
    model_file = next((run / "checkpoints").iterdir()) / "model.safetensors"
    with safe_open(str(model_file), "pt") as f:
        meta = dict(f.metadata())
    old = yaml.safe_load(meta["config"])
    del old["model"]["frame_position"], old["model"]["ref_self_keys"]
    save_file(load_file(str(model_file)), str(model_file),
              metadata={**meta, "config": yaml.safe_dump(old), "format_version": "3"})
    r = run_train(lj_cache, run, "train.max_steps=4")
    assert r.returncode == 2 and "model.frame_position='absolute' (now 'token')" in r.stderr, r.stderr
    assert "model.ref_self_keys=True (now False)" in r.stderr, r.stderr


@pytest.mark.parametrize("installed", [False, True])
def test_speaker_embedding_auto_is_resolved_once_and_the_model_file_keeps_which(monkeypatch, installed):
    """auto is ge2e where the GE2E encoder's weights are installed, else none, said in the plan's
    notes; the plan keeps it (a resume does not resolve it again) and applies it, so the model
    files a run writes (its config: ``plan.apply``) hold the resolved value, never auto."""
    from myxtts import speaker_encoder as speaker
    from myxtts.config import load
    from myxtts.errors import UserError
    from myxtts.train.build import resolve_plan

    def weights_path():
        if not installed:
            raise UserError("no resemblyzer")
        return Path("pretrained.pt")

    monkeypatch.setattr(speaker, "weights_path", weights_path)
    want = "ge2e" if installed else "none"
    cfg = load("tiny", ["model.speaker_embedding=auto", "data.frame_budget=1200"])
    plan = resolve_plan(cfg, None)
    assert plan.speaker_embedding == want and plan.apply(cfg).model.speaker_embedding == want
    assert any(n.startswith(f"model.speaker_embedding auto: {want}") for n in plan.notes)
    monkeypatch.setattr(speaker, "weights_path", lambda: Path("pretrained.pt"))  # installed since
    assert resolve_plan(cfg, None, saved=plan).speaker_embedding == want  # kept as planned
