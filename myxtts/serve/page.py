"""The page at ``GET /``: type, pick or upload a voice, pick a language the model speaks, and
listen, in any browser, from the server alone (static files in the package, no build step,
nothing fetched from elsewhere).

The page speaks through the OpenAI API the server already answers (``stream_format: sse``: pcm
pieces it plays as they arrive, and the words it highlights as they are spoken). What it needs
beyond that API is added here, under ``/v1/`` so ``--api-key`` guards it as it guards the rest:

- ``GET /v1/status``: the run served, as the loaded run says it
  (:attr:`myxtts.infer.Synthesizer.about`: its folder, the weights chosen and why, their step,
  the periodic evaluation's figures for them) and the live load (requests in flight, first-audio
  latency p50 over the last minute), the formats and the upload limits;
- ``GET /v1/audio/voices/{name}/reference``: a voice's reference as the model hears it (its mel
  through the server's vocoder), as WAV;
- ``POST /v1/audio/voices``: a voice from a clip (:mod:`myxtts.serve.uploads`, its own router);
- ``GET /v1/report``: the run's ``report.html``.
"""
from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import numpy as np
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from myxtts.rundir import RunDir
from myxtts.serve import encode, uploads
from myxtts.serve.schemas import APIError, RunInfo, Status, UploadLimits

STATIC = Path(__file__).parent / "static"
LOAD_WINDOW_S = 60.0


def load(engine, now: float | None = None) -> dict:
    """Requests in flight and the first-audio latency of the requests finished in the last minute."""
    now = time.perf_counter() if now is None else now
    recent = [s for t, s in list(engine.first_audio) if now - t <= LOAD_WINDOW_S]
    p50 = float(np.median(recent)) * 1000 if recent else None
    return {"in_flight": engine.in_flight, "requests_last_minute": len(recent),
            "first_audio_p50_ms": round(p50, 1) if p50 is not None else None}


@dataclass
class Page:
    """What the page's routes read beside the app's run, engine and voices."""

    index: str  # the page's HTML
    script: str
    run: dict  # the loaded run's weights, why, and their evaluation (Synthesizer.about)
    report: Path | None  # where the run's report.html is written when training ends
    references: dict[str, bytes] = field(default_factory=dict)  # voice → its reference as WAV, once made

    def has_report(self) -> bool:
        return self.report is not None and self.report.is_file()


router = APIRouter()


@router.get("/", response_class=HTMLResponse)
async def page(request: Request):
    return HTMLResponse(request.app.state.page.index)


@router.get("/page.js")
async def page_script(request: Request):
    return Response(request.app.state.page.script, media_type="text/javascript")


@router.get("/v1/status", response_model=Status)
async def status(request: Request):
    st = request.app.state
    return Status(run=RunInfo(**st.page.run, report=st.page.has_report()), load=load(st.engine),
                  formats=list(encode.SUPPORTED), pcm_rate=encode.PCM_RATE,
                  upload=UploadLimits(max_bytes=uploads.MAX_BYTES, max_seconds=uploads.MAX_SECONDS,
                                      kept=st.uploads.kept))


@router.get("/v1/report", response_class=HTMLResponse)
async def run_report(request: Request):
    pg: Page = request.app.state.page
    if not pg.has_report():
        raise APIError(f"this run has no {RunDir.REPORT} (it is written when training ends)", None, "not_found", 404)
    return HTMLResponse(pg.report.read_text(encoding="utf-8"))


@router.get("/v1/audio/voices/{name}/reference")
async def reference(name: str, request: Request):
    """The voice's reference mel through the server's vocoder, as WAV: the engine's worker
    vocodes it between two turns of speaking."""
    st = request.app.state
    if name not in st.voices:
        raise APIError(f"unknown voice; this server has: {', '.join(st.voices.names)}", "name", "invalid_value", 404)
    voice = st.voices[name]
    if voice.reference.frames == 0:
        raise APIError(f"{name} has no reference: it is the model's voice alone", "name", "no_reference", 404)
    made = st.page.references
    if name not in made:
        wav = await asyncio.wrap_future(st.engine.call(st.synth.to_wave, voice.reference.mel))
        made[name] = await asyncio.to_thread(encode.encode, np.asarray(wav, dtype=np.float32),
                                             st.engine.sample_rate, "wav")
    return Response(made[name], media_type=encode.CONTENT_TYPES["wav"])


def language_options(languages: list[str]) -> str:
    """The language picker's options: the model's languages, its own first and chosen."""
    return "".join(f'<option value="{escape(code)}"{" selected" if i == 0 else ""}>{escape(code)}</option>'
                   for i, code in enumerate(languages))


def add_page(app: FastAPI, engine, voices_dir=None, key_required: bool = False, log=print) -> None:
    """The page, its endpoints and uploads, on the app :func:`~myxtts.serve.openai_api.create_app`
    made over ``engine`` (the voices are the app's state). ``key_required``: the page asks for the API key before its
    first call, instead of after a 401."""
    index = (STATIC / "index.html").read_text(encoding="utf-8")
    index = index.replace("<!-- the model's languages -->", language_options(engine.synth.languages), 1)
    if key_required:
        index = index.replace("<body>", '<body data-key="required">', 1)
    run = dict(engine.synth.about)
    report_path = run.pop("report_path")
    app.state.page = Page(index, (STATIC / "page.js").read_text(encoding="utf-8"), run,
                          Path(report_path) if report_path else None)
    if voices_dir is None:  # uploads live as long as the server: a folder of its own, removed at exit
        app.state.upload_dir = tempfile.TemporaryDirectory(prefix="myxtts-voices-")
        folder = Path(app.state.upload_dir.name)
        log(f"note: uploaded voices go to {folder} until the server stops (--voices DIR keeps them)")
    else:
        folder = Path(voices_dir)
    app.state.uploads = uploads.Uploads(folder, engine, kept=voices_dir is not None)
    app.include_router(router)
    app.include_router(uploads.router)
