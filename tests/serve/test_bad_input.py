"""Bad input, no harm: each bad request is a 4xx in the API's error shape naming the field, the
log holds no traceback, and the server answers the next good request."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from urllib.parse import urlparse

import httpx
import pytest
from wyoming.client import AsyncTcpClient
from wyoming.tts import SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

GOOD = {"model": "myxtts", "input": "Hello there.", "voice": "neutral", "response_format": "wav"}


def with_(**fields):
    body = dict(GOOD)
    for k, v in fields.items():
        if v is DROP:
            body.pop(k)
        else:
            body[k] = v
    return body


DROP = object()
# (case, JSON body or raw bytes, status, the field named)
CASES = [
    ("malformed JSON", b'{"input": "hi",', 400, "body"),
    ("not an object", b'["hello"]', 400, "body"),
    ("not UTF-8", b'\xff\xfe{"input": 1}', 400, "body"),
    ("no input", with_(input=DROP), 400, "input"),
    ("input not a string", with_(input=42), 400, "input"),
    ("empty input", with_(input=""), 400, "input"),
    ("blank input", with_(input="   \n "), 400, "input"),
    ("input over 4096", with_(input="a " * 2049), 400, "input"),
    ("nothing speakable", with_(input="!!! ... ???"), 400, "input"),
    ("emoji alone", with_(input="\U0001f600 \U0001f389"), 400, "input"),
    ("no voice", with_(voice=DROP), 400, "voice"),
    ("unknown voice", with_(voice="alloy"), 400, "voice"),
    ("a path as voice", with_(voice="../escapee"), 400, "voice"),
    ("an absolute path as voice", with_(voice="/etc/passwd"), 400, "voice"),
    ("a linked-out folder as voice", with_(voice="escapee"), 400, "voice"),
    ("voice not a string", with_(voice=["neutral"]), 400, "voice"),
    ("speed too low", with_(speed=0.1), 400, "speed"),
    ("speed too high", with_(speed=4.5), 400, "speed"),
    ("speed not a number", with_(speed="fast"), 400, "speed"),
    ("speed a boolean", with_(speed=True), 400, "speed"),
    ("unknown format", with_(response_format="ogg"), 400, "response_format"),
    ("aac, not written here", with_(response_format="aac"), 400, "response_format"),
    ("unknown stream format", with_(stream_format="chunks"), 400, "stream_format"),
    ("sse in mp3", with_(stream_format="sse", response_format="mp3"), 400, "response_format"),
    ("model not a string", with_(model=1), 400, "model"),
    ("unknown field", with_(temperature=0.7), 400, "temperature"),
    ("instructions", with_(instructions="Speak like a pirate."), 400, "instructions"),
    ("word_timestamps not a boolean", with_(word_timestamps="yes"), 400, "word_timestamps"),
    ("a language the model lacks", with_(language="fa"), 400, "language"),
    ("a language nobody knows", with_(language="xx-nowhere"), 400, "language"),
    ("language not a string", with_(language=["en-us"]), 400, "language"),
]


def post(served, body, headers=None):
    kw = {"content": body} if isinstance(body, bytes) else {"json": body}
    return httpx.post(f"{served.url}/v1/audio/speech", headers=served.headers() if headers is None else headers,
                      timeout=30, **kw)


def test_the_matrix_is_at_least_twenty_cases():
    assert len(CASES) >= 20


@pytest.mark.parametrize("case,body,status,param", CASES, ids=[c[0] for c in CASES])
def test_a_bad_request_is_a_4xx_naming_the_field(served, case, body, status, param):
    r = post(served, body)
    assert r.status_code == status, r.content[:300]
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["param"] == param
    assert err["message"] and err["type"] == "invalid_request_error"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "test-key"}])
def test_the_api_key_is_checked_as_a_bearer_token(served, headers):
    r = post(served, GOOD, headers)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(f"{served.url}/health").status_code == 200  # health needs no key


def test_past_the_queue_a_request_is_told_to_come_back(served):
    """Nine Wyoming streams of text that never ends a sentence after the first fill the nine
    places; the next request is a 503 with Retry-After, and once they end, requests are served."""
    async def go():
        clients = [AsyncTcpClient("127.0.0.1", served.wyoming_port) for _ in range(9)]
        for c in clients:
            await c.connect()
            await c.write_event(SynthesizeStart().event())
            await c.write_event(SynthesizeChunk(text="One sentence. And then").event())
            await c.read_event()  # audio-start: its job is in flight
        full = await asyncio.to_thread(post, served, GOOD)
        for c in clients:
            await c.write_event(SynthesizeStop().event())
            while not SynthesizeStopped.is_type((await c.read_event()).type):
                pass
            await c.disconnect()
        return full

    full = asyncio.run(go())
    assert full.status_code == 503 and full.headers["retry-after"] == "1"
    assert full.json()["error"]["code"] == "server_busy"
    assert post(served, GOOD).status_code == 200


def test_after_all_of_it_the_server_answers_and_logged_no_traceback(served):
    r = post(served, GOOD)
    assert r.status_code == 200 and r.content[:4] == b"RIFF"
    assert served.proc.poll() is None and "Traceback" not in served.log_text()


def test_a_port_in_use_is_one_line_before_the_model_loads(served):
    port = urlparse(served.url).port  # the served model's own
    r = subprocess.run([sys.executable, "-m", "myxtts", "serve", "--checkpoint", str(served.run), "--port", str(port)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == (f"myxtts serve: error: --port {port}: cannot listen on "
                                                      f"127.0.0.1:{port} (address already in use)")
