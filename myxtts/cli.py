"""`myxtts` entry point: parse, build, call. Each subcommand is a module of ``myxtts.commands``
that registers itself through ``add_parser(subparsers)`` and sets ``func``.

``key=value`` settings may stand anywhere on the line, before or after the options, on every
command that takes them.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys

from myxtts import __version__
from myxtts.commands.common import EXIT_INTERRUPTED, EXIT_USAGE, err
from myxtts.config import ConfigError
from myxtts.errors import UserError

# Command modules, in the order `--help` lists them.
COMMANDS = ["prepare", "cache", "train", "synthesize", "serve", "eval", "export", "monitor", "doctor", "profile",
            "tune", "bench", "demo"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="myxtts", description="XTTS-style text-to-speech training that keeps the GPU busy.")
    parser.add_argument("--version", action="version", version=f"myxtts {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"myxtts.commands.{name}").add_parser(sub)
    return parser


def _is_setting(token: str) -> bool:
    return "=" in token and not token.startswith("-") and "." in token.split("=", 1)[0]


def _follows_option(argv: list[str], i: int) -> bool:
    """Whether token ``i`` may be the value of the option before it (``--text a.b=c``)."""
    return i > 0 and argv[i - 1].startswith("-") and "=" not in argv[i - 1]


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, collecting ``section.key=value`` tokens wherever they stand, also before a
    positional argument (which would otherwise take the setting as its value)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    early = [i for i, t in enumerate(argv) if _is_setting(t) and not _follows_option(argv, i)]
    args, extra = parser.parse_known_args([t for i, t in enumerate(argv) if i not in early])
    settings = [argv[i] for i in early] + [t for t in extra if _is_setting(t)]
    rest = [t for t in extra if not _is_setting(t)]
    if rest:
        parser.error("unrecognized arguments: " + " ".join(rest))
    if settings:
        if not hasattr(args, "overrides"):
            parser.error(f"myxtts {args.command} takes no KEY=VALUE settings: " + " ".join(settings))
        args.overrides = list(args.overrides or []) + settings
    return args


@contextlib.contextmanager
def ctrl_c_deferred():
    """A Ctrl-C while modules load is kept until they have loaded, then raised. Raised where it
    lands, it can land inside an extension module's import while C++ calls back into Python
    (torch's does), and a KeyboardInterrupt thrown through that C++ aborts the process
    (``std::terminate``) instead of reaching any handler."""
    got: list[int] = []
    try:
        old = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    except ValueError:  # not the main thread: signals cannot be set here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if got:
        raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    try:
        with ctrl_c_deferred():
            parser = build_parser()  # imports torch: seconds, in which a Ctrl-C is an answer too
    except KeyboardInterrupt:
        err("myxtts: interrupted")
        # Nothing is open yet: leave now, without the interpreter's exit clean-up.
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
    args = parse(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except (UserError, ConfigError) as e:
        err(f"myxtts {args.command}: error: {e}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err(f"myxtts {args.command}: interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
