"""observe.measure, the one harness: every shape compiled and warmed up before anything is timed,
the loop's own steps timed with their phases, FLOPs of exactly the timed steps."""
import math

import pytest

from myxtts.config import load
from myxtts.observe.measure import WARM_PASSES, FixedBatches, measure
from myxtts.train.build import build_run

from ..train.conftest import FAST
from .test_profile import observe_cache  # noqa: F401 (fixture)


@pytest.fixture
def eager_run(observe_cache):  # noqa: F811
    return build_run(load("tiny", FAST), observe_cache, with_batches=False)


def test_eager_steps_are_timed_after_one_pass_over_every_shape(eager_run):
    batches = FixedBatches(eager_run.cache, eager_run.cfg, eager_run.device)
    assert len(batches) == len(eager_run.shapes) == 2  # two buckets, one shape each
    assert [tuple(b.tensors["mel"].shape[:2]) for b in batches.batches] == [(s[0], s[2]) for s in batches.shapes]
    m = measure(eager_run, 6, batches=batches, flops=True)
    assert m["steps"] == 6 and m["warmup_passes"] == WARM_PASSES["off"] == 1
    assert m["compile_s"] is None and m["recompiles_after_warmup"] == 0 and math.isfinite(m["loss"])
    assert set(m["phase_ms"]) == {"forward", "backward", "optimizer"} and all(v > 0 for v in m["phase_ms"].values())
    assert sum(m["phase_ms"].values()) <= m["step_ms"] * 1.05  # phases lie within the step
    assert len(m["step_by_shape"]) == 2 and all(v["n"] == 3 for v in m["step_by_shape"].values())
    # Three timed steps of each shape: the FLOPs are those of exactly these steps.
    assert m["flops"] == 3 * sum(m["flops_by_shape"].values()) > 0
    assert m["mfu_pct"] is None and m["mfu_basis"]  # no peak for a CPU


def test_a_compiled_step_compiles_every_shape_first_and_recompiles_nothing(observe_cache):  # noqa: F811
    run = build_run(load("tiny", FAST), observe_cache, compile="default", backend="aot_eager",
                    with_batches=False)
    batches = FixedBatches(run.cache, run.cfg, run.device)
    m = measure(run, 2, batches=batches)
    assert m["warmup_passes"] == WARM_PASSES["default"] == 2
    assert set(m["compile_s_by_shape"]) == {"x".join(map(str, s)) for s in batches.shapes}
    assert m["graphs_compiled_in_warmup"] >= 2 and m["recompiles_after_warmup"] == 0


def test_a_time_limit_stops_the_timed_steps_early(eager_run):
    m = measure(eager_run, 1000, seconds=0.0)
    assert m["steps"] == 1  # the first step runs; the next would overrun
