"""What every command shares: the parser style, the --config/--data/overrides arguments, and
loading a config with a clear error for a misspelt preset."""
from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path

from myxtts.config import PRESETS_DIR, Config, ConfigError, load
from myxtts.errors import UserError
from myxtts.train.watchdog import EXIT_STALLED  # noqa: F401 - 69: a rank stopped arriving; its thread exits

# Exit codes a script or scheduler can rely on.
EXIT_OK = 0
EXIT_FAILED = 1        # the command ran and found a problem (a broken cache, a failed check)
EXIT_USAGE = 2         # bad arguments, settings or input files; the message says which
EXIT_STOPPED = 75      # stopped by a signal or time budget with a checkpoint: run it again to resume
EXIT_INTERRUPTED = 130  # interrupted at once (128 + SIGINT): a second Ctrl-C, or one while starting


class Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each option's default (options without one stay unannotated)."""

    def _get_help_string(self, action):
        if action.default in (None, False, argparse.SUPPRESS) or action.nargs in ("*", "+"):
            return action.help
        return super()._get_help_string(action)


def add_command(sub, name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
    # argparse %-formats help strings (not descriptions): a literal % must be doubled there.
    return sub.add_parser(name, help=help.replace("%", "%%"), description=description or help,
                          formatter_class=Formatter)


def add_run_command(sub, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """A command that builds a run from a config and a cache (profile, tune)."""
    p = add_command(sub, name, help, description)
    add_config(p)
    add_data(p)
    return p


def add_config(p, default: str | None = None) -> None:
    p.add_argument("--config", default=default,
                   help="YAML config or preset name (" + ", ".join(presets()) + ")")


def add_data(p, required: bool = True, more: str = "") -> None:
    p.add_argument("--data", required=required, default=None,
                   help="cache written by `myxtts prepare`" + more)


def add_checkpoint(p) -> None:
    """``--checkpoint`` and ``--step``, as every command that speaks a run takes them: a run's
    weights are chosen by :meth:`myxtts.rundir.RunDir.choose_weights`, and said."""
    p.add_argument("--checkpoint", required=True, metavar="RUN_OR_FILE",
                   help="a run directory (its best weights: the lowest held-out WER of the periodic "
                        "evaluation, else the lowest validation loss, else the newest checkpoint), a "
                        "checkpoint folder or a .safetensors file")
    p.add_argument("--step", type=int, metavar="N", help="a run's weights of step N instead of its best")


def add_seed_device(p) -> None:
    """The options of every command that synthesizes: the pre-net dropout's seed, the device and
    the mel-to-audio step."""
    p.add_argument("--seed", type=int, default=0, help="seed of the pre-net dropout")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--vocoder", metavar="RUN_OR_FILE",
                   help="vocoder run or file (default: the run's own RUN/vocoder if trained, else "
                        "Griffin-Lim, lower quality); griffin-lim: no vocoder")


def add_overrides(p, example: str = "train.max_steps=1000") -> None:
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help=f"settings on top of the config, anywhere on the line, e.g. {example}")


def presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def load_config(name: str | None, overrides: list[str] | None = None) -> Config:
    """``load`` with a "did you mean" for a preset name that is almost right."""
    if name is not None and not Path(name).is_file() and name not in presets():
        close = difflib.get_close_matches(name, presets(), n=1, cutoff=0.5)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"--config {name}: no such file or preset{hint}; presets: "
                          + ", ".join(presets()))
    return load(name, overrides)


def check_output(path: str | Path | None, option: str, folder: bool = False) -> None:
    """Refuse, before any work starts, an output that could never be written: a file where a
    folder must go, a folder where a file must go, or no write permission. Otherwise the error
    would be a traceback after minutes of measuring. Nothing is created here, so a command that
    fails later leaves nothing behind."""
    if path is None:
        return
    p = Path(path)
    if folder and p.exists() and not p.is_dir():
        raise UserError(f"{option} {path}: cannot create the folder (a file is in the way)")
    if not folder and p.is_dir():
        raise UserError(f"{option} {path}: is a folder; give a file name")
    existing = p if folder else p.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{option} {path}: cannot write there ({existing} is a file, not a folder)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: cannot write there (no write permission in {existing})")


def err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
