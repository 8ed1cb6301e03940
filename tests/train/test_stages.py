"""The stage table: what differs between the stages is asked of their specs, never of their
names; and the compiled step chooses between its eager and compiled forward itself."""
import re

import pytest

from myxtts.config import load
from myxtts.errors import UserError
from myxtts.train.build import build_run
from myxtts.train.plan import Plan, asked_lr
from myxtts.train.stages import STAGES, stage_spec

from .conftest import FAST, ROOT

TRAIN = ROOT / "myxtts" / "train"
STAGE_NAMES = "|".join(STAGES)
# a comparison with a stage's name, either way round: `stage == "vocoder"`, `"acoustic" != kind`
NAME_COMPARED = re.compile(rf"""[!=]=\s*["']({STAGE_NAMES})["']|["']({STAGE_NAMES})["']\s*[!=]=""")


def _offending(pattern: re.Pattern) -> list[str]:
    """The lines of myxtts/train/ that match ``pattern``, as FILE:LINE: text."""
    return [f"{p.name}:{i}: {line.strip()}" for p in sorted(TRAIN.glob("*.py"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]


def test_no_module_of_train_branches_on_a_stage_name():
    assert _offending(NAME_COMPARED) == []


def test_the_check_finds_a_branch_on_a_stage_name():
    line = 'if run.stage == "vocoder":'
    assert NAME_COMPARED.search(line) and NAME_COMPARED.search("'acoustic' != stage")
    assert not NAME_COMPARED.search('kind=run.stage, plan=run.plan')


def test_only_the_step_chooses_its_forward_and_loss():
    # compile.py and compile_beside.py ask the step (compile, use_compiled); none assigns it
    assert _offending(re.compile(r"\.loss_fn\s*=")) == []


def test_an_unknown_stage_is_named_with_the_stages_there_are(lj_cache):
    with pytest.raises(ValueError, match=r"stage must be one of \('acoustic', 'vocoder'\), got 'gan'"):
        stage_spec("gan")
    with pytest.raises(ValueError, match="got 'gan'"):
        build_run(load("tiny", FAST), lj_cache, stage="gan", with_batches=False)


@pytest.mark.parametrize("name", list(STAGES))
def test_a_plan_sets_the_learning_rate_in_its_stages_own_setting(name):
    spec, cfg = STAGES[name], load("tiny")
    plan = Plan(device="cpu", device_name="cpu", precision="fp32", compile="off", frame_budget=900,
                max_batch_size=4, lr=0.123, world_size=1)
    applied = plan.apply(cfg, spec.lr_setting)
    assert asked_lr(applied, spec.lr_setting) == 0.123
    others = [s.lr_setting for s in STAGES.values() if s.lr_setting != spec.lr_setting]
    assert others and all(asked_lr(applied, o) == asked_lr(cfg, o) for o in others)


def test_the_vocoder_stage_refuses_several_processes(lj_cache, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(UserError, match="the vocoder stage runs on one process; start it without torchrun"):
        build_run(load("tiny", FAST), lj_cache, stage="vocoder", with_batches=False)


def test_the_vocoder_saves_its_optimizer_with_its_step_the_acoustic_model_beside(lj_cache):
    cfg = load("tiny", FAST)
    for name, want in (("acoustic", {"step_fn", "optimizer", "scheduler"}), ("vocoder", {"step_fn"})):
        run = build_run(cfg, lj_cache, stage=name, with_batches=False)
        assert run.spec is STAGES[name] and run.stage == name and set(run.components) == want


def test_an_eager_step_runs_its_own_forward_until_it_is_compiled(lj_cache):
    run = build_run(load("tiny", FAST), lj_cache, with_batches=False)
    step = run.step_fn
    assert step.compile_mode == "off" and not step.compiled
    with pytest.raises(RuntimeError, match="has not been compiled"):
        step.use_compiled(True)
    assert not step.compiled

