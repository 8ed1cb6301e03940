"""Text (+ reference wav) → wav: batched, KV-cached synthesis (``myxtts synthesize``).

Sentences are synthesised together (sorted by length, in batches), each stopping on its own
stop token. The reference clip may have any sample rate, channel count and soundfile format; it
is conditioned exactly like training audio (resample, trim, loudness) and must hold 0.5-10 s of
sound (longer clips are cut to their first 10 s). Without ``--reference`` the model's *neutral
voice* is used: the reference is fully masked out and the resampler's learned latents alone
condition the decoder (trained through ``model.ref_dropout``).

Without ``--vocoder``, Griffin-Lim turns mels into audio: it needs no training but sounds
noticeably worse (phasey, metallic), and the command says so.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from myxtts import audio
from myxtts.errors import UserError
from myxtts.models.checkpoint import load_model

MIN_REF_SECONDS, MAX_REF_SECONDS = 0.5, 10.0
SILENT_DBFS = -60.0
GRIFFIN_LIM_NOTE = ("note: no --vocoder given, using Griffin-Lim: intelligible but audibly lower "
                    "quality (phasey, metallic) than a trained HiFi-GAN vocoder")


def _device(name: str | None) -> torch.device:
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {name}: no CUDA device is available")
    return torch.device(name)


class Synthesizer:
    """Loads an acoustic checkpoint (and optionally a vocoder) once; synthesises many texts."""

    def __init__(self, checkpoint, vocoder=None, device: str | None = None, log=print):
        from myxtts.text import TextProcessor, Vocabulary  # the text front end of the checkpoint

        self.device, self.log = _device(device), log
        self.model, self.cfg, symbols, self.meta = load_model(checkpoint, self.device)
        if self.meta["kind"] != "acoustic":
            raise UserError(f"{self.meta['path']} is a {self.meta['kind']} checkpoint; "
                            "--checkpoint needs an acoustic model")
        self.text = TextProcessor(self.cfg.text, Vocabulary(symbols))
        self.vocoder = None
        if vocoder is not None:
            self.vocoder, vcfg, _, vmeta = load_model(vocoder, self.device)
            if vmeta["kind"] != "vocoder":
                raise UserError(f"{vmeta['path']} is an {vmeta['kind']} checkpoint, not a vocoder")
            keys = ("sample_rate", "n_mels", "n_fft", "hop_length", "win_length", "fmin", "fmax")
            diff = [f"audio.{k}: {getattr(vcfg.audio, k)} vs {getattr(self.cfg.audio, k)}"
                    for k in keys if getattr(vcfg.audio, k) != getattr(self.cfg.audio, k)]
            if diff:
                raise UserError("the vocoder was trained on other mel features than the acoustic "
                                f"model ({', '.join(diff)})")

    @property
    def sample_rate(self) -> int:
        return self.cfg.audio.sample_rate

    # ------------------------------------------------------------------------ inputs
    def encode(self, texts: list[str]):
        """→ tokens (B, Tt) long, token_lens (B,)."""
        ids = [self.text.encode(t) for t in texts]  # raises UnknownCharacterError (a UserError)
        tokens = torch.zeros(len(ids), max(map(len, ids)), dtype=torch.long)
        for i, seq in enumerate(ids):
            tokens[i, :len(seq)] = torch.tensor(seq)
        return tokens, torch.tensor([len(s) for s in ids])

    def reference(self, path=None):
        """A wav file → ref_mel (1, Tr, M), ref_lens (1,); None → neutral voice (length 0)."""
        a = self.cfg.audio
        if path is None:
            silence = torch.full((1, 1, a.n_mels), math.log(audio.LOG_FLOOR))
            return silence, torch.zeros(1, dtype=torch.long)
        try:
            wav = audio.load_audio(path, a.sample_rate)
        except audio.AudioError as e:
            raise UserError(f"reference {path}: {e}") from None
        wav = audio.preprocess(wav, a)
        rms = float(np.sqrt(np.mean(wav.astype(np.float64) ** 2))) if wav.size else 0.0
        if 20 * math.log10(max(rms, 1e-12)) < SILENT_DBFS:
            raise UserError(f"reference {path} is silent (RMS below {SILENT_DBFS:.0f} dBFS after "
                            "trimming); give 1-10 s of clear speech")
        seconds = wav.size / a.sample_rate
        if seconds < MIN_REF_SECONDS:
            raise UserError(f"reference {path} is too short ({seconds:.2f} s of sound after "
                            f"trimming); give 1-10 s of clear speech")
        if seconds > MAX_REF_SECONDS:
            self.log(f"note: reference is {seconds:.1f} s long; using its first "
                     f"{MAX_REF_SECONDS:.0f} s")
            n = int(MAX_REF_SECONDS * a.sample_rate) // a.hop_length * a.hop_length
            wav = wav[:n]
        mel = torch.from_numpy(audio.mel_spectrogram(wav, a))[None]  # (1, Tr, M)
        return mel, torch.tensor([mel.shape[1]])

    # ------------------------------------------------------------------------ synthesis
    def mels(self, texts: list[str], reference=None, seed: int = 0, batch_size: int = 16):
        """→ list of (T_i, M) log-mel tensors (on the CPU), in the order of ``texts``."""
        tokens, lens = self.encode(texts)
        ref_mel, ref_lens = self.reference(reference)
        gen = torch.Generator().manual_seed(seed)  # CPU generator: same output on any device
        order = sorted(range(len(texts)), key=lambda i: -int(lens[i]))  # similar lengths batch
        r, cap = self.cfg.model.reduction, self.cfg.model.max_decoder_steps
        out: list = [None] * len(texts)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            n = int(lens[idx].max())
            b = len(idx)
            mel, mel_lens, _ = self.model.generate(
                tokens[idx, :n].to(self.device), lens[idx].to(self.device),
                ref_mel.expand(b, -1, -1).to(self.device), ref_lens.expand(b).to(self.device),
                generator=gen)
            for j, i in enumerate(idx):
                length = int(mel_lens[j])
                if length >= cap * r:
                    self.log(f"warning: sentence {i + 1} did not end within "
                             f"model.max_decoder_steps={cap}; its audio is cut there")
                out[i] = mel[j, :length].float().cpu()
        return out

    def vocode(self, mels: list[torch.Tensor]) -> list[np.ndarray]:
        """(T, M) log-mels → waveforms of T * hop samples each."""
        a = self.cfg.audio
        # Griffin-Lim's STFT cannot frame a clip shorter than n_fft: pad very short outputs
        # (an untrained model may stop at once) with silence, then cut back.
        min_frames = a.n_fft // a.hop_length + 2
        wavs = []
        with torch.no_grad():
            for m in mels:  # one at a time: lengths differ and the generator is fully conv
                n = m.shape[0] * a.hop_length
                if m.shape[0] < min_frames:
                    pad = math.log(audio.LOG_FLOOR)
                    m = torch.cat([m, m.new_full((min_frames - m.shape[0], m.shape[1]), pad)])
                if self.vocoder is None:
                    wav = audio.griffin_lim(m, a)
                else:
                    wav = self.vocoder(m[None].to(self.device))[0]
                wavs.append(wav[:n].float().cpu().numpy())
        return wavs

    def __call__(self, texts: list[str], reference=None, seed: int = 0,
                 batch_size: int = 16) -> list[np.ndarray]:
        """texts → list of float32 waveforms at ``self.sample_rate``."""
        if self.vocoder is None:
            self.log(GRIFFIN_LIM_NOTE)
        return self.vocode(self.mels(texts, reference, seed, batch_size))

    def synthesize_to_file(self, texts: list[str], out, reference=None, seed: int = 0,
                           batch_size: int = 16) -> list[Path]:
        """Synthesise and write wavs: ``out`` is a .wav file for one text, else a directory
        (or a .wav stem, numbered). Returns the paths written."""
        paths = output_paths(out, len(texts))
        for path, wav in zip(paths, self(texts, reference, seed, batch_size)):
            audio.save_wav(path, wav, self.sample_rate)
        return paths
