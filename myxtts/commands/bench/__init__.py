"""`myxtts bench MODE`: side-by-side measurements that back our performance claims.

Each mode is a module with ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``;
register a new one in :data:`MODES`. Results print as a table and, with ``--json``, as a
record for ``benchmarks/results/``.
"""
from __future__ import annotations

import importlib

from myxtts.commands.common import add_command

# mode name → module implementing it
MODES = {
    "loader": "myxtts.commands.bench.loader",
    "train": "myxtts.commands.bench.train",
    "serve": "myxtts.commands.bench.serve",
}


def add_parser(sub) -> None:
    p = add_command(sub, "bench", "measure the input pipeline and the training step side by side")
    modes = p.add_subparsers(dest="bench_mode", metavar="MODE", required=True)
    for name, module_name in MODES.items():
        module = importlib.import_module(module_name)
        m = add_command(modes, name, module.HELP)
        module.add_arguments(m)
        m.set_defaults(func=module.run)
