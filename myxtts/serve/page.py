"""The page at ``GET /``: type, pick or upload a voice, and listen, in any browser, from the server
alone (static files in the package, no build step, nothing fetched from elsewhere).

The page speaks through the OpenAI API the server already answers (``stream_format: sse``: pcm
pieces it plays as they arrive, and the words it highlights as they are spoken). What it needs
beyond that API is added here, under ``/v1/`` so ``--api-key`` guards it as it guards the rest:

- ``GET /v1/status``: the run served, as the loaded run says it
  (:attr:`myxtts.infer.Synthesizer.about`: its folder, the weights chosen and why, their step,
  the periodic evaluation's figures for them) and the live load (requests in flight, first-audio
  latency p50 over the last minute), the formats and the upload limits;
- ``GET /v1/audio/voices/{name}/reference``: a voice's reference as the model hears it (its mel
  through the server's vocoder), as WAV;
- ``POST /v1/audio/voices``: a voice from a clip (:mod:`myxtts.serve.uploads`);
- ``GET /v1/report``: the run's ``report.html``.
"""
from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from myxtts.rundir import RunDir
from myxtts.serve import encode, uploads
from myxtts.serve.openai_api import error

STATIC = Path(__file__).parent / "static"
LOAD_WINDOW_S = 60.0


def load(engine, now: float | None = None) -> dict:
    """Requests in flight and the first-audio latency of the requests finished in the last minute."""
    now = time.perf_counter() if now is None else now
    recent = [s for t, s in list(engine.first_audio) if now - t <= LOAD_WINDOW_S]
    p50 = float(np.median(recent)) * 1000 if recent else None
    return {"in_flight": engine.in_flight, "requests_last_minute": len(recent),
            "first_audio_p50_ms": round(p50, 1) if p50 is not None else None}


def add_page(app: FastAPI, engine, voices, voices_dir=None, key_required: bool = False, log=print) -> None:
    """The page and its endpoints, on the app :func:`~myxtts.serve.openai_api.create_app` made.
    ``key_required``: the page asks for the API key before its first call, instead of after a 401."""
    index = (STATIC / "index.html").read_text(encoding="utf-8")
    if key_required:
        index = index.replace("<body>", '<body data-key="required">', 1)
    script = (STATIC / "page.js").read_text(encoding="utf-8")
    run = dict(engine.synth.about)  # the loaded run's weights, why, and their evaluation
    report_path = run.pop("report_path")
    report = Path(report_path) if report_path else None
    if voices_dir is None:  # uploads live as long as the server: a folder of its own, removed at exit
        app.state.upload_dir = tempfile.TemporaryDirectory(prefix="myxtts-voices-")
        folder = Path(app.state.upload_dir.name)
        log(f"note: uploaded voices go to {folder} until the server stops (--voices DIR keeps them)")
    else:
        folder = Path(voices_dir)
    store = uploads.Uploads(folder, engine.synth.model, engine.synth.cfg, engine.text_lock)
    references: dict[str, bytes] = {}
    sr = engine.sample_rate

    @app.get("/", response_class=HTMLResponse)
    async def page():
        return HTMLResponse(index)

    @app.get("/page.js")
    async def page_script():
        return Response(script, media_type="text/javascript")

    @app.get("/v1/status")
    async def status():
        return {"run": {**run, "report": report is not None and report.is_file()}, "load": load(engine),
                "formats": list(encode.SUPPORTED), "pcm_rate": encode.PCM_RATE,
                "upload": {"max_bytes": uploads.MAX_BYTES, "max_seconds": uploads.MAX_SECONDS,
                           "kept": voices_dir is not None}}

    @app.get("/v1/report")
    async def run_report():
        if report is None or not report.is_file():
            return error(f"this run has no {RunDir.REPORT} (it is written when training ends)", None, "not_found", 404)
        return HTMLResponse(report.read_text(encoding="utf-8"))

    @app.get("/v1/audio/voices/{name}/reference")
    async def reference(name: str):
        if name not in voices:
            return error(f"unknown voice; this server has: {', '.join(voices.names)}", "name", "invalid_value", 404)
        voice = voices[name]
        if voice.reference.frames == 0:
            return error(f"{name} has no reference: it is the model's voice alone", "name", "no_reference", 404)
        if name not in references:
            def render() -> bytes:
                with engine.text_lock:  # the model's vocoder, between the worker's turns
                    wav = engine.synth.to_wave(voice.reference.mel)
                return encode.encode(np.asarray(wav, dtype=np.float32), sr, "wav")
            references[name] = await asyncio.to_thread(render)
        return Response(references[name], media_type=encode.CONTENT_TYPES["wav"])

    @app.post("/v1/audio/voices")
    async def upload(request: Request):
        try:
            form = await uploads.read_form(request)
            name = uploads.check_name(form, voices, folder)
            data, suffix = uploads.check_clip(form)
            voice = await asyncio.to_thread(store.add, name, data, suffix)
        except uploads.Rejected as e:
            return error(str(e), e.param, e.code, e.status)
        voices.add(voice)
        log(f"voice {name} added from an upload ({len(data)} bytes)")
        hop_seconds = engine.hop / sr
        (listed,) = [v for v in voices.listing(hop_seconds) if v["name"] == name]
        return JSONResponse(listed, status_code=201)
