"""The voice to speak in, and token ids spoken in it: the layer under a loaded run.

:class:`myxtts.infer.Synthesizer` (a run loaded once, or a model in training) reads text into
ids and hands them to :func:`speak_ids`; ``myxtts synthesize``, the training samples, ``eval``
(the periodic one included), ``serve`` and ``export``'s check all speak through it, so what is
measured is what users hear.

The reference rule is the one training follows: the model saw ``data.ref_seconds`` of another
utterance of the speaker (see :mod:`myxtts.data.dataset`), so a longer reference is cut to its
first ``data.ref_seconds``, and a clip from a file says so. No reference is the *neutral voice*:
the reference fully masked out, the resampler's learned latents alone condition the decoder
(trained through ``model.ref_dropout``). A model with ``model.speaker_embedding=ge2e`` also
hears the reference's GE2E embedding, of the whole clip as training did (:func:`voice_embedding`).

The same text, reference and seed give the same audio on every path: each batch draws from a
fresh CPU generator seeded with ``seed`` (the same on any device), and a text spoken alone is a
batch of one.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from myxtts import audio
from myxtts.data import embeddings
from myxtts.data.dataset import ref_frames_for
from myxtts.errors import UserError

MIN_REF_SECONDS = 0.5
SILENT_DBFS = -60.0  # a reference or an output whose level stays below this is silence
ToWave = Callable[[torch.Tensor], np.ndarray]  # (T, n_mels) log-mel → (T * hop,) waveform: vocode.MelToWave


def dbfs(x: float) -> float:
    return 20 * math.log10(max(x, 1e-10))


@dataclass(frozen=True)
class Reference:
    """The voice to speak in."""

    mel: torch.Tensor  # (Tr, n_mels) log-mel on the CPU; Tr == 0: the neutral voice
    latents: torch.Tensor | None = None  # (K, d) its conditioning, where computed once (with_latents)
    embedding: torch.Tensor | None = None  # (256,) GE2E embedding, for a model conditioned on one

    @property
    def frames(self) -> int:
        return int(self.mel.shape[0])


def with_latents(model, ref: Reference) -> Reference:
    """``ref`` with its conditioning computed once, for a voice spoken in many times (the server):
    ``speak`` then skips the reference encoder for it."""
    device = next(model.parameters()).device
    mel, lens = _batch([ref], ref.mel.shape[1])  # (1, Tr, M): as speak batches it
    emb = _embeddings([ref], getattr(getattr(model, "cfg", None), "speaker_embedding", "none"))
    latents = model.voice_latents(mel.to(device), lens.to(device),
                                  **{k: v.to(device) for k, v in emb.items()})
    return Reference(ref.mel, latents[0].float().cpu(), ref.embedding)


def voice_embedding(wavs: list[np.ndarray], cfg) -> torch.Tensor | None:
    """Clips of one voice (float waveforms at ``cfg.audio.sample_rate``) → the (256,) unit GE2E
    embedding a ``model.speaker_embedding=ge2e`` model is conditioned on (the mean over clips),
    computed as :mod:`myxtts.data.embeddings` computes it for training; None for other models."""
    if cfg.model.speaker_embedding != "ge2e":
        return None
    from myxtts.speaker_encoder import shared_encoder

    return mean_embedding([torch.from_numpy(e) for e in (shared_encoder().embed(w, cfg.audio.sample_rate)
                                                         for w in wavs) if e is not None])


def mean_embedding(embs: list[torch.Tensor]) -> torch.Tensor | None:
    """Several clips' (256,) embeddings → the voice's: their mean, unit length; None for none."""
    return torch.nn.functional.normalize(torch.stack(embs).float().mean(0), dim=0) if embs else None


def _embeddings(refs: list[Reference], kind: str) -> dict:
    """{"ref_emb": (B, 256)} for a model conditioned on speaker embeddings (``kind``:
    ``model.speaker_embedding``), else {} (the neutral voice's row is zeros, as training's
    dropped references are)."""
    if kind != "ge2e":
        return {}
    from myxtts.speaker_encoder import DIM

    return {"ref_emb": torch.stack([r.embedding if r.embedding is not None else torch.zeros(DIM)
                                    for r in refs])}


def neutral(cfg) -> Reference:
    return Reference(torch.zeros(0, cfg.audio.n_mels))


def reference_from_mel(mel, cfg, say: Callable[[str], None] | None = None,
                       what: str = "reference", embedding: torch.Tensor | None = None) -> Reference:
    """A log-mel ``(T, n_mels)`` (and its clip's :func:`voice_embedding`) → its first
    ``data.ref_seconds``, the length training showed the model. With ``say``, a cut is reported."""
    n = ref_frames_for(cfg.audio, cfg.data.ref_seconds)
    mel = torch.as_tensor(np.asarray(mel, dtype=np.float32))
    if mel.shape[0] > n and say is not None:
        hop_s = cfg.audio.hop_length / cfg.audio.sample_rate
        say(f"note: {what} is {mel.shape[0] * hop_s:.1f} s long; using its first "
            f"{cfg.data.ref_seconds:g} s, the length the model was trained with (data.ref_seconds)")
    return Reference(mel[:n].contiguous(), embedding=embedding)


def reference_from_cache(cache, i: int, cfg) -> Reference:
    """Utterance ``i`` of a prepared cache as the voice (eval, training samples, a run's voices)."""
    emb = None
    if cfg.model.speaker_embedding == "ge2e":  # the row training read, where computed
        stored = embeddings.row(cache, i)
        emb = torch.from_numpy(stored) if stored is not None else \
            voice_embedding([cache.wav(i).astype(np.float32) / 32768.0], cfg)
    return reference_from_mel(cache.mel(i), cfg, embedding=emb)


def reference_from_file(path, cfg, say: Callable[[str], None] | None = None) -> Reference:
    """A sound file of any rate, channel count and soundfile format, conditioned exactly like
    training audio (resample, trim, loudness) → :func:`reference_from_mel`. Silence, a clip
    shorter than ``MIN_REF_SECONDS`` of sound, an unreadable file and, for a model conditioned on
    GE2E embeddings, a clip the speaker encoder finds no voice in are a :class:`UserError`."""
    a = cfg.audio
    try:
        wav = audio.load_audio(path, a.sample_rate)
    except audio.AudioError as e:
        raise UserError(f"reference {path}: {e}") from None
    wav = audio.preprocess(wav, a)
    rms = float(np.sqrt(np.mean(wav.astype(np.float64) ** 2))) if wav.size else 0.0
    if dbfs(rms) < SILENT_DBFS:
        raise UserError(f"reference {path} is silent (RMS below {SILENT_DBFS:.0f} dBFS after "
                        f"trimming); give {cfg.data.ref_seconds:g} s or more of clear speech")
    seconds = wav.size / a.sample_rate
    if seconds < MIN_REF_SECONDS:
        raise UserError(f"reference {path} is too short ({seconds:.2f} s of sound after trimming); "
                        f"give {cfg.data.ref_seconds:g} s or more of clear speech")
    emb = voice_embedding([wav], cfg)
    if emb is None and cfg.model.speaker_embedding == "ge2e":  # else the neutral voice's zero row, unsaid
        raise UserError(f"reference {path}: the speaker encoder hears no voice in it, and this model "
                        f"(model.speaker_embedding=ge2e) is conditioned on one; give "
                        f"{cfg.data.ref_seconds:g} s or more of clear speech")
    return reference_from_mel(audio.mel_spectrogram(wav, a), cfg, say, f"reference {Path(path).name}", emb)


@dataclass
class Spoken:
    """What the model made of one text."""

    mel: torch.Tensor  # (T, n_mels) log-mel on the CPU
    attn: np.ndarray  # (ceil(T / r), Tt) alignment
    wav: np.ndarray | None  # (T * hop,) float32; None where the caller turns the mel into audio
    stopped: bool  # ended on its own, before model.max_decoder_steps
    seconds_taken: float  # wall time of the batch it was spoken in: decoding plus mel-to-audio
    ids: tuple[int, ...] = ()  # (Tt,) the token ids read, end of sentence included: attn's columns


def _batch(refs: list[Reference], n_mels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """References → ref_mel (B, Tr, M) padded with silence, ref_lens (B,)."""
    tr = max(1, max(r.frames for r in refs))  # the neutral voice: one frame, fully masked
    mel = torch.full((len(refs), tr, n_mels), math.log(audio.LOG_FLOOR))
    for i, r in enumerate(refs):
        mel[i, :r.frames] = r.mel
    return mel, torch.tensor([r.frames for r in refs])


@torch.no_grad()
def speak_ids(model, cfg, ids: list[tuple[int, ...]], references: Reference | list[Reference],
              to_wave: ToWave | None, *, seed: int = 0, batch_size: int = 1, speed: float = 1.0,
              languages: list[int] | None = None) -> list[Spoken]:
    """Token ids (each a sentence read by the run's text front end, end of sentence included),
    in its reference's voice (one for all, or one each) → one :class:`Spoken` each, in order.

    ``batch_size`` sentences of similar length are decoded together; 1 gives each its own
    latency in ``seconds_taken``. ``speed`` > 1 speaks faster: the duration decoder's predicted
    durations are divided by it (the autoregressive decoder has none to scale). ``to_wave`` None
    leaves ``wav`` None, for a caller that turns the mel into audio itself (the server, in
    pieces as it streams). ``languages``: each sentence's row of the language table, for a model
    of several languages (None for one of one)."""
    refs = references if isinstance(references, list) else [references] * len(ids)
    if len(refs) != len(ids):
        raise ValueError(f"{len(ids)} sentences but {len(refs)} references")
    if speed != 1.0 and cfg.model.decoder != "duration":
        raise UserError(f"speed {speed:g}: only the duration decoder can speak faster or slower "
                        f"(this model's is model.decoder={cfg.model.decoder})")
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # similar lengths batch together
    out: list = [None] * len(ids)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        rows = None if languages is None else torch.tensor([languages[i] for i in idx])  # (B,)
        for i, spoken in zip(idx, _decode_batch(model, cfg, [ids[i] for i in idx], [refs[i] for i in idx],
                                                to_wave, seed, speed, rows)):
            out[i] = spoken
    return out


def _decode_batch(model, cfg, ids: list[tuple[int, ...]], refs: list[Reference], to_wave: ToWave | None,
                  seed: int, speed: float, languages: torch.Tensor | None) -> list[Spoken]:
    """One batch of :func:`speak_ids`: a fresh CPU generator seeded with ``seed`` (the same
    output on any device), so a sentence spoken in a batch of one is always the same."""
    device = next(model.parameters()).device
    # passed only when asked: stand-in models lack them
    asked = {"speed": speed} if speed != 1.0 else {}
    if languages is not None:
        asked["language"] = languages.to(device)  # (B,)
    tokens = torch.zeros(len(ids), max(len(x) for x in ids), dtype=torch.long)  # (B, Tt)
    for j, x in enumerate(ids):
        tokens[j, :len(x)] = torch.tensor(x)
    ref_mel, ref_lens = _batch(refs, cfg.audio.n_mels)
    kept = [r.latents for r in refs]
    cond = {"latents": torch.stack(kept).to(device)} if all(x is not None for x in kept) else \
        {k: v.to(device) for k, v in _embeddings(refs, cfg.model.speaker_embedding).items()}
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    mel, lens, attn = model.generate(  # (B, T, M), (B,), (B, T / r, Tt)
        tokens.to(device), torch.tensor([len(x) for x in ids], device=device),
        ref_mel.to(device), ref_lens.to(device), generator=gen, **asked, **cond)
    r, cap = cfg.model.reduction, cfg.model.max_decoder_steps
    made = []
    for j, x in enumerate(ids):
        n = int(lens[j])
        m = mel[j, :n].float().cpu()  # (T, M)
        made.append((m, attn[j, :math.ceil(n / r), :len(x)].float().cpu().numpy(),
                     None if to_wave is None else np.asarray(to_wave(m), dtype=np.float32), n < cap * r))
    took = time.perf_counter() - t0
    return [Spoken(m, a, wav, stopped, took, tuple(x)) for (m, a, wav, stopped), x in zip(made, ids)]
