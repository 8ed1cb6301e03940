"""``myxtts cache verify CACHE [--fix]``: checksums and index consistency; --fix re-prepares
only the broken shards."""
from __future__ import annotations

import os
from pathlib import Path

from myxtts.commands.common import EXIT_FAILED, EXIT_OK, add_command
from myxtts.data.prepare import repair
from myxtts.data.verify import verify


def add_parser(sub) -> None:
    p = add_command(sub, "cache", "verify a prepared cache: checksums and index consistency")
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    v = add_command(csub, "verify", "check checksums and index consistency; --fix re-prepares")
    v.add_argument("cache", help="cache directory written by `myxtts prepare`")
    v.add_argument("--fix", action="store_true", help="re-prepare only the broken shards")
    v.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes")
    v.set_defaults(func=_verify_cmd)


def _verify_cmd(args) -> int:
    problems = verify(args.cache)
    if not problems:
        print(f"{args.cache}: OK")
        return EXIT_OK
    for shard, reason in problems:
        print(f"{args.cache}: {'shard ' * shard.isdigit()}{shard}: {reason}")
    if not args.fix:
        print(f"{len(problems)} problem(s); `myxtts cache verify {args.cache} --fix` re-prepares them")
        return EXIT_FAILED
    repair(Path(args.cache), {s for s, _ in problems}, workers=args.workers)
    left = verify(args.cache)
    for shard, reason in left:
        print(f"{args.cache}: still broken: shard {shard}: {reason}")
    if not left:
        print(f"{args.cache}: repaired, OK")
    return EXIT_FAILED if left else EXIT_OK
