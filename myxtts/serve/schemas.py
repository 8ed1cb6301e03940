"""What the server answers, declared as data: the API's error shape (:class:`APIError`, raised by
any route and turned into ``{"error": {...}}`` in one place) and each JSON answer's model (the
routes declare them as their ``response_model``, so an answer that strays from its schema is a
server error, never a silent change of what clients read).

The speech request itself is declared in :mod:`myxtts.serve.request`.
"""
from __future__ import annotations

from typing import Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel


class ErrorBody(BaseModel):
    message: str
    type: str  # invalid_request_error, authentication_error or server_error, as the API names them
    param: str | None  # the field at fault, or None where no field is
    code: str


class ErrorResponse(BaseModel):
    error: ErrorBody


class APIError(Exception):
    """An answer in the API's error shape: its status, the field it names (``param``) and why."""

    def __init__(self, message: str, param: str | None, code: str = "invalid_value", status: int = 400,
                 kind: str = "invalid_request_error", headers: dict | None = None):
        super().__init__(message)
        self.param, self.code, self.status, self.kind, self.headers = param, code, status, kind, headers

    def response(self) -> JSONResponse:
        body = ErrorResponse(error=ErrorBody(message=str(self), type=self.kind, param=self.param, code=self.code))
        return JSONResponse(body.model_dump(), status_code=self.status, headers=self.headers)


class Health(BaseModel):
    status: Literal["ok"]
    in_flight: int  # requests being spoken now
    voices: int


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class VoiceInfo(BaseModel):
    name: str
    source: str  # training speaker, voices folder, uploaded, no reference...
    reference_seconds: float  # how much of its reference the model hears
    language: str | None = None  # what it speaks unless a request names a language (a speaker's own)

    @classmethod
    def of(cls, voice, hop_seconds: float) -> VoiceInfo:
        seconds = round(voice.reference.frames * hop_seconds, 2)
        return cls(name=voice.name, source=voice.source, reference_seconds=seconds, language=voice.language)


class VoiceList(BaseModel):
    voices: list[VoiceInfo]


class WordTiming(BaseModel):
    word: str
    start: float  # seconds from the start of the request's audio
    end: float


class TimedSpeech(BaseModel):
    """``word_timestamps: true``: the audio file, base64, beside its words."""

    audio: str  # base64 of the file in response_format
    response_format: str
    sample_rate: int  # the file's
    seconds: float
    words: list[WordTiming]


class RunInfo(BaseModel):
    """The loaded run, as :attr:`myxtts.infer.Synthesizer.about` says it."""

    folder: str
    weights: str  # within the run
    why: str  # why these weights were chosen
    step: int | None
    steps_trained: int | None
    eval: dict[str, float] | None  # the periodic evaluation's figures for this step
    report: bool  # GET /v1/report has the run's report.html


class Load(BaseModel):
    in_flight: int
    requests_last_minute: int
    first_audio_p50_ms: float | None  # None: no request finished in the last minute


class UploadLimits(BaseModel):
    max_bytes: int
    max_seconds: float
    kept: bool  # uploads stay after a restart (--voices DIR)


class Status(BaseModel):
    """``GET /v1/status``: what the page shows of the run and the server."""

    run: RunInfo
    load: Load
    formats: list[str]
    pcm_rate: int
    upload: UploadLimits
