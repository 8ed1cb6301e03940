"""The OpenAI speech API as its own SDK and httpx call it: what comes back says what was asked."""
from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf

from tests.serve.conftest import API_KEY, SAMPLE_RATE

THREE = "The first sentence is short. The second one is a little longer than the first. And a third."


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=API_KEY, max_retries=0)


def pcm(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768


def has_energy(wav: np.ndarray) -> bool:
    return wav.size > 0 and np.isfinite(wav).all() and float(np.abs(wav).max()) > 1e-3


def test_the_sdk_gets_a_wav_at_the_models_rate_with_sound(client):
    r = client.audio.speech.create(model="myxtts", voice="speaker", input="Hello there. How are you?",
                                   response_format="wav")
    wav, sr = sf.read(io.BytesIO(r.content), dtype="float32")
    assert sr == SAMPLE_RATE and has_energy(wav)


@pytest.mark.parametrize("fmt,rate", [("flac", SAMPLE_RATE), ("mp3", 24000), ("opus", 24000)])
def test_every_supported_file_format_decodes_at_its_rate(client, fmt, rate):
    r = client.audio.speech.create(model="myxtts", voice="neutral", input="Hello there.", response_format=fmt)
    wav, sr = sf.read(io.BytesIO(r.content), dtype="float32")
    assert sr == rate and has_energy(wav)


def test_streamed_pcm_arrives_in_pieces_while_the_server_is_still_speaking(client, served):
    """The first piece reaches the client while the request is still in flight on the server:
    the response starts before the audio is all made."""
    text = " ".join([THREE] * 4)
    with client.audio.speech.with_streaming_response.create(
            model="myxtts", voice="arctic-male", input=text, response_format="pcm") as r:
        chunks = r.iter_bytes()
        first = next(chunks)
        assert served.health()["in_flight"] >= 1  # ours, still being made
        rest = b"".join(chunks)
    assert r.headers["content-type"].startswith("audio/pcm")
    assert len(first) > 0 and len(first) < len(first + rest)
    wav = pcm(first + rest)
    assert has_energy(wav)
    # the whole at 24 kHz: the same length as the same text asked for whole, in wav at 22.05 kHz
    whole = client.audio.speech.create(model="myxtts", voice="arctic-male", input=text, response_format="wav")
    ref, sr = sf.read(io.BytesIO(whole.content), dtype="float32")
    assert abs(wav.size / 24000 - ref.size / sr) < 0.01


def test_sse_sends_deltas_words_and_done_in_order(served):
    body = {"model": "myxtts", "input": THREE, "voice": "speaker", "stream_format": "sse"}
    events = []
    with httpx.stream("POST", f"{served.url}/v1/audio/speech", json=body, headers=served.headers(),
                      timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "speech.audio.done" and kinds.count("speech.audio.done") == 1
    assert kinds[0] == "speech.word"  # a sentence's words are known before its audio is sent
    audio = pcm(b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"))
    assert has_energy(audio)
    words = [e for e in events if e["type"] == "speech.word"]
    check_words(words, audio.size / 24000, n=18)


def check_words(words: list[dict], seconds: float, n: int) -> None:
    """n words, each within the audio, starts in order, each ending after it starts."""
    assert len(words) == n, [w["word"] for w in words]
    starts = [w["start"] for w in words]
    assert starts == sorted(starts) and starts[0] >= 0
    assert all(w["end"] >= w["start"] for w in words) and words[-1]["end"] <= seconds + 1e-3
    assert all(w["word"] and w["word"].isalpha() for w in words)


def test_word_timestamps_come_as_json_beside_the_audio(served):
    body = {"model": "myxtts", "input": THREE, "voice": "neutral", "response_format": "wav", "word_timestamps": True}
    r = httpx.post(f"{served.url}/v1/audio/speech", json=body, headers=served.headers(), timeout=60)
    assert r.status_code == 200, r.text
    got = r.json()
    wav, sr = sf.read(io.BytesIO(base64.b64decode(got["audio"])), dtype="float32")
    assert sr == got["sample_rate"] == SAMPLE_RATE and abs(wav.size / sr - got["seconds"]) < 1e-3
    check_words(got["words"], got["seconds"], n=18)
    assert [w["word"] for w in got["words"][:3]] == ["the", "first", "sentence"]
    # the second sentence starts after the first one's last word and the pause between them
    assert got["words"][5]["start"] >= got["words"][4]["end"] + 0.2


def test_speed_scales_the_durations(client):
    def seconds(speed):
        r = client.audio.speech.create(model="myxtts", voice="neutral", input=THREE, response_format="wav",
                                       speed=speed)
        return sf.info(io.BytesIO(r.content)).duration
    slow, normal = seconds(0.5), seconds(1.0)
    assert slow > 1.5 * normal


def test_voices_list_where_each_comes_from(served):
    r = httpx.get(f"{served.url}/v1/audio/voices", headers=served.headers())
    voices = {v["name"]: v for v in r.json()["voices"]}
    assert voices["speaker"]["source"] == "training speaker"
    assert voices["arctic-male"]["source"] == "voices folder" and voices["arctic-male"]["reference_seconds"] > 1
    assert voices["neutral"]["source"] == "no reference"
    assert "escapee" not in voices  # its folder leads outside the voices folder


def test_a_client_that_leaves_cancels_its_work(served):
    body = {"model": "myxtts", "input": " ".join([THREE] * 20), "voice": "neutral", "response_format": "pcm"}
    with httpx.stream("POST", f"{served.url}/v1/audio/speech", json=body, headers=served.headers(),
                      timeout=60) as r:
        next(r.iter_bytes())
    for _ in range(200):
        if served.health()["in_flight"] == 0:
            break
        httpx.get(f"{served.url}/health")  # a poll, not a wait on the clock
    assert served.health()["in_flight"] == 0
    assert "cancelled: voice neutral" in served.log_text()
