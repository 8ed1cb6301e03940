import json
import os
import subprocess
import sys

from .conftest import FAST, ROOT


def test_a_rank_with_a_slow_loader_is_named_the_straggler(lj_cache, tmp_path):
    """Rank 1's loader sleeps 2 s before each batch (tests/train/slow_rank.py): rank 0 waits for
    it in the all-reduce, and the summary, the log and the closing diagnosis say so."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_port", str(28000 + os.getpid() % 1000), "-m", "tests.train.slow_rank", "1", "2.0",
           "train", "--config", "tiny", "--data", str(lj_cache), "--out", str(out), "--no-progress", *FAST,
           "train.max_steps=6", "train.checkpoint_every=1000"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    fast, slow = summary["ranks"]
    assert (fast["rank"], slow["rank"]) == (0, 1)
    assert slow["input_bound_pct"] > fast["input_bound_pct"]
    assert fast["collective_wait_pct"] > slow["collective_wait_pct"]
    found = [f for f in summary["diagnosis"]["findings"] if f["rule"] == "straggler"]
    assert [f["title"] for f in found] == ["Rank 1 is a straggler"], summary["diagnosis"]
    assert "what differs is its loader: input-bound" in found[0]["evidence"]
    # what the command prints: each rank's figures as it trains, then the straggler and its action
    err = done.stderr
    assert "| ranks: 0 " in err and "), 1 " in err
    assert "Rank 1 is a straggler: rank 1 takes" in err and "next: `data.num_workers=1`" in err, err[-3000:]
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [len(rec["ranks"]) for rec in logged if rec["loss"] is not None] == [2] * 6
