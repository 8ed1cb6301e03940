"""`myxtts bench MODE`: side-by-side measurements that back our performance claims.

Each mode is a module with ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``;
register a new one in :data:`MODES`. Results print as a table and, with ``--json``, as a
record for ``benchmarks/results/``.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import torch

# mode name → module implementing it
MODES = {
    "loader": "myxtts.bench.loader",
    "train": "myxtts.bench.train",
}


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="measure the input pipeline (and more) side by side")
    modes = p.add_subparsers(dest="bench_mode", metavar="MODE", required=True)
    for name, module_name in MODES.items():
        module = importlib.import_module(module_name)
        m = modes.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(m)
        m.set_defaults(func=module.run)


def device_name() -> str:
    """The GPU's name, or the CPU model and core count from /proc/cpuinfo."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model} ({cores} cores)"
