"""The same engine over Wyoming, Home Assistant's voice protocol (the ``wyoming`` package).

``describe`` → ``info`` listing every voice, each in the model's languages
(:attr:`myxtts.infer.Synthesizer.languages`); ``synthesize`` (a whole text) or streamed text
(``synthesize-start``, ``synthesize-chunk``s, ``synthesize-stop``) → ``audio-start``,
``audio-chunk``s, ``audio-stop`` (streamed text: one audio stream for all of it, then
``synthesize-stopped``). Streamed text is spoken a sentence at a time as each sentence is
complete, while the rest is still arriving. A request's voice may name its language, which must be
one the model speaks (by default, the model's own). Audio goes out at the model's rate, 16-bit mono.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlparse

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from myxtts import __version__
from myxtts.errors import UserError
from myxtts.serve import encode
from myxtts.serve.engine import Busy, Engine
from myxtts.serve.voices import NEUTRAL
from myxtts.voice import default_language

ATTRIBUTION = Attribution(name="MyXTTS", url="")  # a model trained by its user: nobody else to name


def check_uri(uri: str) -> str:
    """``tcp://HOST:PORT`` as the wyoming package takes it, or a :class:`UserError`."""
    u = urlparse(uri)
    try:
        port = u.port
    except ValueError:  # not a number, or out of range
        port = None
    if u.scheme != "tcp" or not u.hostname or port is None:
        raise UserError(f"--wyoming {uri}: give tcp://HOST:PORT, e.g. tcp://127.0.0.1:10200")
    return uri


def language_tag(language: str) -> str:
    """espeak-ng's ``en-us`` → the ``en-US`` Home Assistant lists languages by."""
    lang, _, region = language.partition("-")
    return f"{lang}-{region.upper()}" if region else lang


def info(voices, languages: list[str]) -> Info:
    tags = [language_tag(code) for code in languages]
    tts_voices = [TtsVoice(name=n, description=voices[n].source, attribution=ATTRIBUTION, installed=True,
                           version=__version__, languages=tags) for n in voices.names]
    return Info(tts=[TtsProgram(name="myxtts", description="MyXTTS", attribution=ATTRIBUTION, installed=True,
                                version=__version__, voices=tts_voices, supports_synthesize_streaming=True)])


@dataclass
class Stream:
    """Text streaming in: the voice, text not yet a whole sentence, the job and its audio task."""

    voice: object
    language: str | None  # a code the model speaks (None: its own)
    text: str = ""
    job: object = None
    playing: asyncio.Task | None = None


class Handler(AsyncEventHandler):
    def __init__(self, engine: Engine, voices, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.engine, self.voices, self.languages = engine, voices, engine.synth.languages
        self.stream: Stream | None = None

    def _language(self, v) -> str | None:
        """The model's code for the language a request's voice names (``en-US``, ``en_us`` or
        ``en-us``), where it names none the voice's own (:func:`myxtts.voice.default_language`);
        an error naming the languages the model has."""
        if v is None or not v.language:
            return default_language(self._voice(v), self.languages)
        asked = v.language.lower().replace("_", "-")
        for code in self.languages:
            if code.lower() == asked:
                return code
        has = ", ".join(language_tag(code) for code in self.languages)
        raise UserError(f"language {v.language!r}: this model speaks {has} only")

    def _voice(self, v):
        name = v.name if v is not None and v.name else NEUTRAL
        if name not in self.voices:
            raise UserError(f"unknown voice {name!r}; this server has: {', '.join(self.voices.names)}")
        return self.voices[name]

    async def handle_event(self, event: Event) -> bool:
        try:
            if Describe.is_type(event.type):
                await self.write_event(info(self.voices, self.languages).event())
            elif Synthesize.is_type(event.type):
                if self.stream is None:  # inside a stream clients send it too, for servers that cannot stream
                    s = Synthesize.from_event(event)
                    voice, language = self._voice(s.voice), self._language(s.voice)
                    sentences = await asyncio.to_thread(self.engine.sentences, s.text, "text", language)
                    await self._play(self.engine.submit(voice, 1.0, sentences, chars=len(s.text)))
            elif SynthesizeStart.is_type(event.type):
                v = SynthesizeStart.from_event(event).voice
                self.stream = Stream(self._voice(v), self._language(v))
            elif SynthesizeChunk.is_type(event.type) and self.stream is not None:
                await self._feed(SynthesizeChunk.from_event(event).text, last=False)
            elif SynthesizeStop.is_type(event.type) and self.stream is not None:
                await self._feed("", last=True)
                self.stream = None
                await self.write_event(SynthesizeStopped().event())
        except (UserError, Busy) as e:
            if self.stream is not None and self.stream.job is not None:
                self.stream.job.cancel()
            self.stream = None
            await self.write_event(Error(text=str(e), code="busy" if isinstance(e, Busy) else "bad-request").event())
        return True

    async def disconnect(self) -> None:
        if self.stream is not None and self.stream.job is not None:
            self.stream.job.cancel()

    async def _feed(self, text: str, last: bool) -> None:
        """Streamed text: each sentence is spoken once it is complete; on the last chunk, the rest."""
        st = self.stream
        st.text += text
        cut = len(st.text) if last else self.engine.complete_part(st.text)
        ready, st.text = st.text[:cut], st.text[cut:]
        sentences = []
        if any(c.isalnum() for c in ready):
            sentences = await asyncio.to_thread(self.engine.sentences, ready, "text", st.language)
        if st.job is None and (sentences or not last):
            if not sentences:
                return  # nothing whole yet: the job starts with its first sentence
            st.job = self.engine.submit(st.voice, 1.0, sentences, more=not last, chars=len(ready))
            st.playing = asyncio.create_task(self._play(st.job))
        elif st.job is not None:
            st.job.chars += len(ready)
            st.job.add(sentences, last)
        if last and st.playing is not None:
            await st.playing

    async def _play(self, job) -> None:
        """A job's audio as one Wyoming audio stream."""
        rate, width, channels = self.engine.sample_rate, 2, 1
        await self.write_event(AudioStart(rate=rate, width=width, channels=channels).event())
        try:
            while True:
                ev = await job.events.get()
                if ev.kind == "audio":
                    await self.write_event(AudioChunk(rate=rate, width=width, channels=channels,
                                                      audio=encode.to_int16(ev.wav)).event())
                elif ev.kind in ("done", "error"):
                    break
        finally:
            job.cancel()
        await self.write_event(AudioStop().event())


async def serve(uri: str, engine: Engine, voices) -> None:
    """Serve until cancelled. ``start``, not ``run``: the HTTP server owns the signals."""
    server = AsyncServer.from_uri(uri)
    await server.start(lambda reader, writer: Handler(engine, voices, reader, writer))
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
