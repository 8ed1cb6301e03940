"""`myxtts bench MODE`: side-by-side measurements that back our performance claims.

Each mode is a module with ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``;
register a new one in :data:`MODES`. Results print as a table and, with ``--json``, as a
record for ``benchmarks/results/``.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path

from myxtts.commands.common import add_command
from myxtts.config import Config
from myxtts.errors import UserError

DEMO = Path(__file__).resolve().parents[3] / "data" / "demo"

# mode name → module implementing it
MODES = {
    "loader": "myxtts.commands.bench.loader",
    "train": "myxtts.commands.bench.train",
}


def add_parser(sub) -> None:
    p = add_command(sub, "bench", "measure the input pipeline and the training step side by side")
    modes = p.add_subparsers(dest="bench_mode", metavar="MODE", required=True)
    for name, module_name in MODES.items():
        module = importlib.import_module(module_name)
        m = add_command(modes, name, module.HELP)
        module.add_arguments(m)
        m.set_defaults(func=module.run)


def demo_cache(cfg: Config) -> Path:
    """The bundled demo corpus, prepared once per audio/text setting under ~/.cache, for the
    bench modes run without --data."""
    from myxtts.data.cache import settings_of

    if not (DEMO / "metadata.csv").is_file():
        raise UserError(f"{DEMO}: demo corpus not found; pass --data CACHE")
    key = hashlib.sha256(json.dumps(settings_of(cfg), sort_keys=True).encode()).hexdigest()[:12]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    out = base / "myxtts" / "bench" / f"demo-{key}"
    if not (out / "meta.json").is_file():
        from myxtts.data.prepare import prepare

        print(f"preparing the demo corpus into {out} (once)")
        prepare(DEMO, out, cfg, workers=os.cpu_count() or 1, progress=False)
    return out
