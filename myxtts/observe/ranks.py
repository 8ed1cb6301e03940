"""The ranks of a DDP run: each rank's own time, the straggler among them, and what the
diagnosis says of it.

Under DDP every rank waits in the gradient all-reduce for the slowest, so every rank's step
takes as long as the slowest rank's; what tells them apart is how much of the step each spent
waiting (``train.collectives``). A rank's own time is its step less that wait: what it spends
waiting for batches (input-bound %, ``train.timers``), in the step call outside the wait (its
device) and between steps (other). The straggler is the rank whose own time is furthest over
the median rank's, when that is over STRAGGLER_PCT; the part of its step furthest over the
median rank's same part says what to look at.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from myxtts.observe.findings import Finding

# A rank whose own time is this much over the median rank's is a straggler. Two gloo ranks of
# the tiny model on a 2-core CPU shared with other work, no rank slowed, 30 steps after warm-up,
# four runs: the slower rank's own time was 3.5, 8.9, 1.8 and 2.4 % over the median of the two
# (each rank trains on its own batches, of other lengths, and the host's other work lands on
# one rank or the other). The threshold is well above that; a rank whose loader sleeps 2 s a
# batch in the same setting (tests/train/test_collectives.py) is far over it.
STRAGGLER_PCT = 25.0
# The others lose this share of their step waiting for the straggler: as much as a highly
# input-bound run (input_rules.INPUT_BOUND_HIGH_PCT) loses to its loader.
STRAGGLER_HIGH_PCT = 20.0
PARTS = ("loader", "device", "other")
_WHAT = {"loader": "its loader", "device": "its device (the step outside the all-reduce)",
         "other": "its time between steps (logging, checkpoints)"}


@dataclass(frozen=True)
class Straggler:
    """The rank every other rank waits for, and the part of its step (``cause``, one of PARTS)
    furthest over the median rank's same part."""
    rank: int
    own_ms: float            # its step less its collective wait
    median_ms: float         # the median rank's own time
    cause: str
    part_ms: float           # the cause's ms a step on this rank ...
    median_part_ms: float    # ... and the median rank's
    input_bound_pct: float
    median_input_bound_pct: float

    @property
    def over_pct(self) -> float:
        return 100.0 * (self.own_ms / self.median_ms - 1.0)

    @property
    def others_lose_pct(self) -> float:
        """The share of the median rank's step it spends waiting for this one."""
        return 100.0 * (self.own_ms - self.median_ms) / self.own_ms


def rank_parts(r: dict) -> dict[str, float] | None:
    """A rank's figures (an entry of ``summary["ranks"]``) as ms a step: each of PARTS and
    ``own``, their sum; None where a figure is missing."""
    need = ("step_ms", "collective_wait_pct", "input_bound_pct", "compute_pct")
    if any(r.get(k) is None for k in need):
        return None
    ms, cw, ib, comp = (r[k] for k in need)
    parts = {"loader": ms * ib / 100, "device": ms * max(0.0, comp - cw) / 100,
             "other": ms * max(0.0, 100 - ib - comp) / 100}
    return {**parts, "own": sum(parts.values())}


def find_straggler(ranks: list[dict]) -> Straggler | None:
    """The slowest rank of ``summary["ranks"]``, where its own time is over STRAGGLER_PCT above
    the median rank's; None otherwise, or with fewer than two ranks measured."""
    parts = {r["rank"]: p for r in ranks if (p := rank_parts(r)) is not None}
    if len(parts) < 2:
        return None
    median = {k: statistics.median(p[k] for p in parts.values()) for k in (*PARTS, "own")}
    rank = max(parts, key=lambda r: parts[r]["own"])
    mine = parts[rank]
    if median["own"] <= 0 or mine["own"] <= median["own"] * (1 + STRAGGLER_PCT / 100):
        return None
    cause = max(PARTS, key=lambda k: mine[k] - median[k])
    ib = {r["rank"]: r["input_bound_pct"] for r in ranks if r["rank"] in parts}
    return Straggler(rank, mine["own"], median["own"], cause, mine[cause], median[cause],
                     ib[rank], statistics.median(ib.values()))


def _action(s: Straggler, num_workers: int | None, cpus: int | None) -> str:
    r = s.rank
    if s.cause == "loader" and num_workers is not None and cpus and num_workers + 1 < cpus:
        return (f"`data.num_workers={num_workers + 1}` (a loader worker more on every rank; rank {r}'s "
                "loader sets the pace of all)")
    if s.cause == "loader":
        return (f"`myxtts doctor` on rank {r}'s host (its loader is slower with the same settings: a busier "
                "host or a slower disk)")
    if s.cause == "device":
        return (f"`myxtts monitor` on rank {r}'s host while it trains (a slower, throttled or shared device "
                "computes the same step slower)")
    return "`myxtts profile` (what runs between the steps: logging, checkpoints)"


def straggler_findings(m) -> list[Finding]:
    """The diagnosis's finding of a straggler among ``m.ranks`` (an ``observe.measured.Measured``)."""
    s = find_straggler(m.ranks)
    if s is None:
        return []
    differs = (f"input-bound {s.input_bound_pct:.0f} % against {s.median_input_bound_pct:.0f} %, "
               if s.cause == "loader" else "")
    lost = s.others_lose_pct
    return [Finding("high" if lost >= STRAGGLER_HIGH_PCT else "medium", f"Rank {s.rank} is a straggler",
                    f"rank {s.rank} takes {s.own_ms:.0f} ms a step of its own (its step less its wait in the "
                    f"all-reduce) against the median rank's {s.median_ms:.0f} ms (+{s.over_pct:.0f} %, > "
                    f"{STRAGGLER_PCT:g} %), and every rank waits for it; what differs is {_WHAT[s.cause]}: "
                    f"{differs}{s.part_ms:.0f} ms a step against {s.median_part_ms:.0f} ms",
                    _action(s, m.settings.num_workers, m.settings.cpu_count), "straggler", lost)]
