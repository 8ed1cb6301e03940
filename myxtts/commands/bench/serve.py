"""`myxtts bench serve`: what a served model gives its users, as they see it over HTTP
(``observe.serving`` measures it and defines every figure).

At each concurrency (``--clients``, default 1, 4 and 16), with batching on (``--max-batch``) and
off, it reports time to first audio (p50, p95), the median real-time factor and the audio seconds
served per second, pooled over ``--rounds`` rounds.

Figures are of this machine as it was: on a shared machine, other work slows them.
"""
from __future__ import annotations

import json
from pathlib import Path

from myxtts.commands.common import check_output, err
from myxtts.errors import UserError

HELP = "a served model's time to first audio, real-time factor and throughput at 1, 4 and 16 clients"


def add_arguments(p) -> None:
    p.add_argument("--checkpoint", required=True, metavar="RUN_OR_FILE", help="the run to serve")
    p.add_argument("--vocoder", metavar="RUN_OR_FILE", help="as for serve (default: the run's own, else Griffin-Lim)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--data", metavar="CACHE", help="as for serve: its speakers become voices")
    p.add_argument("--clients", default="1,4,16", help="concurrent clients, a comma list")
    p.add_argument("--requests", type=int, default=4, help="requests per client at each concurrency")
    p.add_argument("--max-batch", type=int, default=16, help="sentences decoded together with batching on")
    p.add_argument("--rounds", type=int, default=2,
                   help="rounds of each setting, batching on and off taking turns (a busy machine's "
                        "load falls on both alike)")
    p.add_argument("--voice", help="the voice every request asks for (default: the first listed, a training "
                                   "speaker where the run has its cache)")
    p.add_argument("--json", help="also write the results here")


def run(args) -> int:
    from myxtts.commands.serve import require

    require()
    from myxtts.observe.serving import TEXTS, measure
    from myxtts.serve import build
    from myxtts.serve.openai_api import create_app
    from myxtts.train.precision import device_name

    check_output(args.json, "--json")
    try:
        levels = [int(x) for x in args.clients.split(",")]
    except ValueError:
        raise UserError(f"--clients {args.clients}: give a comma list of numbers, e.g. 1,4,16") from None
    if min(levels) < 1 or min(args.requests, args.max_batch, args.rounds) < 1:
        raise UserError("--clients, --requests, --max-batch and --rounds must be at least 1")
    engine, voices = build(args.checkpoint, args.vocoder, args.device, args.data, None, args.max_batch,
                           max(levels) + 1, log=lambda m: None)
    voice = args.voice or voices.names[0]
    if voice not in voices:
        raise UserError(f"--voice {voice}: no such voice; the run has {', '.join(voices.names)}")
    try:
        rows = measure(create_app(engine, voices), engine, voice, levels, args.requests, args.rounds, say=err)
    finally:
        engine.stop()
    synth = engine.synth
    result = {"checkpoint": str(synth.meta["path"]), "step": synth.meta["step"], "device": device_name(),
              "vocoder": "griffin-lim" if synth.to_wave.griffin_lim else synth.to_wave.name, "voice": voice,
              "requests_per_client": args.requests, "rounds": args.rounds, "texts": TEXTS, "rows": rows}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0
