"""The OpenAI speech API over HTTP (FastAPI): ``POST /v1/audio/speech`` and friends.

The request's fields, types and ranges are declared in :class:`myxtts.serve.request.SpeechRequest`
as the API defines them, and the route takes it as its parameter; ``stream_format: sse`` sends
``speech.audio.delta`` events carrying base64 pcm, ``speech.word`` events with each word's start
and end, then ``speech.audio.done``, and our own ``word_timestamps: true`` answers JSON, the audio
(base64) beside its words (:class:`~myxtts.serve.schemas.TimedSpeech`).

``pcm`` streams as it is made; the other formats are sent whole (see encode). Every bad request is
a 4xx in the API's error shape, naming the field (``param``); the server never reads a path from
a request.

:func:`create_app` holds what every route reads in ``app.state`` (``synth``, the loaded run;
``engine``; ``voices``; ``log``), checks the API key in one middleware and answers every error in
the API's shape; the routes are routers over that state (this module's, and the page's and the
uploads' that :func:`myxtts.serve.page.add_page` adds).
"""
from __future__ import annotations

import asyncio
import base64
import json
import secrets

import numpy as np
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse
from starlette.exceptions import HTTPException

from myxtts.errors import UserError
from myxtts.serve import encode
from myxtts.serve.engine import Busy, Engine
from myxtts.serve.request import MODEL_ID, SpeechRequest, bad_field, check
from myxtts.serve.schemas import APIError, Health, ModelCard, ModelList, TimedSpeech, VoiceList

RETRY_AFTER_S = 1
# a body sent without a Content-Type is read as JSON too (one sent as a form is not)
router = APIRouter(strict_content_type=False)


def sse(obj: dict) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


@router.get("/health", response_model=Health)
async def health(request: Request):
    st = request.app.state
    return Health(status="ok", in_flight=st.engine.in_flight, voices=len(st.voices.names))


@router.get("/v1/models", response_model=ModelList)
async def models():
    return ModelList(data=[ModelCard(id=MODEL_ID, owned_by="myxtts")])


@router.get("/v1/audio/voices", response_model=VoiceList)
async def list_voices(request: Request):
    st = request.app.state
    hop_seconds = st.engine.hop / st.engine.sample_rate
    return VoiceList(voices=st.voices.listing(hop_seconds))


@router.post("/v1/audio/speech", response_model=TimedSpeech)
async def speech(body: SpeechRequest, request: Request):
    """The audio (streamed or whole), or with ``word_timestamps`` the JSON declared above."""
    st = request.app.state
    engine, sr = st.engine, st.engine.sample_rate
    req = check(body, st.voices, st.synth.languages, st.synth.cfg.model.decoder)
    try:  # phonemizes: off the loop
        sentences = await asyncio.to_thread(engine.sentences, req.input, "input", req.language)
    except UserError as e:
        raise APIError(str(e), "input", "unspeakable_input") from None
    try:
        job = engine.submit(req.voice, req.speed, sentences, chars=len(req.input))
    except Busy as e:
        raise APIError(f"the server is busy ({e}); try again shortly", None, "server_busy", 503, "server_error",
                       {"Retry-After": str(RETRY_AFTER_S)}) from None
    if req.sse:
        return StreamingResponse(_sse(job, sr, len(req.input)), media_type="text/event-stream")
    if req.format == "pcm" and not req.timed:
        return StreamingResponse(_pcm(job, sr), media_type=encode.CONTENT_TYPES["pcm"])
    try:
        wav, words, failed = await _whole(job)
    finally:
        job.cancel()  # a no-op once done; stops the work of a client that left mid-way
    if failed:
        raise APIError(failed, "input", "synthesis_failed", 500, "server_error")
    data = await asyncio.to_thread(encode.encode, wav, sr, req.format)  # off the loop the streams share
    if req.timed:
        return TimedSpeech(audio=base64.b64encode(data).decode(), response_format=req.format,
                           sample_rate=encode.rate_of(req.format, sr), seconds=round(wav.size / sr, 3),
                           words=[w.to_dict() for w in words])
    return Response(data, media_type=encode.CONTENT_TYPES[req.format])


async def authorise(request: Request, call_next):
    """Everything under ``/v1/`` needs the key, when the server has one."""
    key = request.app.state.api_key
    if key and request.url.path.startswith("/v1/"):
        got = request.headers.get("authorization", "")
        if not secrets.compare_digest(got.encode(), f"Bearer {key}".encode()):
            return APIError("a valid API key is needed: Authorization: Bearer KEY", None, "invalid_api_key",
                            401, "authentication_error").response()
    return await call_next(request)


async def _api_error(request: Request, exc: APIError):
    return exc.response()


async def _invalid(request: Request, exc: RequestValidationError):
    """A body its schema refused: the first bad field, named."""
    return bad_field(list(exc.errors())).response()


async def _http_error(request: Request, exc: HTTPException):
    """FastAPI's own refusals (no such route or method; a body it could not read at all, the one
    400 it raises) in the API's shape."""
    if exc.status_code == 400:
        return APIError(f"the body is not valid JSON ({exc.detail})", "body", "invalid_json").response()
    code = str(exc.detail).lower().replace(" ", "_")
    return APIError(str(exc.detail), None, code, exc.status_code, headers=exc.headers).response()


def create_app(engine: Engine, voices, api_key: str | None = None, log=print) -> FastAPI:
    """The app over one loaded run: its state, the API key's check, the API's error shape and the
    API's routes (the page adds its own: :func:`myxtts.serve.page.add_page`)."""
    app = FastAPI(title="MyXTTS", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.synth, app.state.engine, app.state.voices = engine.synth, engine, voices
    app.state.api_key, app.state.log = api_key, log
    app.middleware("http")(authorise)
    app.add_exception_handler(APIError, _api_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http_error)
    app.include_router(router)
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
