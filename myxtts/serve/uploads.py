"""Your voice from a clip: ``POST /v1/audio/voices`` (multipart: ``name`` and ``audio_sample``,
the fields of OpenAI's own voice upload) makes a new voice the way a voices folder does.

The clip is checked before anything is written: at most ``MAX_BYTES`` (OpenAI's limit for a voice
sample), read by soundfile (WAV, FLAC, Ogg, MP3), at most ``MAX_SECONDS`` long; the name is one a
folder can have on every system and is not taken. Then it becomes ``DIR/NAME/clip.EXT`` in the
voices folder and that folder is conditioned as start-up conditions every voice folder
(:func:`myxtts.voice.from_folder`: silence and too little sound are refused there); a
refused clip's folder is removed. The model's part of that (the conditioning latents) is run by
the engine's worker between two of its turns (:meth:`~myxtts.serve.engine.Engine.call`), never
beside a decode. With ``--voices DIR`` the voice is there after a restart; without it, the server
keeps uploads in a temporary folder of its own, gone when it stops.

The body is read into memory with its size bounded as it arrives and parsed there
(python-multipart's streaming parser): nothing is spooled to disk outside the voices folder.
"""
from __future__ import annotations

import asyncio
import io
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import soundfile as sf
from fastapi import APIRouter, Request
from python_multipart.multipart import MultipartParser, parse_options_header

from myxtts import speak
from myxtts.serve.schemas import APIError, VoiceInfo
from myxtts.serve.voices import Voice
from myxtts.voice import from_folder

MAX_BYTES = 10 * 1024 * 1024
MAX_SECONDS = 30.0  # a reference is cut to data.ref_seconds (a few seconds): more is never heard
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # no dots, no slashes: never a path
FIELDS = ("name", "audio_sample")
SUFFIXES = {"WAV": ".wav", "FLAC": ".flac", "OGG": ".ogg", "MP3": ".mp3"}  # soundfile's format → voices folder's
FORM_SLACK = 64 * 1024  # the multipart envelope around the clip


async def read_form(request) -> dict[str, tuple[bytes, str | None]]:
    """The multipart body → {field: (bytes, filename)}, refusing a body past the size limit as it
    arrives (a Content-Length that says so is refused before reading)."""
    ctype, params = parse_options_header(request.headers.get("content-type", ""))
    if ctype != b"multipart/form-data" or b"boundary" not in params:
        raise APIError("send multipart/form-data with the fields name and audio_sample", "body", "invalid_body")
    limit = MAX_BYTES + FORM_SLACK
    too_large = APIError(f"audio_sample is larger than {MAX_BYTES // (1024 * 1024)} MiB", "audio_sample",
                         "file_too_large", 413)
    if int(request.headers.get("content-length") or 0) > limit:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large

    parts: list[dict] = []
    header: list[bytes] = [b"", b""]

    def on_part_begin():
        parts.append({"headers": {}, "data": bytearray()})

    def on_header_field(data, start, end):
        header[0] += data[start:end]

    def on_header_value(data, start, end):
        header[1] += data[start:end]

    def on_header_end():
        parts[-1]["headers"][header[0].lower()] = header[1]
        header[0], header[1] = b"", b""

    def on_part_data(data, start, end):
        parts[-1]["data"] += data[start:end]

    parser = MultipartParser(params[b"boundary"], {
        "on_part_begin": on_part_begin, "on_header_field": on_header_field, "on_header_value": on_header_value,
        "on_header_end": on_header_end, "on_part_data": on_part_data})
    try:
        parser.write(bytes(body))
        parser.finalize()
    except Exception as e:  # python-multipart's errors have no common base across releases
        raise APIError(f"the multipart body cannot be read ({e})", "body", "invalid_body") from None
    form = {}
    for part in parts:
        _, disp = parse_options_header(part["headers"].get(b"content-disposition", b""))
        name = disp.get(b"name", b"").decode("utf-8", "replace")
        if name not in FIELDS:
            shown = name if len(name) <= 64 else name[:64] + "..."
            raise APIError(f"unrecognised field {shown!r}; this endpoint takes {', '.join(FIELDS)}", shown or "body",
                           "unknown_parameter")
        filename = disp.get(b"filename")
        form[name] = (bytes(part["data"]), filename.decode("utf-8", "replace") if filename is not None else None)
    return form


def check_name(form: dict, voices, folder: Path) -> str:
    if "name" not in form:
        raise APIError("name is required: the new voice's name", "name", "missing_required_parameter")
    try:
        name = form["name"][0].decode("utf-8")
    except UnicodeDecodeError:
        raise APIError("name is not UTF-8 text", "name", "invalid_value") from None
    if not NAME.fullmatch(name):
        raise APIError("name must be 1 to 64 letters, digits, '-' or '_', starting with a letter or digit",
                       "name", "invalid_value")
    if name in voices or (folder / name).exists():
        raise APIError(f"a voice named {name!r} already exists", "name", "voice_exists", 409)
    return name


def check_clip(form: dict) -> tuple[bytes, str]:
    """The clip's bytes and the suffix its format is stored under; refused if not audio or too long."""
    if "audio_sample" not in form:
        raise APIError("audio_sample is required: a WAV, FLAC, Ogg or MP3 clip of the voice", "audio_sample",
                       "missing_required_parameter")
    data = form["audio_sample"][0]
    if len(data) > MAX_BYTES:
        raise APIError(f"audio_sample is larger than {MAX_BYTES // (1024 * 1024)} MiB", "audio_sample",
                       "file_too_large", 413)
    try:
        info = sf.info(io.BytesIO(data))
    except Exception:  # soundfile raises several kinds on garbage
        raise APIError("audio_sample is not audio this server reads (WAV, FLAC, Ogg or MP3)", "audio_sample",
                       "invalid_audio") from None
    if info.format not in SUFFIXES or info.frames <= 0:
        raise APIError("audio_sample is not audio this server reads (WAV, FLAC, Ogg or MP3)", "audio_sample",
                       "invalid_audio")
    if info.duration > MAX_SECONDS:
        raise APIError(f"audio_sample is {info.duration:.1f} s long; the most is {MAX_SECONDS:g} s (the voice "
                       f"is heard from its first seconds)", "audio_sample", "audio_too_long")
    return data, SUFFIXES[info.format]


@dataclass
class Uploads:
    """Where uploaded voices go and how they are conditioned."""

    folder: Path  # the voices folder (--voices DIR, or the server's temporary one)
    engine: object  # its worker runs the model: the conditioning is its work, between two turns
    kept: bool  # the folder outlives the server (--voices DIR)

    def add(self, name: str, data: bytes, suffix: str) -> Voice:
        """Write the clip into the voices folder and condition it (called off the event loop);
        a refused clip leaves nothing behind."""
        root = self.folder.resolve()
        sub = root / name
        try:
            sub.mkdir()  # claims the name: two uploads of one name cannot both succeed
        except FileExistsError:
            raise APIError(f"a voice named {name!r} already exists", "name", "voice_exists", 409) from None
        try:
            clip = sub / f"clip{suffix}"
            clip.write_bytes(data)
            notes: list[str] = []
            synth = self.engine.synth
            voice = from_folder(name, sub, synth.cfg, notes.append, root=root)
            if voice is None:  # the one folder rule refused the clip, and said why
                why = notes[0].removeprefix("note: ").removesuffix("; clip skipped")
                raise APIError(why.replace(f"reference {clip}", "audio_sample"), "audio_sample",
                               "invalid_audio")
            conditioned = self.engine.call(speak.with_latents, synth.model, voice.reference).result()
            return Voice(name, "uploaded", conditioned)
        except BaseException:
            shutil.rmtree(sub, ignore_errors=True)
            raise


router = APIRouter()


@router.post("/v1/audio/voices", status_code=201, response_model=VoiceInfo)
async def upload(request: Request):
    """A voice from a clip; it is listed and speaks once this answers."""
    st = request.app.state
    store: Uploads = st.uploads
    form = await read_form(request)
    name = check_name(form, st.voices, store.folder)
    data, suffix = check_clip(form)
    voice = await asyncio.to_thread(store.add, name, data, suffix)
    st.voices.add(voice)
    st.log(f"voice {name} added from an upload ({len(data)} bytes)")
    return VoiceInfo.of(voice, st.engine.hop / st.engine.sample_rate)
