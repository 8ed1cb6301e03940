"""``myxtts train --config C --data CACHE --out RUN [k=v ...]``: train (or resume) a run.

Exit codes: 0 finished (or already finished), 2 a setting or input to fix, 75 stopped by a
signal or ``train.time_budget_s`` after writing a checkpoint: run the same command to resume.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from myxtts.commands.common import EXIT_OK, EXIT_STOPPED, add_command, add_config, add_data, add_overrides, load_config
from myxtts.config import Config, load, parse_override
from myxtts.data.cache import with_cache_settings
from myxtts.errors import UserError
from myxtts.observe.runlog import RunLog
from myxtts.train.trainer import train, train_vocoder


def add_parser(sub) -> None:
    p = add_command(sub, "train", "train the acoustic model (or the vocoder)")
    add_config(p)
    add_data(p)
    p.add_argument("--out", required=True, help="run directory; an existing one is resumed")
    p.add_argument("--stage", default="acoustic", choices=["acoustic", "vocoder"],
                   help="what to train")
    p.add_argument("--no-progress", action="store_true", help="plain log lines instead of a bar")
    add_overrides(p)
    p.set_defaults(func=_cmd)


def _cmd(args) -> int:
    cfg = run_config(args)
    out = Path(args.out)
    created = not out.exists()
    try:  # before the run is built: a file in the way is an input error, not a crash later
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = "a file is in the way" if isinstance(e, FileExistsError) else e.strerror
        raise UserError(f"--out {args.out}: cannot create the run folder ({why})") from None
    progress = not args.no_progress and sys.stderr.isatty()
    fn = train_vocoder if args.stage == "vocoder" else train
    extra = {}
    if fn is train and cfg.train.eval_every:
        from myxtts.evaluate.periodic import TrainingEval  # the optional eval extra

        extra["evaluate"] = TrainingEval(cfg)
    try:
        summary = fn(cfg, args.data, args.out, progress=progress, log=RunLog, **extra)
    except BaseException:
        with contextlib.suppress(OSError):  # never in the way of the error being reported
            if created and not any(out.iterdir()):
                out.rmdir()  # a run that never started leaves no empty folder behind
        raise
    return EXIT_STOPPED if summary.get("stopped") else EXIT_OK


def run_config(args) -> Config:
    """A resumed run keeps its saved config; overrides given now still apply on top. A new run
    takes the audio and text settings its cache was prepared with, except those given on the
    command line."""
    saved = Path(args.out) / "config.yaml"
    if saved.is_file() and args.config is None:
        return load(saved, args.overrides)
    cfg = load_config(args.config, args.overrides)
    pinned = {".".join(parse_override(o)[0]) for o in args.overrides}
    cfg, taken = with_cache_settings(cfg, args.data, pinned)
    if taken:
        print(f"using the settings {args.data} was prepared with: {' '.join(taken)}")
    return cfg
