"""The OpenAI speech API over HTTP (FastAPI): ``POST /v1/audio/speech`` and friends.

The request's fields, types and ranges are declared in :class:`myxtts.serve.request.SpeechRequest`
as the API defines them; ``stream_format: sse`` sends ``speech.audio.delta`` events carrying
base64 pcm, ``speech.word`` events with each word's start and end, then ``speech.audio.done``,
and our own ``word_timestamps: true`` answers JSON, the audio (base64) beside its words.

``pcm`` streams as it is made; the other formats are sent whole (see encode). Every bad request is
a 4xx in the API's error shape, naming the field (``param``); the server never reads a path from
a request.
"""
from __future__ import annotations

import asyncio
import base64
import json
import secrets

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from myxtts.errors import UserError
from myxtts.serve import encode
from myxtts.serve.engine import Busy, Engine
from myxtts.serve.request import MODEL_ID, BadRequest, parse

RETRY_AFTER_S = 1


def error(message: str, param: str | None, code: str, status: int, kind: str = "invalid_request_error",
          headers: dict | None = None) -> JSONResponse:
    """The API's error shape."""
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}},
                        status_code=status, headers=headers)


def sse(obj: dict) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def create_app(engine: Engine, voices, api_key: str | None = None, log=print) -> FastAPI:
    app = FastAPI(title="MyXTTS", docs_url=None, redoc_url=None, openapi_url=None)
    sr = engine.sample_rate
    hop_seconds = engine.hop / sr
    decoder = engine.synth.cfg.model.decoder

    @app.middleware("http")
    async def authorise(request: Request, call_next):
        if api_key and request.url.path.startswith("/v1/"):
            got = request.headers.get("authorization", "")
            if not secrets.compare_digest(got.encode(), f"Bearer {api_key}".encode()):
                return error("a valid API key is needed: Authorization: Bearer KEY", None, "invalid_api_key",
                             401, "authentication_error")
        return await call_next(request)

    @app.get("/health")
    async def health():
        return {"status": "ok", "in_flight": engine.in_flight, "voices": len(voices.names)}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "myxtts"}]}

    @app.get("/v1/audio/voices")
    async def list_voices():
        return {"voices": voices.listing(hop_seconds)}

    @app.post("/v1/audio/speech")
    async def speech(request: Request):
        try:
            req = parse(await request.body(), voices, decoder)
            sentences = await asyncio.to_thread(engine.sentences, req.input)  # phonemizes: off the loop
        except BadRequest as e:
            return error(str(e), e.param, e.code, e.status, e.kind)
        except UserError as e:
            return error(str(e), "input", "unspeakable_input", 400)
        try:
            job = engine.submit(req.voice, req.speed, sentences, chars=len(req.input))
        except Busy as e:
            return error(f"the server is busy ({e}); try again shortly", None, "server_busy", 503, "server_error",
                         {"Retry-After": str(RETRY_AFTER_S)})
        if req.sse:
            return StreamingResponse(_sse(job, sr, len(req.input)), media_type="text/event-stream")
        if req.format == "pcm" and not req.timed:
            return StreamingResponse(_pcm(job, sr), media_type=encode.CONTENT_TYPES["pcm"])
        try:
            wav, words, failed = await _whole(job)
        finally:
            job.cancel()  # a no-op once done; stops the work of a client that left mid-way
        if failed:
            return error(failed, "input", "synthesis_failed", 500, "server_error")
        data = await asyncio.to_thread(encode.encode, wav, sr, req.format)  # off the loop the streams share
        if req.timed:
            return {"audio": base64.b64encode(data).decode(), "response_format": req.format,
                    "sample_rate": encode.rate_of(req.format, sr), "seconds": round(wav.size / sr, 3),
                    "words": [w.to_dict() for w in words]}
        return Response(data, media_type=encode.CONTENT_TYPES[req.format])

    return app


async def _events(job):
    """The job's events until it is done; the job is cancelled if the consumer stops early."""
    try:
        while True:
            ev = await job.events.get()
            yield ev
            if ev.kind in ("done", "error"):
                return
    finally:
        job.cancel()


async def _pcm(job, sr: int):
    out = encode.PcmStream(sr)
    async for ev in _events(job):
        if ev.kind == "audio":
            yield out.feed(ev.wav)
        elif ev.kind == "done":
            yield out.feed(np.zeros(0, np.float32), last=True)


async def _sse(job, sr: int, chars: int):
    out = encode.PcmStream(sr)
    async for ev in _events(job):
        if ev.kind == "audio":
            yield sse({"type": "speech.audio.delta", "audio": base64.b64encode(out.feed(ev.wav)).decode()})
        elif ev.kind == "words":
            for w in ev.words:
                yield sse({"type": "speech.word", **w.to_dict()})
        elif ev.kind == "done":
            tail = out.feed(np.zeros(0, np.float32), last=True)
            if tail:
                yield sse({"type": "speech.audio.delta", "audio": base64.b64encode(tail).decode()})
            yield sse({"type": "speech.audio.done",
                       "usage": {"input_tokens": chars, "output_tokens": 0, "total_tokens": chars}})
        else:
            yield sse({"type": "error", "error": {"message": ev.message, "type": "server_error"}})


async def _whole(job) -> tuple[np.ndarray, list, str]:
    """All of a job's audio (S,), its words, and the error message if it failed."""
    wavs, words, failed = [], [], ""
    async for ev in _events(job):
        if ev.kind == "audio":
            wavs.append(ev.wav)
        elif ev.kind == "words":
            words += ev.words
        elif ev.kind == "error":
            failed = ev.message
    return (np.concatenate(wavs) if wavs else np.zeros(0, np.float32)), words, failed


def serve_forever(app: FastAPI, host: str, port: int, extra=None) -> None:
    """Run uvicorn (and ``extra``, a coroutine factory for the Wyoming server) until stopped."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    async def main():
        other = asyncio.create_task(extra()) if extra else None
        try:
            await server.serve()  # returns on Ctrl-C or SIGTERM (uvicorn's handlers)
        finally:
            if other is not None:
                other.cancel()
                await asyncio.gather(other, return_exceptions=True)

    asyncio.run(main())
