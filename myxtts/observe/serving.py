"""A served model as its users see it over HTTP (``myxtts bench serve``).

The server runs in this process (an ASGI app on uvicorn, on a free loopback port); clients
stream three-sentence texts as pcm (``POST /v1/audio/speech``) with httpx, each client one
request after another. At each concurrency, with batching on (the engine's ``max_batch``) and
off (1: each sentence decoded alone), ``measure`` reports:

- time to first audio, p50 and p95: request sent → first pcm bytes received;
- real-time factor: a request's wall time / the seconds of audio it got, the median;
- audio seconds served per second: all the audio of the rounds / their wall time.

Each setting runs ``rounds`` rounds, batching on and off taking turns (a busy machine's load
falls on both alike), and its figures pool them.
"""
from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import threading
import time

from myxtts.serve.encode import PCM_RATE

TEXTS = [  # three sentences each, of everyday lengths
    "The kettle is on. Would you like some tea? I will bring it to the garden.",
    "Your train leaves at half past nine. Platform four is at the far end. Please have your ticket ready.",
    "It is going to rain this afternoon. Take an umbrella with you. The sun should be back tomorrow.",
    "Thank you for calling. All of our staff are busy right now. Please stay on the line.",
]
PCM_BYTES = 2  # a pcm sample: 16-bit mono


def measure(app, engine, voice: str, levels: list[int], requests: int, rounds: int, say=print) -> list[dict]:
    """Serve ``app`` and, at each number of clients of ``levels``, send ``requests`` requests a
    client in ``voice``, batching on (``engine.max_batch`` as given) and off → one row a
    setting (``summary``), each said as it is done."""
    batch_on, rows = engine.max_batch, []
    with serving(app) as url:
        asyncio.run(_round(url, 1, 2, voice))  # warm-up: first calls load kernels and the phonemizer
        for n in levels:
            got = {b: ([], 0.0) for b in (batch_on, 1)}
            for _ in range(rounds):
                for batch in got:  # on and off in turns
                    engine.max_batch = batch
                    out, wall = asyncio.run(_round(url, n, requests, voice))
                    got[batch] = (got[batch][0] + out, got[batch][1] + wall)
            for batch, (out, wall) in got.items():
                row = {"batching": "on" if batch > 1 else "off", "max_batch": batch, **summary(n, out, wall)}
                rows.append(row)
                say(f"batching {row['batching']:>3}  {n:>2} client(s): first audio p50 "
                    f"{row['first_audio_p50_ms']} ms, p95 {row['first_audio_p95_ms']} ms | RTF "
                    f"{row['rtf_median']} | {row['audio_s_per_s']} audio s/s | {row['failed']} failed "
                    f"of {row['requests']}")
    engine.max_batch = batch_on
    return rows


@contextlib.contextmanager
def serving(app):
    """``app`` on uvicorn in a thread of this process, on a free loopback port → its URL."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def summary(clients: int, out: list, wall: float) -> dict:
    """The figures of one setting from its requests' records ``out`` and its wall time."""
    ok = [r for r in out if "failed" not in r]
    first = [r["first_audio_s"] for r in ok]
    return {"clients": clients, "requests": len(out), "failed": len(out) - len(ok),
            "first_audio_p50_ms": round(1000 * percentile(first, 0.5), 1),
            "first_audio_p95_ms": round(1000 * percentile(first, 0.95), 1),
            "rtf_median": round(statistics.median(r["seconds"] / r["audio_s"] for r in ok), 4),
            "audio_s_per_s": round(sum(r["audio_s"] for r in ok) / wall, 2), "wall_s": round(wall, 2)}


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
        out.append({"first_audio_s": first, "seconds": took, "audio_s": size / PCM_BYTES / PCM_RATE})


async def _round(url: str, clients: int, requests: int, voice: str) -> tuple[list, float]:
    """``clients`` clients, ``requests`` each → (one record per request, the round's wall time)."""
    import httpx

    out: list = []
    async with httpx.AsyncClient(base_url=url, timeout=600) as c:
        t0 = time.perf_counter()
        await asyncio.gather(*(_client(c, k, requests, voice, out) for k in range(clients)))
        return out, time.perf_counter() - t0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
