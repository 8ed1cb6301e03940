"""A voice from an uploaded clip (``POST /v1/audio/voices``), as httpx sends it: each bad upload is a
4xx naming the field, nothing is written outside the voices folder (nor left inside it), the server
answers after each; a good one speaks at once and is still there after a restart."""
from __future__ import annotations

import asyncio
import io

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.serve.conftest import VOICES, start, stop

ARCTIC = VOICES / "arctic_a0009_slt_female.wav"
SPEECH = {"model": "myxtts", "input": "Hello there. How are you?", "response_format": "wav"}


def clip(seconds: float | None = None, silent: bool = False, fmt: str = "WAV", start_s: float = 0.5) -> bytes:
    """The ARCTIC clip (a piece, or tiled to ``seconds``), or silence, as a file in ``fmt``."""
    wav, sr = sf.read(ARCTIC, dtype="float32")
    if seconds is not None:
        a = int(start_s * sr)
        wav = np.tile(wav, int(np.ceil(seconds * sr / wav.size)) + 1)[a:a + int(seconds * sr)]
    if silent:
        wav = np.zeros_like(wav)
    buf = io.BytesIO()
    sf.write(buf, wav, sr, format=fmt)
    return buf.getvalue()


def upload(served, name="new-voice", data=None, filename="clip.wav", headers=None, **more):
    """A multipart form as browsers send it: fields as parts without a filename, the clip with one."""
    parts = [(k, (None, v)) for k, v in (({"name": name} if name is not None else {}) | more).items()]
    if data is not False:
        parts.append(("audio_sample", (filename, clip() if data is None else data, "audio/wav")))
    headers = served.headers() if headers is None else headers
    return httpx.post(f"{served.url}/v1/audio/voices", files=parts, headers=headers, timeout=60)


def assert_listed_and_speaks(served, name: str) -> None:
    """The voice ``name`` is in the server's list, and a request in it comes back with sound."""
    listed = httpx.get(f"{served.url}/v1/audio/voices", headers=served.headers()).json()["voices"]
    assert name in [v["name"] for v in listed]
    speech = httpx.post(f"{served.url}/v1/audio/speech", json={**SPEECH, "voice": name},
                        headers=served.headers(), timeout=60)
    wav, _ = sf.read(io.BytesIO(speech.content), dtype="float32")
    assert np.abs(wav).max() > 1e-3


def written(served) -> dict:
    """Every file under the test's folder (the run, its cache, the voices folder...) → its size."""
    return {str(p): p.stat().st_size for p in served.run.parent.rglob("*") if p.is_file() and p.suffix != ".log"}


# (case, upload arguments, status, the field named, the error code, words the message says)
CASES = [
    ("not audio", dict(data=b"# MyXTTS\nThis is a text file, not a recording.\n" * 20), 400, "audio_sample",
     "invalid_audio", "not audio"),
    ("empty file", dict(data=b""), 400, "audio_sample", "invalid_audio", "not audio"),
    ("too short", dict(data=clip(0.3)), 400, "audio_sample", "invalid_audio", "too short"),
    ("too long", dict(data=clip(31.0)), 400, "audio_sample", "audio_too_long", "the most is 30 s"),
    ("silent", dict(data=clip(3.0, silent=True)), 400, "audio_sample", "invalid_audio", "silent"),
    ("too large", dict(data=b"RIFF" + bytes(10 * 1024 * 1024)), 413, "audio_sample", "file_too_large", "10 MiB"),
    ("name of a folder voice", dict(name="arctic-male"), 409, "name", "voice_exists", "already exists"),
    ("name of a training speaker", dict(name="speaker"), 409, "name", "voice_exists", "already exists"),
    ("name neutral", dict(name="neutral"), 409, "name", "voice_exists", "already exists"),
    ("a path as name", dict(name="../escaped"), 400, "name", "invalid_value", "letters, digits"),
    ("an absolute path as name", dict(name="/tmp/escaped"), 400, "name", "invalid_value", "letters, digits"),
    ("a hidden name", dict(name=".hidden"), 400, "name", "invalid_value", "letters, digits"),
    ("a name too long", dict(name="v" * 65), 400, "name", "invalid_value", "1 to 64"),
    ("an empty name", dict(name=""), 400, "name", "invalid_value", "letters, digits"),
    ("no name", dict(name=None), 400, "name", "missing_required_parameter", "name is required"),
    ("no clip", dict(data=False), 400, "audio_sample", "missing_required_parameter", "audio_sample is required"),
    ("an unknown field", dict(consent="cons_1234"), 400, "consent", "unknown_parameter", "unrecognised"),
]


@pytest.mark.parametrize("case,kw,status,param,code,says", CASES, ids=[c[0] for c in CASES])
def test_a_bad_upload_is_a_4xx_naming_the_field_and_writes_nothing(served, case, kw, status, param, code, says):
    before = written(served)
    r = upload(served, **kw)
    assert r.status_code == status, r.text[:300]
    err = r.json()["error"]
    assert (err["param"], err["code"]) == (param, code) and says in err["message"], err
    assert str(served.voices) not in err["message"] and str(served.run.parent) not in err["message"]
    assert written(served) == before
    assert served.health()["status"] == "ok" and served.proc.poll() is None


def test_a_body_that_is_not_a_form_is_refused(served):
    r = httpx.post(f"{served.url}/v1/audio/voices", json={"name": "x"}, headers=served.headers())
    assert r.status_code == 400 and r.json()["error"]["param"] == "body"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
def test_an_upload_needs_the_api_key(served, headers):
    before = written(served)
    r = upload(served, name="keyless", headers=headers)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert written(served) == before


def test_an_uploaded_voice_is_listed_speaks_and_survives_a_restart(served, tmp_path):
    # the filename the client sends is never a path the server writes to
    r = upload(served, name="uploaded-mp3", data=clip(3.0, fmt="MP3"), filename="../../outside.mp3")
    assert r.status_code == 201, r.text
    assert r.json() == {"name": "uploaded-mp3", "source": "uploaded", "reference_seconds": pytest.approx(3.0, abs=0.1),
                        "language": None}
    assert sorted(p.name for p in (served.voices / "uploaded-mp3").iterdir()) == ["clip.mp3"]
    assert not (served.run.parent / "outside.mp3").exists()
    assert_listed_and_speaks(served, "uploaded-mp3")
    again = upload(served, name="uploaded-mp3")
    assert again.status_code == 409
    # a second server on the same voices folder: the upload is one of its voice folders
    other = start(served.run.parent, served.run, served.run.parent / "cache", served.voices, tmp_path / "other.log")
    try:
        voices = httpx.get(f"{other.url}/v1/audio/voices", headers=other.headers()).json()["voices"]
        assert {v["name"]: v["source"] for v in voices}["uploaded-mp3"] == "voices folder"
    finally:
        stop(other)


RACING = ["The first sentence is short. The second one is a little longer than the first. And a third.",
          "Good morning. The weather is fine today, and the trains run on time.",
          "A short one. Then another short one.",
          "This sentence is somewhat longer than the others, so it is spoken in more pieces."]


def test_an_upload_racing_speech_requests_leaves_every_one_whole(served):
    """Four streamed speech requests, each already sending audio, when a clip is uploaded: the
    clip is conditioned between the engine's turns, every request is answered whole, and the new
    voice is then listed and speaks."""
    async def speak(c: httpx.AsyncClient, text: str, heard: asyncio.Event) -> bytes:
        async with c.stream("POST", "/v1/audio/speech", json={**SPEECH, "input": text, "voice": "neutral",
                                                               "response_format": "pcm"}) as r:
            assert r.status_code == 200
            body = b""
            async for chunk in r.aiter_bytes():
                body += chunk
                heard.set()
        return body

    async def add(c: httpx.AsyncClient, heard: list[asyncio.Event]) -> httpx.Response:
        await asyncio.gather(*(h.wait() for h in heard))  # every request in flight
        files = [("name", (None, "raced")), ("audio_sample", ("clip.wav", clip(3.0), "audio/wav"))]
        return await c.post("/v1/audio/voices", files=files)

    async def go():
        heard = [asyncio.Event() for _ in RACING]
        async with httpx.AsyncClient(base_url=served.url, headers=served.headers(), timeout=120) as c:
            return await asyncio.gather(*(speak(c, t, h) for t, h in zip(RACING, heard)), add(c, heard))

    *spoken, added = asyncio.run(go())
    assert added.status_code == 201, added.text
    assert added.json()["name"] == "raced" and added.json()["source"] == "uploaded"
    for body in spoken:
        wav = np.frombuffer(body, dtype="<i2")
        assert wav.size > 2400 and np.abs(wav).max() > 30
    assert_listed_and_speaks(served, "raced")
    assert served.health()["in_flight"] == 0 and "Traceback" not in served.log_text()
