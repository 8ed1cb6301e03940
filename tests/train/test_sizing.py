"""data.frame_budget=auto: the memory search on a simulated peak-memory function, the config it
resolves to (budget, batch cap, learning rate), and a resume that keeps the budget."""
import math

import pytest
import torch

from myxtts.config import load
from myxtts.errors import UserError
from myxtts.train import sizing as S
from myxtts.train.build import build_run, size_batches
from myxtts.train.distributed import DistInfo

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


def test_search_stops_at_the_corpus_size():
    best, note = S.search_budget(FakeMemory().fits, 4000, max_budget=20_000)
    assert best == 20_000 and "whole corpus" in note


def test_search_stops_after_its_time_limit_with_the_largest_budget_that_fitted():
    t = iter(range(0, 1000, 10))  # every look at the clock: 10 s later
    m = FakeMemory()
    best, note = S.search_budget(m.fits, 4000, max_budget=10**7, time_limit_s=30, clock=lambda: next(t))
    assert len(m.tried) <= 4 and best == max(b for b in m.tried if b <= m.answer) and "stopped" in note


def test_budget_grows_the_batch_cap_and_the_learning_rate_by_the_square_root_rule():
    cfg = load("tiny")  # base_frame_budget 4000, max_batch_size 16, lr 2e-3
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
    assert run.step_fn.compile_mode == "off" and "GPU only" in run.budget_note
    assert run.sampler.shapes() == build_run(load("tiny", FAST + ["data.frame_budget=4000"]), lj_cache,
                                             with_batches=False).sampler.shapes()


def test_auto_on_a_gpu_takes_the_measured_budget_and_a_resume_keeps_it(lj_cache, tmp_path):
    asked = _auto("data.base_frame_budget=1000")  # the fixture corpus holds about 4,300 frames
    mem = FakeMemory(free=4 * GIB, fixed=GIB, per_frame=1_000_000)  # fits about 2,600 frames
    sized, note = size_batches(asked, lj_cache, CUDA, DistInfo(), probe=mem)
    b = sized.data.frame_budget
    assert mem.answer * (1 - S.RESOLUTION) - S.MIN_FRAME_BUDGET <= b <= mem.answer
    assert mem.cfg.data.frame_budget == 1000  # measured from the base
    assert sized.train.lr == pytest.approx(asked.train.lr * math.sqrt(b / 1000))
    assert sized.data.max_batch_size == math.ceil(asked.data.max_batch_size * b / 1000)
    assert f"data.frame_budget=auto: {b} frames" in note

    S.as_saved(asked, sized).save(tmp_path / "config.yaml")
    assert S.chosen_budget(tmp_path) == b

    def no_measuring(cfg):
        raise AssertionError("a resume must not measure again")

    again, note = size_batches(asked, lj_cache, CUDA, DistInfo(), given=S.chosen_budget(tmp_path),
                               probe=no_measuring)
    assert again == sized and "as chosen when this run started" in note
    saved = load(tmp_path / "config.yaml")  # training again from the saved file: same settings
    assert size_batches(saved, lj_cache, CUDA, DistInfo(), probe=no_measuring)[0] == sized


def test_a_budget_set_by_hand_is_neither_measured_nor_scaled(lj_cache, tmp_path):
    cfg = load("tiny", FAST)
    assert size_batches(cfg, lj_cache, CUDA, DistInfo(), probe=lambda c: 1 / 0) == (cfg, "")
    assert S.as_saved(cfg, S.with_budget(cfg, 9000, scale_lr=True)) == cfg
    assert S.chosen_budget(tmp_path) is None


def test_a_gpu_too_small_for_any_batch_is_a_clear_error(lj_cache):
    with pytest.raises(UserError, match="data.frame_budget=auto: even data.frame_budget=64"):
        size_batches(_auto(), lj_cache, CUDA, DistInfo(), probe=FakeMemory(free=GIB, fixed=2 * GIB))
