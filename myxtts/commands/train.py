"""``myxtts train --config C --data CACHE --out RUN [--init-from SRC] [k=v ...]``: train (or
resume) a run; with ``--init-from``, a new run starts from trained weights (train/finetune.py);
``--stage vocoder --mels-from RUN`` trains the vocoder on an acoustic model's mels
(train/vocoder.py).

Exit codes: 0 finished (or already finished), 2 a setting or input to fix, 69 under torchrun a
rank stopped arriving (train/watchdog.py), 75 stopped by a signal or ``train.time_budget_s``
after writing a checkpoint: run the same command to resume.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from myxtts.commands.common import EXIT_OK, EXIT_STOPPED, add_command, add_config, add_data, add_overrides, load_config
from myxtts.config import Config, load, parse_override
from myxtts.data.format import with_cache_settings
from myxtts.errors import UserError
from myxtts.observe.runlog import RunLog
from myxtts.rundir import RunDir
from myxtts.train import checkpoint as ckpt
from myxtts.train import finetune
from myxtts.train.plan import Plan
from myxtts.train.stages import stage_spec
from myxtts.train.trainer import train, train_vocoder
from myxtts.train.vocoder import find_teacher


def add_parser(sub) -> None:
    p = add_command(sub, "train", "train the acoustic model (or the vocoder)")
    add_config(p)
    add_data(p)
    p.add_argument("--out", required=True, help="run directory; an existing one is resumed")
    p.add_argument("--stage", default="acoustic", choices=["acoustic", "vocoder"],
                   help="what to train")
    p.add_argument("--init-from", metavar="RUN_OR_CHECKPOINT",
                   help="start a new run from trained weights (a run folder: its best weights, else "
                   f"its newest checkpoint; a checkpoint folder; a {RunDir.MODEL} file), with its "
                   "own data, optimizer and schedule, and the model settings of those weights; "
                   "ignored once --out has a checkpoint: the run resumes from that")
    p.add_argument("--mels-from", metavar="RUN_OR_CHECKPOINT",
                   help="vocoder stage: train on the mels this acoustic model makes of the training "
                   "clips, teacher-forced so that each frame lines up with the recording "
                   "(ground-truth-aligned), instead of the recordings' own mels: the vocoder learns "
                   "to render that model's mels; usually with --init-from a vocoder trained on "
                   "the recordings; ignored once --out has a checkpoint: the run resumes with the "
                   "model it started with")
    p.add_argument("--no-progress", action="store_true", help="plain log lines instead of a bar")
    add_overrides(p)
    p.set_defaults(func=_cmd)


def _cmd(args) -> int:
    out = Path(args.out)
    init = None
    if args.init_from is not None:
        last = ckpt.latest(out)
        if last is not None:  # a fine-tuning run resumes like any run, from its own checkpoint
            print(f"--init-from ignored: {out} resumes from its own checkpoint {last.name}")
        else:  # every mismatch is one line before anything is built or written
            init = finetune.find(args.init_from, args.stage)
            finetune.check_data(init, args.data, stage_spec(args.stage).reads_text, grows=True)
    mels_from = None
    if args.mels_from is not None:
        if args.stage != "vocoder":
            raise UserError("--mels-from names the acoustic model a vocoder learns to render; "
                            "add --stage vocoder")
        last = ckpt.latest(out)
        if last is not None:
            plan = Plan.load(last) or Plan.load(out)
            kept = plan.mels_from if plan else None
            print(f"--mels-from ignored: {out} resumes from its own checkpoint {last.name}, on the "
                  + (f"mels of {finetune.describe_origin(kept)}" if kept else "recordings' mels"))
        else:
            mels_from = find_teacher(args.mels_from, args.data)
    cfg = run_config(args, init)
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

        extra["evaluate"] = TrainingEval(cfg, out)
    if mels_from is not None:
        extra["mels_from"] = mels_from
    try:
        summary = fn(cfg, args.data, args.out, progress=progress, log=RunLog, init=init, **extra)
    except BaseException:
        with contextlib.suppress(OSError):  # never in the way of the error being reported
            if created and not any(out.iterdir()):
                out.rmdir()  # a run that never started leaves no empty folder behind
        raise
    return EXIT_STOPPED if summary.get("stopped") else EXIT_OK


def run_config(args, init: finetune.Source | None = None) -> Config:
    """A resumed run keeps its saved config; overrides given now still apply on top. A new run
    takes the audio and text settings its cache was prepared with, except those given on the
    command line. A run started from trained weights (``init``) takes the model settings of
    those weights instead of the config's, and keeps them when it resumes."""
    saved = RunDir(args.out).config
    if saved.is_file() and args.config is None:
        cfg = load(saved, args.overrides, saved=True)
    else:
        cfg = load_config(args.config, args.overrides)
        pinned = {".".join(parse_override(o)[0]) for o in args.overrides}
        cfg, taken = with_cache_settings(cfg, args.data, pinned)
        if taken:
            print(f"using the settings {args.data} was prepared with: {' '.join(taken)}")
    if init is not None:
        trained, where = init.cfg, init.path
    elif args.init_from is not None and saved.is_file():
        trained, where = load(saved, saved=True), saved
    else:
        return cfg
    cfg, note = finetune.configure(cfg, trained, where, args.overrides, stage_spec(args.stage).weights_section)
    if note:
        print(note)
    return cfg
