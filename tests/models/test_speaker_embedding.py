"""model.speaker_embedding=ge2e: the reference's GE2E embedding, projected, is one more latent
beside the reference encoder's; zero for the neutral voice."""
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from myxtts.infer import Synthesizer
from myxtts.models.mel_decoder import normalize_mel
from myxtts.models.xtts import XTTS
from myxtts.speak import Reference, neutral, with_latents
from myxtts.text import TextProcessor, Vocabulary

from .conftest import random_batch, still_model

GE2E = "model.speaker_embedding=ge2e"
TEXTS = ["a printer.", "in being comparatively modern."]


def unit(n: int, seed: int) -> torch.Tensor:
    """(n, 256) random unit rows, as GE2E embeddings are (non-negative: a ReLU comes before the norm)."""
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.rand(n, 256, generator=g), dim=1)


def with_emb(batch: dict, seed: int) -> dict:
    return {**batch, "ref_emb": unit(len(batch["tokens"]), seed)}


def heard(model: XTTS) -> XTTS:
    """``model`` with its projection scaled 50x, to the reference encoder's latents' size: as
    initialised (std 0.02) the embedding's latent has norm ~0.23 beside their ~11. (An untrained
    decoder hardly hears its memory at all: another reference mel moves its output by ~5e-3.)"""
    with torch.no_grad():
        model.speaker_proj.weight.mul_(50)
    return model


def differ(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Two outputs of a deterministic model differ by more than float noise."""
    return a.shape != b.shape or (a - b).abs().max() > 1e-4


def test_the_embedding_is_one_more_latent_zero_without_a_reference():
    model, cfg = still_model(GE2E)
    plain, _ = still_model()
    assert isinstance(model.speaker_proj, torch.nn.Linear) and plain.speaker_proj is None
    K, d = cfg.model.n_latents, cfg.model.d_model
    b = random_batch(ref_lens=(48, 0, 12))
    lat = model.conditioning(b["ref_mel"], b["ref_lens"], unit(3, 0))
    assert lat.shape == (3, K + 1, d)
    assert plain.conditioning(b["ref_mel"], b["ref_lens"]).shape == (3, K, d)
    # the first K are the reference encoder's; the last the projected embedding, zero for row 1
    assert torch.equal(lat[:, :K], model.ref_encoder(normalize_mel(b["ref_mel"]), b["ref_lens"]))
    assert torch.equal(lat[1, K], torch.zeros(d)) and lat[0, K].abs().sum() > 0 and lat[2, K].abs().sum() > 0
    assert torch.allclose(lat[0, K], model.speaker_proj(unit(3, 0)[0]))
    assert torch.equal(model.voice_latents(b["ref_mel"], b["ref_lens"], unit(3, 0)), lat)


def test_the_embedding_changes_the_voice_unless_there_is_no_reference():
    model, _ = still_model(GE2E)
    b = random_batch()
    with torch.no_grad():
        one, other = (model(with_emb(b, s))["mel_post"] for s in (1, 2))
        assert (one - other).abs().max() > 1e-6  # even as initialised
        heard(model)
        one, other = (model(with_emb(b, s))["mel_post"] for s in (1, 2))
        assert differ(one, other)
        assert torch.equal(model(with_emb(b, 1))["mel_post"], one)  # eval mode: no randomness
        none = {**b, "ref_lens": torch.zeros(3, dtype=torch.long)}  # the neutral voice / a dropped reference
        assert torch.equal(model(with_emb(none, 1))["mel_post"], model(with_emb(none, 2))["mel_post"])
    gen = [model.generate(b["tokens"], b["token_lens"], b["ref_mel"], b["ref_lens"], max_steps=8,
                          ref_emb=unit(3, s))[0] for s in (1, 2)]
    assert differ(gen[0], gen[1])
    gen = [model.generate(b["tokens"], b["token_lens"], b["ref_mel"][:, :1], torch.zeros(3, dtype=torch.long),
                          max_steps=8, ref_emb=unit(3, s))[0] for s in (1, 2)]
    assert torch.equal(gen[0], gen[1])


def test_a_model_conditioned_on_embeddings_needs_them():
    model, _ = still_model(GE2E)
    b = random_batch()
    with pytest.raises(ValueError, match="speaker embedding"):
        model(b)
    with pytest.raises(ValueError, match="speaker embedding"):
        model.generate(b["tokens"], b["token_lens"], b["ref_mel"], b["ref_lens"], max_steps=2)
    with pytest.raises(ValueError, match="speaker embedding"):
        model.voice_latents(b["ref_mel"], b["ref_lens"])


def test_training_reaches_the_projection():
    model, _ = still_model(GE2E)
    model.train()
    b = with_emb(random_batch(), 0)
    model.losses(b, model(b))["loss"].backward()
    for p in model.speaker_proj.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
    # every reference dropped (model.ref_dropout=1): the embedding's latent is zero, no gradient
    model.zero_grad(set_to_none=True)
    model.cfg.ref_dropout = 1.0
    model.losses(b, model(b))["loss"].backward()
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model.speaker_proj.parameters())


def test_a_voice_conditioned_once_speaks_as_one_given_its_embedding_each_time():
    _, cfg = still_model(GE2E, "model.decoder=duration", "model.max_decoder_steps=100")
    tp = TextProcessor(cfg.text)
    vocab = Vocabulary.build(Counter(s for t in TEXTS for s in tp.symbols(t)[0]))
    tp = TextProcessor(cfg.text, vocab)
    torch.manual_seed(0)
    model = heard(XTTS(cfg.model, len(vocab), cfg.audio.n_mels).eval())
    g = torch.Generator().manual_seed(3)
    mel = torch.randn(120, cfg.audio.n_mels, generator=g) * 2 - 5
    ref = Reference(mel, embedding=unit(1, 4)[0])
    kept = with_latents(model, ref)
    run = Synthesizer.of(model, cfg, tp, None, log=lambda _: None)

    def speak(voice):
        return run.speak_ids([run.encode(t) for t in TEXTS], voice, batch_size=2, vocode=False)

    K, d = cfg.model.n_latents, cfg.model.d_model
    assert kept.latents.shape == (K + 1, d) and torch.equal(kept.embedding, ref.embedding)
    each = speak(ref)
    once = speak(kept)
    for a, b in zip(each, once):
        assert a.mel.shape == b.mel.shape and torch.allclose(a.mel, b.mel, atol=1e-4)
    # speak hears the embedding: another one, another voice
    other = speak(Reference(mel, embedding=unit(1, 5)[0]))
    assert any(differ(a.mel, o.mel) for a, o in zip(each, other))
    # the neutral voice conditions on the zero embedding, latents or not
    voiceless = neutral(cfg)
    assert torch.equal(with_latents(model, voiceless).latents[K], torch.zeros(d))
    for a, b in zip(speak(voiceless),
                    speak(with_latents(model, voiceless))):
        assert a.mel.shape == b.mel.shape and torch.allclose(a.mel, b.mel, atol=1e-4)
