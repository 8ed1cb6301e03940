"""The engine on its own: a batch that fails ends only its own requests, and every request's
audio arrives in order, its words before their audio."""
from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
import torch

from myxtts.infer import Synthesizer
from myxtts.serve import engine as engine_module
from myxtts.serve.engine import Engine
from myxtts.serve.voices import NEUTRAL, Voice
from myxtts.speak import neutral, with_latents


@pytest.fixture(scope="module")
def engine(served):
    synth = Synthesizer(served.run, device="cpu", log=lambda m: None)
    lines: list[str] = []
    e = Engine(synth, max_batch=4, max_jobs=4, log=lines.append)
    e.lines = lines
    yield e
    e.stop()


async def collect(job) -> list:
    out = []
    while not out or out[-1].kind not in ("done", "error"):
        out.append(await job.events.get())
    return out


def test_a_failing_batch_ends_only_its_own_requests(engine, monkeypatch):
    voice = Voice(NEUTRAL, "no reference", with_latents(engine.synth.model, neutral(engine.synth.cfg)))
    real = engine.synth.speak_ids

    def speak_ids(ids, voice, **kwargs):
        if kwargs.get("speed") == 2.0:  # the batch of "Say boom now." alone
            raise RuntimeError("boom")
        return real(ids, voice, **kwargs)

    monkeypatch.setattr(engine.synth, "speak_ids", speak_ids)

    async def go():
        bad = engine.submit(voice, 2.0, engine.sentences("Say boom now."), chars=13)  # its own speed: its own batch
        good = engine.submit(voice, 1.0, engine.sentences("A first one. And a second one."), chars=30)
        return await asyncio.gather(collect(bad), collect(good))

    bad, good = asyncio.run(go())
    assert [e.kind for e in bad] == ["error"]
    kinds = [e.kind for e in good]
    assert kinds[-1] == "done" and "error" not in kinds
    # each sentence's words come before its audio: words, audio..., (pause) audio, words, audio...
    assert kinds[0] == "words" and kinds.count("words") == 2
    wav = np.concatenate([e.wav for e in good if e.kind == "audio"])
    first, second = (e.words for e in good if e.kind == "words")
    assert [w.word for w in first] == ["a", "first", "one"] and len(second) == 4
    assert second[0].start >= first[-1].end + 0.25 and second[-1].end <= wav.size / engine.sample_rate + 1e-6
    assert any(line.startswith("error: speaking 1 sentence(s) failed: RuntimeError: boom") for line in engine.lines)
    assert any(line.startswith("done: voice neutral, 30 characters") for line in engine.lines)
    assert any(line.startswith("failed: voice neutral, 13 characters") for line in engine.lines)


def test_a_failing_vocoder_ends_the_requests_it_was_speaking_and_the_engine_goes_on(engine, monkeypatch):
    voice = Voice(NEUTRAL, "no reference", with_latents(engine.synth.model, neutral(engine.synth.cfg)))

    def broken(*args, **kwargs):
        raise RuntimeError("vocoder down")

    async def one(text):
        return await collect(engine.submit(voice, 1.0, engine.sentences(text), chars=len(text)))

    with monkeypatch.context() as m:
        m.setattr(engine_module.pieces, "vocode", broken)
        assert [e.kind for e in asyncio.run(one("Hello there."))] == ["words", "error"]
    assert asyncio.run(one("Hello again."))[-1].kind == "done"
    assert any("turning 1 piece(s) into audio failed: RuntimeError: vocoder down" in line for line in engine.lines)


def test_a_request_is_read_once_and_decoding_takes_no_turn_on_the_phonemizer(engine, monkeypatch):
    """The text is read into tokens when the request is checked, never again; and while another
    request holds the phonemizer's lock (reading its own text), the engine still speaks."""
    voice = Voice(NEUTRAL, "no reference", with_latents(engine.synth.model, neutral(engine.synth.cfg)))
    reads = []
    real = engine.synth.text.encode
    monkeypatch.setattr(engine.synth.text, "encode", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    sentences = engine.sentences("A first one. And a second one.")
    assert len(reads) == 2 and [s.text for s in sentences] == reads

    async def go():
        return await asyncio.wait_for(collect(engine.submit(voice, 1.0, sentences, chars=30)), timeout=120)

    with engine.text_lock:
        events = asyncio.run(go())
    assert events[-1].kind == "done" and any(e.kind == "audio" for e in events)
    assert len(reads) == 2  # speaking read nothing again


def test_a_served_sentence_is_the_mel_synthesize_makes(engine, monkeypatch):
    """The server reads and speaks a text through the run's own layers, so its mel is the one
    ``synthesize`` makes for the same text, voice and seed, frame for frame."""
    voice = Voice(NEUTRAL, "no reference", with_latents(engine.synth.model, neutral(engine.synth.cfg)))
    real, made = engine.synth.speak_ids, []

    def speak_ids(ids, voices, **kwargs):
        made.extend(real(ids, voices, **kwargs))
        return made[-len(ids):]

    monkeypatch.setattr(engine.synth, "speak_ids", speak_ids)
    text = "The printers of the fifteenth century were artists."

    async def go():
        return await collect(engine.submit(voice, 1.0, engine.sentences(text), chars=len(text)))

    assert asyncio.run(go())[-1].kind == "done"
    monkeypatch.undo()
    (said,) = engine.synth.synthesize([text], voice)
    assert said.parts == len(made) == 1 and torch.equal(made[0].mel, said.mel)


def test_model_work_beside_the_requests_is_run_by_the_worker(engine):
    """An upload's conditioning or a reference's vocoding is the worker's to run, between its turns
    for the requests in flight, and while a text is being read (the phonemizer's lock guards the
    phonemizer alone); a failure is its asker's, and the worker goes on."""
    voice = Voice(NEUTRAL, "no reference", with_latents(engine.synth.model, neutral(engine.synth.cfg)))

    async def go():
        job = engine.submit(voice, 1.0, engine.sentences("A first one. And a second one."), chars=30)
        with engine.text_lock:
            ran_on = await asyncio.wait_for(asyncio.wrap_future(engine.call(threading.current_thread)), 120)
        return ran_on, await asyncio.wait_for(collect(job), timeout=120)

    ran_on, events = asyncio.run(go())
    assert ran_on is engine.thread and events[-1].kind == "done"
    with pytest.raises(ZeroDivisionError):
        engine.call(lambda: 1 / 0).result(timeout=120)
    assert engine.call(len, "four").result(timeout=120) == 4


def test_model_work_asked_of_a_stopped_engine_is_cancelled(engine):
    stopped = Engine(engine.synth, log=lambda m: None)
    stopped.stop()
    assert stopped.call(len, "four").cancelled()
