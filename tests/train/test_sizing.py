"""data.frame_budget=auto: the memory search on a simulated peak-memory function, the config it
resolves to (budget, batch cap, learning rate), and a resume that keeps the budget by reading the
run's plan."""
import json
import math

import pytest
import torch

from myxtts.config import load
from myxtts.errors import UserError
from myxtts.train import build
from myxtts.train import sizing as S
from myxtts.train.build import build_run, resolve_plan
from myxtts.train.distributed import DistInfo
from myxtts.train.plan import Plan
from myxtts.train.sizing import size_batches

from .conftest import FAST

GIB = 1 << 30
CUDA = torch.device("cuda", 0)  # only named: the fake probe stands in for every GPU measurement


class FakeMemory:
    """A GPU whose step at budget ``b`` peaks at ``fixed + per_frame * b`` bytes, and which fits
    within 85 % of ``free``."""

    def __init__(self, free=80 * GIB, fixed=2 * GIB, per_frame=400_000):
        self.limit, self.fixed, self.per_frame = S.HEADROOM * free, fixed, per_frame
        self.tried: list[int] = []

    def __call__(self, cfg):  # the probe factory: gets the config at the base budget
        self.cfg = cfg
        return self

    def fits(self, b: int) -> bool:
        self.tried.append(b)
        return self.fixed + self.per_frame * b <= self.limit

    @property
    def answer(self) -> int:
        return int((self.limit - self.fixed) // self.per_frame)


def _auto(*extra):
    return load("tiny", [o for o in FAST if not o.startswith("data.frame_budget")] + list(extra))


def test_search_doubles_then_bisects_below_the_limit():
    m = FakeMemory()
    best, note = S.search_budget(m.fits, 4000, max_budget=10**7)
    assert m.answer * (1 - S.RESOLUTION) - S.MIN_FRAME_BUDGET <= best <= m.answer and "memory" in note
    assert m.tried[:4] == [4000, 8000, 16000, 32000] and len(m.tried) <= S.MAX_TRIALS


def test_search_shrinks_from_a_start_that_does_not_fit():
    m = FakeMemory(free=3 * GIB, fixed=1 * GIB, per_frame=200_000)
    best, _ = S.search_budget(m.fits, 12_000)
    assert m.answer * (1 - S.RESOLUTION) - S.MIN_FRAME_BUDGET <= best <= m.answer < 12_000
    assert S.search_budget(FakeMemory(free=1 * GIB, fixed=2 * GIB).fits, 4000) == \
        (None, f"even data.frame_budget={S.MIN_FRAME_BUDGET} does not fit: use a smaller model")


def test_search_stops_at_its_upper_limit_and_says_what_set_it():
    best, note = S.search_budget(FakeMemory().fits, 4000, max_budget=20_000, bound="the corpus")
    assert best == 20_000 and note == "stopped at 20000 frames: the corpus"


def test_the_corpus_bounds_the_budget_by_updates_per_epoch_and_by_filler():
    # 1,000,000 frames, 2 GPUs x grad_accum 2: 32 updates need batches of at most 7,812 frames.
    assert S.corpus_cap(1_000_000, 4000, per_update=4) == 1_000_000 // (32 * 4)
    assert S.corpus_cap(50_000, 4000) == 4000  # never below the preset's base
    # Filler share falling as the budget halves: 16000 (16 %) -> 8000 (8 %) is kept.
    assert S.within_filler(16_000, 1000, lambda b: b / 1000) == 8000
    assert S.within_filler(16_000, 4000, lambda b: 50.0) == 4000  # not below the base


def test_a_small_corpus_on_a_big_gpu_is_not_one_giant_batch(lj_cache, monkeypatch):
    """The fixture corpus (about 4,300 frames) on a simulated 80 GB GPU that fits far more."""
    asked = _auto("data.base_frame_budget=1000")
    sized, note = size_batches(asked, lj_cache, CUDA, DistInfo(), probe=FakeMemory())
    assert sized.data.frame_budget == 1000 and f"at least {S.MIN_UPDATES} updates per epoch" in note
    monkeypatch.setattr(S, "MIN_UPDATES", 1)  # a corpus large enough for memory to matter
    sized, note = size_batches(asked, lj_cache, CUDA, DistInfo(), probe=FakeMemory())
    from myxtts.data.cache import Cache
    from myxtts.data.sampler import make_sampler
    filler = make_sampler(Cache(lj_cache), sized, "train").padding_report()["filler_pct"]
    assert 1000 < sized.data.frame_budget <= 4300 and filler <= S.MAX_FILLER_PCT, (note, filler)


def test_search_stops_after_its_time_limit_with_the_largest_budget_that_fitted():
    t = iter(range(0, 1000, 10))  # every look at the clock: 10 s later
    m = FakeMemory()
    best, note = S.search_budget(m.fits, 4000, max_budget=10**7, time_limit_s=30, clock=lambda: next(t))
    assert len(m.tried) <= 4 and best == max(b for b in m.tried if b <= m.answer) and "stopped" in note


def test_budget_grows_the_batch_cap_and_the_learning_rate_by_the_square_root_rule():
    cfg = load("tiny")  # base_frame_budget 4000, max_batch_size 16, lr 3e-3
    big = S.with_budget(cfg, 16_000, scale_lr=True)
    assert big.data.frame_budget == 16_000 and big.data.max_batch_size == 64
    assert big.train.lr == pytest.approx(cfg.train.lr * 2.0)  # sqrt(16000 / 4000)
    huge = S.with_budget(cfg, 400_000, scale_lr=True)
    assert huge.train.lr == pytest.approx(cfg.train.lr * S.MAX_LR_SCALE)  # capped
    same = S.with_budget(cfg, 4000, scale_lr=True)
    assert same.train.lr == cfg.train.lr and same.data.max_batch_size == 16


def test_defaults_resolve_on_the_cpu_to_the_preset_budget_and_eager(lj_cache):
    cfg = load("tiny", [o for o in FAST if not o.startswith(("data.frame_budget", "train.compile"))])
    assert cfg.data.frame_budget == "auto" and cfg.train.compile == "auto"
    run = build_run(cfg, lj_cache, with_batches=False)
    assert run.cfg.data.frame_budget == load("tiny").data.base_frame_budget == 4000
    assert run.cfg.train.lr == cfg.train.lr and run.cfg.data.max_batch_size == cfg.data.max_batch_size
    assert run.step_fn.compile_mode == "off" and any("GPU only" in n for n in run.plan.notes)
    assert run.sampler.shapes() == build_run(load("tiny", FAST + ["data.frame_budget=4000"]), lj_cache,
                                             with_batches=False).sampler.shapes()


def test_auto_on_a_gpu_takes_the_measured_budget_and_a_resume_keeps_it(lj_cache, tmp_path, monkeypatch):
    asked = _auto("data.base_frame_budget=1000")  # the fixture corpus holds about 4,300 frames
    mem = FakeMemory(free=4 * GIB, fixed=GIB, per_frame=1_000_000)  # fits about 2,600 frames
    # Memory alone bounds it here: the corpus's own bounds are tested on their own below.
    monkeypatch.setattr(S, "MIN_UPDATES", 1)
    monkeypatch.setattr(S, "MAX_FILLER_PCT", 100.0)
    sized, note = size_batches(asked, lj_cache, CUDA, DistInfo(), probe=mem)
    b = sized.data.frame_budget
    assert mem.answer * (1 - S.RESOLUTION) - S.MIN_FRAME_BUDGET <= b <= mem.answer
    assert mem.cfg.data.frame_budget == 1000  # measured from the base
    assert sized.train.lr == pytest.approx(asked.train.lr * math.sqrt(b / 1000))
    assert sized.data.max_batch_size == math.ceil(asked.data.max_batch_size * b / 1000)
    assert f"data.frame_budget=auto: {b} frames" in note

    plan = Plan("cuda:0", "GPU", "bf16", "cudagraphs", b, sized.data.max_batch_size, sized.train.lr, 1)
    plan.save(tmp_path)
    assert Plan.load(tmp_path) == plan

    def no_measuring(cfg):
        raise AssertionError("a resume must not measure again")

    monkeypatch.setattr(build.S, "size_batches", lambda *a, **k: no_measuring(None))
    again = resolve_plan(asked, lj_cache, saved=Plan.load(tmp_path))  # resumed on this CPU
    assert (again.frame_budget, again.max_batch_size, again.lr) == (b, plan.max_batch_size, plan.lr)
    assert again.apply(asked).data == sized.data and again.apply(asked).train.lr == sized.train.lr
    assert again.compile == "off" and any("resolved again" in n for n in again.notes)


def test_a_budget_set_by_hand_is_neither_measured_nor_scaled(lj_cache):
    cfg = load("tiny", FAST)
    assert size_batches(cfg, lj_cache, CUDA, DistInfo(), probe=lambda c: 1 / 0) == (cfg, "")
    plan = resolve_plan(cfg, lj_cache)
    assert (plan.frame_budget, plan.lr, plan.notes) == (cfg.data.frame_budget, cfg.train.lr, ())


def test_a_plan_file_with_a_missing_or_unknown_field_is_a_clear_error(tmp_path):
    Plan("cpu", "CPU", "fp32", "off", 4000, 16, 1e-3, 1).save(tmp_path)
    d = json.loads((tmp_path / "plan.json").read_text())
    d["surprise"] = d.pop("lr")
    (tmp_path / "plan.json").write_text(json.dumps(d))
    with pytest.raises(UserError, match="plan.json: missing lr; unknown surprise"):
        Plan.load(tmp_path)
    assert Plan.load(tmp_path / "elsewhere") is None


def test_a_gpu_too_small_for_any_batch_is_a_clear_error(lj_cache):
    with pytest.raises(UserError, match="data.frame_budget=auto: even data.frame_budget=64"):
        size_batches(_auto(), lj_cache, CUDA, DistInfo(), probe=FakeMemory(free=GIB, fixed=2 * GIB))
