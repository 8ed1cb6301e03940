"""Prepare throughput: audio-seconds per second per worker, for 1..N workers, on one corpus.

    python benchmarks/prepare_throughput.py [CORPUS] [--workers 1 2] [--json out.json]

Each run prepares into a fresh temporary cache; wall time includes starting the worker
processes, so short corpora understate steady-state throughput.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from myxtts.config import load
from myxtts.data.prepare import prepare

ROOT = Path(__file__).resolve().parent.parent


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(ROOT / "data" / "demo"))
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--json")
    args = ap.parse_args()
    cfg = load()
    results = {"device": cpu_name(), "corpus": args.corpus, "runs": []}
    for w in args.workers:
        tmp = Path(tempfile.mkdtemp())
        t0 = time.perf_counter()
        report = prepare(args.corpus, tmp / "c", cfg, workers=w, progress=False)
        wall = time.perf_counter() - t0
        audio_s = report["audio_hours"] * 3600
        results["runs"].append({"workers": w, "utterances": report["utterances"], "audio_s": audio_s,
                                "wall_s": round(wall, 2),
                                "audio_s_per_s": round(audio_s / wall, 1),
                                "audio_s_per_s_per_worker": round(audio_s / wall / w, 1)})
        print(results["runs"][-1], flush=True)
        shutil.rmtree(tmp)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
