"""The OpenAI speech request, declared as data: :class:`SpeechRequest` (pydantic) holds each field's
type, range and default, and is the speech route's parameter, so FastAPI checks a body against it
before the route runs; :func:`bad_field` words the first bad field of a failed check as the API's
error (:class:`BadRequest`, the code, the field named).

What the declaration cannot say (it needs the server: its voices, formats written here, the
model's languages and decoder) is checked after it, in :func:`check`, in one place. :func:`parse` is both steps
for one body outside HTTP.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from myxtts.serve import encode
from myxtts.serve.schemas import APIError
from myxtts.voice import default_language

MAX_INPUT = 4096
SPEED_RANGE = (0.25, 4.0)
STREAM_FORMATS = ("audio", "sse")
MODEL_ID = "myxtts"
BadRequest = APIError  # what a bad field is answered with: the API's error, 400 unless said


class VoiceId(BaseModel):
    model_config = ConfigDict(strict=True)
    id: str


class SpeechRequest(BaseModel):
    """``POST /v1/audio/speech``'s body, as the API defines it, and two fields of our own: the
    words' times, and the text's language as XTTS servers take it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    model: str = Field(MODEL_ID, description="a string (any name: this server has one model)")
    input: str = Field(max_length=MAX_INPUT, description=f"a string of text to speak, 1 to {MAX_INPUT} characters")
    voice: str | VoiceId = Field(description='a name from GET /v1/audio/voices, or {"id": name}')
    response_format: Literal[encode.FORMATS] | None = Field(  # type: ignore[valid-type]
        None, description=f"one of {', '.join(encode.FORMATS)} (mp3 by default, pcm for sse)")
    speed: float = Field(1.0, ge=SPEED_RANGE[0], le=SPEED_RANGE[1],
                         description=f"a number from {SPEED_RANGE[0]} to {SPEED_RANGE[1]}, dividing the durations")
    stream_format: Literal[STREAM_FORMATS] = Field(  # type: ignore[valid-type]
        "audio", description=f"one of {', '.join(STREAM_FORMATS)}")
    instructions: str | None = Field(None, description="none: this model takes no instructions")
    word_timestamps: bool = Field(False, description="true or false: the audio as JSON, beside its words")
    language: str | None = Field(None, description="a language code the model speaks, as the page lists them "
                                                   "(default: the model's own)")


@dataclass(frozen=True)
class Speech:
    """A checked request."""

    input: str
    voice: object  # the server's Voice
    format: str
    speed: float
    sse: bool
    timed: bool
    language: str  # a code the model speaks


def bad_field(errors: list[dict]) -> BadRequest:
    """The first bad field of a failed validation (an unknown field before the others), worded
    with its description. ``errors`` are pydantic's; FastAPI's start their location with "body"."""
    err = sorted(errors, key=lambda x: x["type"] != "extra_forbidden")[0]
    kind, loc = err["type"], tuple(err["loc"])
    loc = loc[1:] if loc[:1] == ("body",) else loc
    if kind == "json_invalid":  # FastAPI's location: the character it stopped at
        why = (err.get("ctx") or {}).get("error", err["msg"])
        at = f" at character {loc[0]}" if loc and isinstance(loc[0], int) else ""
        return BadRequest(f"the body is not valid JSON ({why}{at})", "body", "invalid_json")
    if not loc or not isinstance(loc[0], str):
        return BadRequest("the body must be a JSON object (Content-Type: application/json)", "body", "invalid_json")
    param = loc[0]
    field = SpeechRequest.model_fields.get(param)
    what = field.description if field is not None else ""
    if kind == "extra_forbidden":
        takes = ", ".join(sorted(SpeechRequest.model_fields))
        return BadRequest(f"unrecognised field {param!r}; this API takes {takes}", param, "unknown_parameter")
    if kind == "missing":
        return BadRequest(f"{param} is required: {what}", param, "missing_required_parameter")
    if kind == "string_too_long":
        return BadRequest(f"{param} is {len(err['input'])} characters; the most is {MAX_INPUT}", param,
                          "string_above_max_length")
    if kind.endswith("_type") or kind in ("is_instance_of", "union_tag_invalid"):
        return BadRequest(f"{param} must be {what}", param, "invalid_type")
    return BadRequest(f"{param} {err['input']!r} is out of range: {what}" if param == "speed"
                      else f"{param} must be {what}", param)


def check(req: SpeechRequest, voices, languages: list[str], decoder: str = "duration") -> Speech:
    """A request its schema took → the checked request, or :class:`BadRequest` naming the first
    field this server cannot do as asked. ``languages``: those the model speaks, its own first
    (:attr:`myxtts.infer.Synthesizer.languages`)."""
    if not req.input.strip():
        raise BadRequest("input is empty", "input", "empty_input")
    voice = req.voice.id if isinstance(req.voice, VoiceId) else req.voice
    if voice not in voices:
        shown = voice if len(voice) <= 64 else "that voice"
        raise BadRequest(f"unknown voice {shown!r}; this server has: {', '.join(voices.names)}", "voice")
    sse = req.stream_format == "sse"
    fmt = req.response_format or ("pcm" if sse else "mp3")
    if fmt not in encode.SUPPORTED:
        raise BadRequest(f"response_format {fmt} is not supported here; use one of {', '.join(encode.SUPPORTED)}",
                         "response_format", "unsupported_value")
    if sse and fmt != "pcm":
        raise BadRequest("stream_format sse sends pcm pieces; ask for response_format pcm", "response_format",
                         "unsupported_value")
    if req.speed != 1.0 and decoder != "duration":
        raise BadRequest(f"this model (model.decoder={decoder}) has no durations to scale: speed must be 1",
                         "speed", "unsupported_value")
    if req.instructions:
        raise BadRequest("this model takes no instructions", "instructions", "unsupported_value")
    if req.word_timestamps and sse:
        raise BadRequest("stream_format sse sends the words as events already", "word_timestamps")
    language = default_language(voices[voice], languages) if req.language is None else req.language
    if language not in languages:
        shown = language if len(language) <= 64 else "that language"
        raise BadRequest(f"language {shown!r}: this model speaks {', '.join(languages)} only", "language",
                         "unsupported_value")
    return Speech(req.input, voices[voice], fmt, float(req.speed), sse, req.word_timestamps, language)


def parse(body: bytes, voices, languages: list[str], decoder: str = "duration") -> Speech:
    """A request body → the checked request, or :class:`BadRequest` naming the first bad field:
    the speech route's two steps (its schema, then :func:`check`) for one body outside HTTP."""
    try:
        req = SpeechRequest.model_validate_json(body)
    except ValidationError as e:
        raise bad_field(e.errors()) from None
    return check(req, voices, languages, decoder)
