import dataclasses

from myxtts.observe.diagnose import diagnose
from myxtts.observe.measured import Measured
from myxtts.observe.ranks import STRAGGLER_PCT, find_straggler

from . import synthetic_runs as runs


def rank(r, *, step_ms=400.0, wait=0.0, ib=1.0, compute=None):
    """A rank's figures as summary["ranks"] holds them; the step call is the rest but 2 %."""
    return {"rank": r, "step_ms": step_ms, "collective_wait_pct": wait, "input_bound_pct": ib,
            "compute_pct": 98.0 - ib if compute is None else compute}


def test_a_rank_the_others_wait_for_is_the_straggler_and_its_loader_is_named():
    # ranks 0 and 2 wait half their step in the all-reduce; rank 1 waited for batches instead
    ranks = [rank(0, wait=50.0), rank(1, ib=51.0), rank(2, wait=50.0)]
    s = find_straggler(ranks)
    assert s.rank == 1 and s.cause == "loader" and round(s.over_pct) == 100
    assert s.input_bound_pct == 51.0 and s.median_input_bound_pct == 1.0


def test_a_slower_device_is_told_apart_from_a_slower_loader():
    ranks = [rank(0, wait=40.0), rank(1, wait=40.0), rank(2, wait=1.0), rank(3, wait=40.0)]
    s = find_straggler(ranks)
    assert s.rank == 2 and s.cause == "device"


def test_ranks_within_the_threshold_have_no_straggler():
    # rank 0 waits for rank 1 half the threshold's share of its step: rank 1 is within it
    assert find_straggler([rank(0, wait=STRAGGLER_PCT / 2), rank(1)]) is None
    assert find_straggler([rank(0)]) is None  # one rank: nothing to compare
    assert find_straggler([rank(0, wait=50.0), {**rank(1), "collective_wait_pct": None}]) is None


def test_the_diagnosis_names_the_straggler_with_one_action():
    m, *_ = runs.compute_bound()
    m = dataclasses.replace(m, ranks=[rank(0, wait=50.0), rank(1, ib=51.0)])
    found = [f for f in diagnose(m).findings if f.rule == "straggler"]
    assert len(found) == 1 and found[0].title == "Rank 1 is a straggler"
    assert "its loader: input-bound 51 % against 26 %" in found[0].evidence
    assert found[0].action.startswith("`data.num_workers=") and found[0].severity == "high"
    assert not [f for f in diagnose(Measured(ranks=[rank(0), rank(1)])).findings if f.rule == "straggler"]
