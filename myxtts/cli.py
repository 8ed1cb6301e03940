"""`myxtts` entry point: parse, build, call. Each subcommand lives with the code it drives and
registers itself through an ``add_parser(subparsers)`` function that sets ``func``."""
from __future__ import annotations

import argparse
import importlib
import sys

from myxtts import __version__
from myxtts.config import ConfigError
from myxtts.errors import UserError

# Modules that provide subcommands, in the order `--help` lists them.
COMMANDS = [
    "myxtts.data.prepare",
    "myxtts.data.cache",
    "myxtts.train.trainer",
    "myxtts.infer",
    "myxtts.observe.monitor",
    "myxtts.observe.doctor",
    "myxtts.observe.profile",
    "myxtts.observe.tune",
    "myxtts.bench",
    "myxtts.demo",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="myxtts", description="XTTS-style text-to-speech training that keeps the GPU busy.")
    parser.add_argument("--version", action="version", version=f"myxtts {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UserError, ConfigError) as e:
        print(f"myxtts {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"myxtts {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
