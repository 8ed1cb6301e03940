"""One engine for every request: sentences of all requests in flight are decoded together.

A request is a :class:`Job`: a voice, a speed and its sentences (all at once, or, for streamed
text, as they arrive), each read into token ids once, when it is checked on arrival
(:meth:`Engine.sentences`: the run's own :meth:`~myxtts.infer.Synthesizer.sentences`
and :meth:`~myxtts.infer.Synthesizer.encode`). One worker thread loops:

1. every job whose previous sentence has been sent whole and that has another one gives it; these
   sentences' ids are spoken together through the run's :meth:`myxtts.infer.Synthesizer.speak_ids`,
   the layer ``synthesize`` speaks through, which sorts them by length and decodes up to
   ``max_batch`` at a time (1: no batching, each sentence decoded alone);
2. every job with a spoken sentence gets its next piece of audio (:mod:`myxtts.serve.pieces`),
   the pieces of all jobs vocoded together where their windows are of one length: the first
   piece of a request is short, so new requests hear something at once, and no request waits
   for another's sentence to be finished.

Between two turns it also runs the model work that is not a request's sentence (a voice
uploaded while serving is conditioned, a voice's reference is vocoded): :meth:`Engine.call`
queues it, so the model and the vocoder are only ever run by this one thread.

So each request's audio arrives in order, first sentence first, and nothing serialises users: a
long request does not hold a short one back for longer than one piece. Events go to the job's
asyncio queue on its own event loop. A job whose client left is cancelled and dropped between
two pieces. Past ``max_jobs`` in flight, :meth:`Engine.submit` raises :class:`Busy`.
"""
from __future__ import annotations

import asyncio
import re
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from myxtts.errors import UserError
from myxtts.serve import pieces, timings
from myxtts.text import echo

SENTENCE_DONE = re.compile(r"[.!?]+[\"')\]]*\s")  # the end of a sentence in text still arriving


class Busy(Exception):
    """More requests in flight than the engine takes."""


@dataclass(frozen=True)
class Sentence:
    text: str  # normalised
    ids: tuple[int, ...]  # the tokens it is read as, end of sentence included
    language: str | None = None  # the language they are read in (None: the model's own)


@dataclass
class Event:
    kind: str  # "audio" (wav), "words" (words), "done" (seconds, first_audio_s), "error" (message)
    wav: np.ndarray | None = None  # (S,) float32 at the model's rate
    words: list = field(default_factory=list)
    message: str = ""


class Job:
    def __init__(self, engine: Engine, voice, speed: float, sentences: list[Sentence], more: bool, chars: int):
        self.engine, self.voice, self.speed, self.chars = engine, voice, speed, chars
        self.loop = asyncio.get_running_loop()
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.pending: deque[Sentence] = deque(sentences)
        self.more = more  # sentences may still be added (streamed text)
        self.active = None  # the pieces of the sentence being sent
        self.spoken = 0  # sentences begun
        self.samples = 0  # audio sent so far, at the model's rate
        self.cancelled = self.finished = self.failed = False
        self.t0, self.first_audio = time.perf_counter(), None

    def add(self, sentences: list[Sentence], last: bool = False) -> None:
        """More sentences of streamed text; ``last``: no more will come."""
        with self.engine.cond:
            self.pending.extend(sentences)
            self.more = self.more and not last
            self.engine.cond.notify()

    def cancel(self) -> None:
        with self.engine.cond:
            self.cancelled = True
            self.engine.cond.notify()

    def emit(self, event: Event) -> None:
        """From the worker thread: hand ``event`` to the request's loop."""
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # its loop is closed: nobody is listening
            self.cancelled = True


class Engine:
    def __init__(self, synth, max_batch: int = 16, max_jobs: int = 64, log=print):
        self.synth, self.max_batch, self.max_jobs, self.log = synth, max_batch, max_jobs, log
        cfg = synth.cfg
        self.sample_rate, self.hop, self.r = cfg.audio.sample_rate, cfg.audio.hop_length, cfg.model.reduction
        self.pause = synth.pause  # between a request's sentences, as synthesize joins them
        self.cond = threading.Condition()
        # espeak-ng (the phonemizer) is not thread-safe: requests reading their text take turns;
        # the worker reads no text (the sentences come encoded), so decoding needs no turn
        self.text_lock = threading.Lock()
        self.jobs: list[Job] = []
        self.calls: list[tuple[Future, object, tuple]] = []  # model work for the worker's next turn
        self.first_audio: deque[tuple[float, float]] = deque(maxlen=4096)  # (finished at, seconds) per request
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="myxtts-engine", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------------ requests
    def sentences(self, text: str, field_name: str = "input", language: str | None = None) -> list[Sentence]:
        """Text in ``language`` (a code the model speaks; None: its own) → the sentences to speak,
        each read into the tokens the model speaks (once: a :class:`UserError` for what it cannot
        read), or if there is nothing speakable. Sentences of punctuation alone are left out."""
        out = []
        with self.text_lock:
            for s in self.synth.sentences(text, language):
                if any(c.isalnum() for c in s):
                    out.append(Sentence(s, self.synth.encode(s, language, normalized=True), language))
        if not out:
            raise UserError(f"{field_name} has nothing speakable: {echo(text)}")
        return out

    def complete_part(self, text: str) -> int:
        """How much of text still arriving ends in a finished sentence (its length)."""
        ends = [m.end() for m in SENTENCE_DONE.finditer(text)]
        return ends[-1] if ends else 0

    def submit(self, voice, speed: float, sentences: list[Sentence], more: bool = False, chars: int = 0) -> Job:
        """Called from the request's event loop."""
        with self.cond:
            if len(self.jobs) >= self.max_jobs:
                raise Busy(f"{len(self.jobs)} requests in flight, the most this server takes")
            job = Job(self, voice, speed, sentences, more, chars)
            self.jobs.append(job)
            self.cond.notify()
        return job

    def call(self, fn, *args) -> Future:
        """``fn(*args)`` run by the worker before its next turn of decoding (any thread may ask):
        the model and the vocoder are the worker's, so work on them outside a request waits for
        it, rather than running beside it. → its future (cancelled if the engine stops first)."""
        future: Future = Future()
        with self.cond:
            if self.stopping:
                future.cancel()
            else:
                self.calls.append((future, fn, args))
                self.cond.notify()
        return future

    @property
    def in_flight(self) -> int:
        return len(self.jobs)

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()
        self.thread.join(timeout=10)
        with self.cond:  # asked for too late: their waiters are told, not left waiting
            for future, _, _ in self.calls:
                future.cancel()
            self.calls = []

    # ------------------------------------------------------------------------ the worker
    def _ready(self, job: Job) -> bool:
        return job.cancelled or job.active is not None or bool(job.pending) or not job.more

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.stopping and not self.calls and not any(self._ready(j) for j in self.jobs):
                    self.cond.wait()
                if self.stopping:
                    return
                calls, self.calls = self.calls, []
                for j in [j for j in self.jobs if j.cancelled]:
                    self._finish(j, "cancelled")
                jobs = list(self.jobs)
                starting = [(j, j.pending.popleft()) for j in jobs if j.active is None and j.pending]
            self._calls(calls)
            if starting:
                self._speak(starting)
            self._next_pieces([j for j in jobs if j.active is not None and not j.cancelled])
            with self.cond:
                for j in jobs:
                    if j.active is None and not j.pending and not j.more and not j.finished:
                        self._finish(j, "failed" if j.failed else "done")  # its log line, then the client
                        if not j.failed:
                            j.emit(Event("done"))

    @staticmethod
    def _calls(calls: list[tuple[Future, object, tuple]]) -> None:
        for future, fn, args in calls:
            if future.set_running_or_notify_cancel():  # False: its asker has gone
                try:
                    future.set_result(fn(*args))
                except Exception as e:  # the asker's to answer; the worker goes on
                    future.set_exception(e)

    def _finish(self, job: Job, how: str) -> None:
        """Under the lock: drop ``job``, with its log line."""
        job.finished = True
        if job in self.jobs:
            self.jobs.remove(job)
        if job.first_audio is not None:
            self.first_audio.append((time.perf_counter(), job.first_audio - job.t0))
        first = "-" if job.first_audio is None else f"{(job.first_audio - job.t0) * 1000:.0f} ms"
        self.log(f"{how}: voice {job.voice.name}, {job.chars} characters, "
                 f"{job.samples / self.sample_rate:.2f} s of audio, first audio after {first}")

    def _speak(self, starting: list[tuple[Job, Sentence]]) -> None:
        """Speak the first sentence waiting in each of these jobs, batched by speed and length."""
        s = self.synth
        for speed in sorted({j.speed for j, _ in starting}):
            group = [(j, t) for j, t in starting if j.speed == speed]
            try:  # no text is read here: requests go on checking theirs while this decodes
                spoken = s.speak_ids([t.ids for _, t in group], [j.voice.reference for j, _ in group],
                                     speed=speed, batch_size=self.max_batch, vocode=False,
                                     language=[t.language for _, t in group])
            except Exception as e:  # one bad batch must not stop the server
                self.log(f"error: speaking {len(group)} sentence(s) failed: {type(e).__name__}: {e}")
                for j, _ in group:
                    self._fail(j)
                continue
            for (j, sentence), sp in zip(group, spoken):
                if j.spoken:
                    self._send(j, self.pause)
                symbols = [s.text.vocab.symbols[i] for i in sp.ids]
                j.emit(Event("words", words=timings.words(sentence.text, symbols, sp.attn, sp.mel.shape[0], self.r,
                                                          self.hop / self.sample_rate, j.samples / self.sample_rate)))
                # only a request's first sentence starts with a short piece: by a later one, the
                # client has audio to play, and a full piece wastes less of its window on context
                first = pieces.FIRST if not j.spoken else pieces.REST
                j.active, j.spoken = pieces.Pieces(sp.mel, self.hop, first), j.spoken + 1

    def _fail(self, job: Job) -> None:
        job.emit(Event("error", message="the model could not speak this text"))
        job.more, job.pending, job.active, job.failed = False, deque(), None, True

    def _next_pieces(self, jobs: list[Job]) -> None:
        """The next piece of each of these jobs' sentences: vocoded together where batching is on."""
        windows = [j.active.window() for j in jobs]
        try:
            if self.max_batch > 1:
                wavs = pieces.vocode(self.synth.to_wave, windows)
            else:
                wavs = [self.synth.to_wave(w) for w in windows]
        except Exception as e:  # as in _speak: these requests end, the server goes on
            self.log(f"error: turning {len(jobs)} piece(s) into audio failed: {type(e).__name__}: {e}")
            for j in jobs:
                self._fail(j)
            return
        for j, wav in zip(jobs, wavs):
            self._send(j, j.active.take(wav))
            if j.active.done:
                j.active = None

    def _send(self, job: Job, wav: np.ndarray) -> None:
        if job.first_audio is None:
            job.first_audio = time.perf_counter()
        job.samples += wav.size
        job.emit(Event("audio", wav=wav))
