"""Wyoming as Home Assistant speaks it: describe, synthesize, and text streamed in."""
from __future__ import annotations

import asyncio

import httpx
import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped, SynthesizeVoice

from tests.serve.conftest import SAMPLE_RATE


async def read_audio(client) -> tuple[np.ndarray, int]:
    """audio-start, its chunks, audio-stop → the samples and their rate."""
    start = AudioStart.from_event(await client.read_event())
    chunks = []
    while True:
        ev = await client.read_event()
        if AudioStop.is_type(ev.type):
            break
        c = AudioChunk.from_event(ev)
        assert (c.rate, c.width, c.channels) == (start.rate, 2, 1)
        chunks.append(c.audio)
    return np.frombuffer(b"".join(chunks), dtype="<i2").astype(np.float32) / 32768, start.rate


def test_describe_lists_the_voices_and_synthesize_speaks(served):
    async def go():
        async with AsyncTcpClient("127.0.0.1", served.wyoming_port) as c:
            await c.write_event(Describe().event())
            info = Info.from_event(await c.read_event())
            (tts,) = info.tts
            # the voices the HTTP API lists (an upload made earlier in the session among them)
            listed = httpx.get(f"{served.url}/v1/audio/voices", headers=served.headers()).json()["voices"]
            assert {v.name for v in tts.voices} == {v["name"] for v in listed} >= {"speaker", "arctic-male", "neutral"}
            assert tts.supports_synthesize_streaming and all(v.languages == ["en-US"] for v in tts.voices)
            await c.write_event(Synthesize(text="Hello from the kitchen. The lights are on.",
                                           voice=SynthesizeVoice(name="arctic-male")).event())
            return await read_audio(c)

    wav, rate = asyncio.run(go())
    assert rate == SAMPLE_RATE and wav.size > rate // 4 and np.abs(wav).max() > 1e-3


def test_streamed_text_is_spoken_sentence_by_sentence_as_it_arrives(served):
    async def go():
        async with AsyncTcpClient("127.0.0.1", served.wyoming_port) as c:
            await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name="speaker")).event())
            await c.write_event(SynthesizeChunk(text="The first sentence is here. The sec").event())
            # audio of the first sentence comes while the rest of the text is still to be sent
            assert AudioStart.is_type((await c.read_event()).type)
            first = AudioChunk.from_event(await c.read_event())
            await c.write_event(SynthesizeChunk(text="ond follows it.").event())
            await c.write_event(SynthesizeStop().event())
            n, stopped = len(first.audio), False
            while not stopped:
                ev = await c.read_event()
                if AudioChunk.is_type(ev.type):
                    n += len(AudioChunk.from_event(ev).audio)
                stopped = SynthesizeStopped.is_type(ev.type)
            return first, n

    first, n = asyncio.run(go())
    assert first.rate == SAMPLE_RATE and 0 < len(first.audio) < n


def test_an_unknown_voice_is_an_error_event_and_the_connection_lives_on(served):
    async def go():
        async with AsyncTcpClient("127.0.0.1", served.wyoming_port) as c:
            await c.write_event(Synthesize(text="Hi there.", voice=SynthesizeVoice(name="../escapee")).event())
            err = await c.read_event()
            await c.write_event(Synthesize(text="Hi there.").event())
            wav, _ = await read_audio(c)
            return err, wav

    err, wav = asyncio.run(go())
    assert err.type == "error" and "unknown voice" in err.data["text"] and wav.size > 0


def test_a_voice_may_name_a_language_the_model_speaks_and_no_other(served):
    async def go():
        async with AsyncTcpClient("127.0.0.1", served.wyoming_port) as c:
            await c.write_event(Synthesize(text="Hi there.", voice=SynthesizeVoice(language="fa")).event())
            err = await c.read_event()
            await c.write_event(Synthesize(text="Hi there.", voice=SynthesizeVoice(language="en-US")).event())
            wav, _ = await read_audio(c)
            return err, wav

    err, wav = asyncio.run(go())
    assert err.type == "error" and err.data["text"] == "language 'fa': this model speaks en-US only"
    assert wav.size > 0
