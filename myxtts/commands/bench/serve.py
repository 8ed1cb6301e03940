"""`myxtts bench serve`: what a served model gives its users, as they see it over HTTP.

The server runs in this process (its engine, the FastAPI app on uvicorn, on a free loopback
port); clients stream three-sentence texts as pcm (``POST /v1/audio/speech``) with httpx, each
client one request after another. At each concurrency (``--clients``, default 1, 4 and 16), and
with batching on (``--max-batch``) and off (1: each sentence decoded alone), it reports:

- time to first audio, p50 and p95: request sent → first pcm bytes received;
- real-time factor: a request's wall time / the seconds of audio it got, the median;
- audio seconds served per second: all the audio of the rounds / their wall time.

Each setting runs ``--rounds`` rounds, batching on and off taking turns, and its figures pool them.

Figures are of this machine as it was: on a shared machine, other work slows them.
"""
from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
from pathlib import Path

from myxtts.commands.common import check_output, err
from myxtts.errors import UserError

HELP = "a served model's time to first audio, real-time factor and throughput at 1, 4 and 16 clients"
TEXTS = [  # three sentences each, of everyday lengths
    "The kettle is on. Would you like some tea? I will bring it to the garden.",
    "Your train leaves at half past nine. Platform four is at the far end. Please have your ticket ready.",
    "It is going to rain this afternoon. Take an umbrella with you. The sun should be back tomorrow.",
    "Thank you for calling. All of our staff are busy right now. Please stay on the line.",
]


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


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


async def _client(c, k: int, n: int, voice: str, out: list) -> None:
    for i in range(n):
        body = {"model": "myxtts", "input": TEXTS[(k + i) % len(TEXTS)], "voice": voice, "response_format": "pcm"}
        t0 = time.perf_counter()
        first, size = None, 0
        async with c.stream("POST", "/v1/audio/speech", json=body) as r:
            if r.status_code != 200:
                out.append({"failed": r.status_code})
                await r.aread()
                continue
            async for chunk in r.aiter_bytes():
                if first is None and chunk:
                    first = time.perf_counter() - t0
                size += len(chunk)
        took = time.perf_counter() - t0
        out.append({"first_audio_s": first, "seconds": took, "audio_s": size / 2 / 24000})


async def _round(url: str, clients: int, requests: int, voice: str) -> tuple[list, float]:
    """``clients`` clients, ``requests`` each → (one record per request, the round's wall time)."""
    import httpx

    out: list = []
    async with httpx.AsyncClient(base_url=url, timeout=600) as c:
        t0 = time.perf_counter()
        await asyncio.gather(*(_client(c, k, requests, voice, out) for k in range(clients)))
        return out, time.perf_counter() - t0


def summary(clients: int, out: list, wall: float) -> dict:
    ok = [r for r in out if "failed" not in r]
    first = [r["first_audio_s"] for r in ok]
    return {"clients": clients, "requests": len(out), "failed": len(out) - len(ok),
            "first_audio_p50_ms": round(1000 * percentile(first, 0.5), 1),
            "first_audio_p95_ms": round(1000 * percentile(first, 0.95), 1),
            "rtf_median": round(statistics.median(r["seconds"] / r["audio_s"] for r in ok), 4),
            "audio_s_per_s": round(sum(r["audio_s"] for r in ok) / wall, 2), "wall_s": round(wall, 2)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args) -> int:
    from myxtts.commands.serve import require

    require()
    import uvicorn

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
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(engine, voices), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        asyncio.run(_round(url, 1, 2, voice))  # warm-up: first calls load kernels and the phonemizer
        for n in levels:
            got = {b: ([], 0.0) for b in (args.max_batch, 1)}
            for _ in range(args.rounds):
                for batch in got:  # on and off in turns
                    engine.max_batch = batch
                    out, wall = asyncio.run(_round(url, n, args.requests, voice))
                    got[batch] = (got[batch][0] + out, got[batch][1] + wall)
            for batch, (out, wall) in got.items():
                row = {"batching": "on" if batch > 1 else "off", "max_batch": batch, **summary(n, out, wall)}
                rows.append(row)
                err(f"batching {row['batching']:>3}  {n:>2} client(s): first audio p50 {row['first_audio_p50_ms']} ms, "
                    f"p95 {row['first_audio_p95_ms']} ms | RTF {row['rtf_median']} | "
                    f"{row['audio_s_per_s']} audio s/s | {row['failed']} failed of {row['requests']}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        engine.stop()
    synth = engine.synth
    result = {"checkpoint": str(synth.meta["path"]), "step": synth.meta["step"], "device": device_name(),
              "vocoder": "griffin-lim" if synth.to_wave.griffin_lim else synth.to_wave.name, "voice": voice,
              "requests_per_client": args.requests, "rounds": args.rounds, "texts": TEXTS, "rows": rows}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0
