"""Speak a cache's held-out sentences, or new ones, and measure what comes out.

Each held-out (val) sentence is synthesized in its own speaker's voice: the reference is
another utterance of that speaker, cropped to ``data.ref_seconds`` as in training. New
sentences (text that is not in the corpus, :func:`plan_texts`) go to the training voices in
turn, each with its voice's first training utterance as the reference; they have no recording,
so their ground-truth figures are not measured. Then:

- **intelligibility**: WER and CER of an offline ASR's transcript of the output against the
  text, and, as the ceiling to compare with, the same ASR on the ground-truth recording and on
  *copy synthesis* (the ground-truth mel through the same mel-to-audio inversion);
- **naturalness**: DNSMOS P.835 (overall, signal, background) and P.808 scores, estimated from
  the audio alone, of the output next to the same for the recording and copy synthesis;
- **voice**: the cosine of speaker embeddings between the output and its reference, next to the
  same with a reference of another speaker (a model that clones voices scores the first
  higher);
- **voices never heard** (zero-shot cloning): for sentences of a voice the model did not train
  on (the model file lists its training voices), the output's cosine to its own reference next
  to its highest cosine to a training voice found in the cache (that voice's first training
  utterance), and the share of outputs nearer their own voice than any training voice;
- **robustness**: the share of sentences that stopped on their own before
  ``model.max_decoder_steps``, output duration over ground-truth duration, and the real-time
  factor (synthesis wall time over audio seconds, mel-to-audio included).

A figure that cannot be measured (a single-speaker corpus has no mismatched voice; a cache
without waveforms whose source audio is gone has no recordings) is ``None``, with the reason in
``not_measured``.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from myxtts import audio
from myxtts.data.manifest import real_voice
from myxtts.errors import UserError
from myxtts.evaluate import metrics, require
from myxtts.evaluate.asr import Recognizer, whisper_language
from myxtts.evaluate.naturalness import SCORES, Naturalness
from myxtts.infer import Synthesis
from myxtts.speak import reference_from_cache
from myxtts.speaker_encoder import SpeakerEncoder, cosine

OF = ("", "_ground_truth", "_copy_synthesis")  # what was heard: the output, the recording, copy synthesis
DNSMOS = tuple(f"dnsmos_{k}{of}" for of in OF for k in SCORES)
ZERO_SHOT = ("zero_shot_speaker_cosine", "zero_shot_nearest_trained_cosine", "zero_shot_identified")
# The summary's figures, in the order reports list them.
FIGURES = ("wer", "cer", "wer_ground_truth", "cer_ground_truth", "wer_copy_synthesis",
           "cer_copy_synthesis", *DNSMOS, "speaker_cosine", "speaker_cosine_mismatched",
           *ZERO_SHOT, "stopped_share", "duration_ratio", "rtf")


@dataclass
class Sentence:
    """One sentence to speak and the utterances its voice references come from."""

    index: int | None  # its utterance in the cache (None: a new sentence, with no recording)
    id: str
    speaker: str
    text: str
    ref: int  # another utterance of the same speaker: the voice to clone
    other: int | None  # an utterance of another speaker: the mismatched control (None: one speaker)
    language: str | None = None  # the language it is read in (None: the model's own)


@dataclass
class Result:
    summary: dict  # FIGURES (None where not measured) + sentences, not_measured
    rows: list[dict]  # per sentence: texts, transcripts, figures
    spoken: list[Synthesis] = field(repr=False)
    recordings: list[np.ndarray | None] = field(repr=False)
    copies: list[np.ndarray | None] = field(repr=False)


def plan(cache, limit: int | None = None, split: str = "val") -> list[Sentence]:
    """The sentences of ``split`` (the first ``limit``): the held-out ones by default, or those
    the model trained on (``train``: has it learned to say what it heard?). Each comes with
    another utterance of its speaker as the reference, from the training split when there is
    one, and a reference of another speaker."""
    chosen = [int(i) for i in cache.indices(split)]
    if not chosen:
        raise UserError(f"{cache.path}: the cache has no held-out utterances to evaluate; prepare "
                        "it with a val.txt or data.val_fraction above 0" if split == "val"
                        else f"{cache.path}: the cache has no {split} utterances to evaluate")
    by_speaker = cache.by_speaker()  # training split first
    speakers = sorted(by_speaker)
    out = []
    for i in chosen[:limit]:
        s = int(cache.index.speaker[i])
        same = [j for j in by_speaker[s] if j != i]
        voice = real_voice(cache.speakers[s])  # a pseudo-speaker's copy of the voice is no control
        others = [o for o in speakers[speakers.index(s) + 1:] + speakers[:speakers.index(s)]
                  if real_voice(cache.speakers[o]) != voice]
        out.append(Sentence(i, cache.index.id[i], cache.speakers[s], cache.index.text[i],
                            ref=same[0] if same else i,
                            other=by_speaker[others[0]][0] if others else None, language=cache.language(i)))
    return out


def plan_texts(cache, texts: list[str], limit: int | None = None) -> list[Sentence]:
    """New sentences (the first ``limit``), each in a training voice of the cache in turn: the
    voice's first training utterance is the reference, another voice's the control."""
    texts = [t.strip() for t in texts if t.strip()][:limit]
    if not texts:
        raise UserError("no sentences to evaluate: the file has no text")
    train = set(int(i) for i in cache.indices("train"))
    voices = {s: i for s, i in cache.first_of_each_speaker().items() if i in train}
    if not voices:
        raise UserError(f"{cache.path}: the cache has no training utterances to take voices from")
    speakers = sorted(voices)
    out = []
    for k, text in enumerate(texts):
        s = speakers[k % len(speakers)]
        others = [o for o in speakers if real_voice(cache.speakers[o]) != real_voice(cache.speakers[s])]
        out.append(Sentence(None, f"new-{k + 1:03d}", cache.speakers[s], text, ref=voices[s],
                            other=voices[others[0]] if others else None))
    return out


def recording(cache, i: int) -> np.ndarray | None:
    """Utterance ``i``'s ground-truth waveform as the model saw it (trimmed, levelled)."""
    sr = cache.audio_cfg.sample_rate
    if cache.has_wav:
        return np.asarray(cache.wav(i), dtype=np.float32) / 32768.0
    path = Path(cache.index.audio[i])
    path = path if path.is_absolute() else cache.source_root / path
    try:
        return audio.preprocess(audio.load_audio(path, sr), cache.audio_cfg)
    except (audio.AudioError, OSError):
        return None


def speak_sentences(synth, cache, sentences: list[Sentence], seed: int = 0) -> list[tuple[Synthesis, float]]:
    """Each sentence in its reference's voice, through ``synthesize`` as ``myxtts synthesize``
    speaks a text (``synth``: a :class:`myxtts.infer.Synthesizer`), one text at a time → (its
    :class:`~myxtts.infer.Synthesis`, the seconds it took, mel-to-audio included)."""
    out = []
    for s in sentences:
        t0 = time.perf_counter()
        (said,) = synth.synthesize([s.text], reference_from_cache(cache, s.ref, synth.cfg), seed=seed,
                                   language=s.language)
        out.append((said, time.perf_counter() - t0))
    return out


class Listener:
    """The judges: a recogniser for each language heard (loaded when its language is first
    asked for), a speaker encoder and DNSMOS, each loaded once (the eval extra). ``asr_model``:
    one model directory for every language instead of each language's own
    (:mod:`myxtts.evaluate.asr`)."""

    def __init__(self, asr_model: str | Path | None = None, threads: int = 0):
        require()
        self.asr_model, self.threads = asr_model, threads
        self._recognizers: dict[str, Recognizer] = {}
        self.speaker = SpeakerEncoder()
        self.naturalness = Naturalness(threads=threads)
        self._embeddings: dict[int, np.ndarray | None] = {}

    def recognizer(self, language: str) -> Recognizer:
        """The recogniser of ``language`` (an espeak-ng code); codes of one Whisper language
        (en-us, en-gb) share one."""
        key = whisper_language(language)
        if key not in self._recognizers:
            self._recognizers[key] = Recognizer(self.asr_model, threads=self.threads, language=language)
        return self._recognizers[key]

    @property
    def asr(self) -> Recognizer:
        """The English recogniser."""
        return self.recognizer("en-us")

    def embed_utterance(self, cache, i: int) -> np.ndarray | None:
        if i not in self._embeddings:
            wav = recording(cache, i)
            self._embeddings[i] = None if wav is None else self.speaker.embed(wav, cache.audio_cfg.sample_rate)
        return self._embeddings[i]


def _dnsmos(listener: Listener, wav: np.ndarray | None, sr: int, of: str = "") -> dict:
    """A row's DNSMOS figures of ``wav`` (None without audio), keys suffixed with ``of``."""
    scores = listener.naturalness.score(wav, sr) if wav is not None else dict.fromkeys(SCORES)
    return {f"dnsmos_{k}{of}": v for k, v in scores.items()}


def _mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(statistics.fmean(xs)) if xs else None


def _trained_references(cache, trained_voices: list[str] | None) -> dict[str, int]:
    """Each training voice the cache holds → its first training utterance (its reference)."""
    return {cache.speakers[s]: i for s, i in cache.first_of_each_speaker().items()
            if cache.speakers[s] in (trained_voices or ())}


def evaluate(synth, cache, sentences: list[Sentence], listener: Listener,
             *, ground_truth: bool = True, seed: int = 0,
             trained_voices: list[str] | None = None) -> Result:
    """Speak ``sentences`` with ``synth`` (a :class:`myxtts.infer.Synthesizer`, loaded, or
    :meth:`~myxtts.infer.Synthesizer.of` a model in training) and score them; ``ground_truth``
    also scores the recordings and copy synthesis (they do not change during training, so
    periodic evaluation does it once). ``trained_voices``: the voices the model trained on
    (:func:`myxtts.models.checkpoint.trained_voices`; None: not known); sentences of other
    voices are scored as zero-shot clones."""
    cfg, vocode = synth.cfg, synth.to_wave
    sr = cfg.audio.sample_rate
    trained = _trained_references(cache, trained_voices)
    languages = [synth.language(s.language) for s in sentences]  # one the model lacks: said before speaking
    heard_by = {lang: listener.recognizer(lang) for lang in languages}  # a missing model too
    said = speak_sentences(synth, cache, sentences, seed)
    spoken = [sp for sp, _ in said]
    recorded = [ground_truth and s.index is not None for s in sentences]
    recs = [recording(cache, s.index) if r else None for s, r in zip(sentences, recorded)]
    copies = [np.asarray(vocode(torch.from_numpy(np.asarray(cache.mel(s.index), dtype=np.float32))),
                         dtype=np.float32) if r else None for s, r in zip(sentences, recorded)]
    rows = []
    for s, (sp, took), rec, cp, r, lang in zip(sentences, said, recs, copies, recorded, languages):
        asr = heard_by[lang]
        hyp = asr.transcribe(sp.wav, sr)
        emb = listener.speaker.embed(sp.wav, sr)
        seconds = sp.wav.size / sr
        gt_seconds = None if s.index is None else int(cache.index.n_frames[s.index]) * cfg.audio.hop_length / sr
        row = {"id": s.id, "speaker": s.speaker, "language": lang, "text": s.text,
               "reference": cache.index.id[s.ref],
               "mismatched_reference": None if s.other is None else cache.index.id[s.other],
               "transcript": hyp, "wer": metrics.word_errors(s.text, hyp, lang).rate,
               "cer": metrics.char_errors(s.text, hyp, lang).rate,
               "speaker_cosine": cosine(emb, listener.embed_utterance(cache, s.ref)),
               "speaker_cosine_mismatched": None if s.other is None else
               cosine(emb, listener.embed_utterance(cache, s.other)),
               **_zero_shot(emb, s, trained_voices, trained, cache, listener),
               "stopped": sp.stopped, "seconds": round(seconds, 3),
               "seconds_ground_truth": None if gt_seconds is None else round(gt_seconds, 3),
               "duration_ratio": seconds / gt_seconds if gt_seconds else None,
               "rtf": took / seconds if seconds else None, **_dnsmos(listener, sp.wav, sr)}
        if r:
            row["transcript_ground_truth"] = None if rec is None else asr.transcribe(rec, sr)
            row["transcript_copy_synthesis"] = asr.transcribe(cp, sr)
            row |= _dnsmos(listener, rec, sr, "_ground_truth") | _dnsmos(listener, cp, sr, "_copy_synthesis")
        rows.append(row)
    summary = summarize(rows, cfg, ground_truth, trained_voices is not None)
    summary["asr"] = {lang: asr.describe() for lang, asr in heard_by.items()}  # which heard which language
    return Result(summary, rows, spoken, recs, copies)


def _zero_shot(emb, s: Sentence, trained_voices, trained: dict[str, int], cache, listener) -> dict:
    """A row's zero-shot figures: {} for a voice the model trained on (or where that is unknown)."""
    if trained_voices is None or s.speaker in trained_voices:
        return {}
    cos = {name: cosine(emb, listener.embed_utterance(cache, i)) for name, i in trained.items()}
    cos = {k: v for k, v in cos.items() if v is not None}
    nearest = max(cos, key=cos.get) if cos else None
    return {"zero_shot": True, "nearest_trained_voice": nearest,
            "speaker_cosine_nearest_trained": cos.get(nearest)}


def _zero_shot_summary(rows: list[dict], voices_known: bool, not_measured: dict) -> dict:
    """ZERO_SHOT figures over the rows of voices the model never heard; the reason where none."""
    unseen = [r for r in rows if r.get("zero_shot")]
    pairs = [(r["speaker_cosine"], r["speaker_cosine_nearest_trained"]) for r in unseen
             if r["speaker_cosine"] is not None and r["speaker_cosine_nearest_trained"] is not None]
    if not pairs:
        not_measured |= dict.fromkeys(ZERO_SHOT, NO_VOICE_LIST if not voices_known else
                                      "every voice of these sentences was heard in training" if not unseen
                                      else "the cache holds none of the model's training voices")
        return dict.fromkeys(ZERO_SHOT)
    return {"zero_shot_speaker_cosine": _mean(p[0] for p in pairs),
            "zero_shot_nearest_trained_cosine": _mean(p[1] for p in pairs),
            "zero_shot_identified": sum(a > b for a, b in pairs) / len(pairs)}


PERIODIC = "not scored in periodic evaluation (see the first one)"
NO_VOICE_LIST = "the model file does not list the voices it trained on (written before model files did)"
NO_RECORDING = "no ground-truth audio (the cache holds no waveforms and the source is gone)"
NEW_TEXT = "new sentences: no recording of them"


def summarize(rows: list[dict], cfg, ground_truth: bool = True, voices_known: bool = False) -> dict:
    """The figures over ``rows``; with sentences in several languages, the same figures over each
    language's alone too (``by_language``), as a score of one language says nothing of another."""
    languages = list(dict.fromkeys(r["language"] for r in rows))  # in the order first spoken
    out = _summarize(rows, cfg, ground_truth, voices_known) | {"languages": languages}
    if len(languages) > 1:
        out["by_language"] = {lang: _summarize([r for r in rows if r["language"] == lang], cfg, ground_truth,
                                               voices_known) for lang in languages}
    return out


def _summarize(rows: list[dict], cfg, ground_truth: bool, voices_known: bool) -> dict:
    refs, langs = [r["text"] for r in rows], [r["language"] for r in rows]
    out: dict = {"sentences": len(rows)}
    not_measured: dict[str, str] = {}
    new_text = bool(rows) and all(r.get("seconds_ground_truth", 0) is None for r in rows)  # plan_texts
    out["wer"] = metrics.wer(refs, [r["transcript"] for r in rows], langs)
    out["cer"] = metrics.cer(refs, [r["transcript"] for r in rows], langs)
    for key, name in (("transcript_ground_truth", "ground_truth"),
                      ("transcript_copy_synthesis", "copy_synthesis")):
        pairs = [(r["text"], r[key], r["language"]) for r in rows if r.get(key) is not None]
        if not ground_truth:
            why = PERIODIC
        elif new_text:
            why = NEW_TEXT
        elif not pairs:
            why = NO_RECORDING
        else:
            why = None
        out[f"wer_{name}"] = metrics.wer(*zip(*pairs)) if pairs and ground_truth else None
        out[f"cer_{name}"] = metrics.cer(*zip(*pairs)) if pairs and ground_truth else None
        if why:
            not_measured[f"wer_{name}"] = not_measured[f"cer_{name}"] = why
    for of, what in zip(OF, ("output", "recording", "copy synthesis")):
        keys = [f"dnsmos_{k}{of}" for k in SCORES]
        out |= {key: _mean(r.get(key) for r in rows) for key in keys}  # rows hold them where scored
        if out[keys[0]] is None:
            if of and not ground_truth:
                why = PERIODIC
            elif of and new_text:
                why = NEW_TEXT
            elif of == "_ground_truth" and all(r.get("transcript_ground_truth") is None for r in rows):
                why = NO_RECORDING
            else:
                why = f"every {what} was silent"
            not_measured |= dict.fromkeys(keys, why)
    out["speaker_cosine"] = _mean(r["speaker_cosine"] for r in rows)
    out["speaker_cosine_mismatched"] = _mean(r["speaker_cosine_mismatched"] for r in rows)
    if out["speaker_cosine_mismatched"] is None:
        not_measured["speaker_cosine_mismatched"] = ("one speaker only: no other voice to compare with"
                                                     if all(r["mismatched_reference"] is None for r in rows)
                                                     else "silent output or references")
    if out["speaker_cosine"] is None:
        not_measured["speaker_cosine"] = "every output or reference was silent"
    out |= _zero_shot_summary(rows, voices_known, not_measured)
    out["stopped_share"] = sum(r["stopped"] for r in rows) / len(rows) if rows else None
    out["duration_ratio"] = _mean(r["duration_ratio"] for r in rows)
    if new_text:
        not_measured["duration_ratio"] = NEW_TEXT
    taken = sum(r["rtf"] * r["seconds"] for r in rows if r["rtf"] is not None)
    spoken = sum(r["seconds"] for r in rows)
    out["rtf"] = taken / spoken if spoken else None
    out["max_decoder_steps"] = cfg.model.max_decoder_steps
    out["not_measured"] = not_measured
    return out
