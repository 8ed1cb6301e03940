"""Shapes, and the masking contract: extra padding never changes the outputs at valid positions;
the KV-cached generation step reproduces the teacher-forced pass."""
import pytest
import torch

from myxtts.models.layers import FeedForward, length_mask
from myxtts.models.mel_decoder import normalize_mel

from .conftest import SILENCE, random_batch, still_model


def test_forward_shapes():
    model, cfg = still_model()
    batch = random_batch()
    out = model(batch)
    b, tm, tt, r = 3, 64, 23, cfg.model.reduction
    assert out["mel_pre"].shape == out["mel_post"].shape == (b, tm, 80)
    assert out["stop_logits"].shape == (b, tm // r)
    assert out["attn"].shape == (b, tm // r, tt)
    # Text attention rows are distributions over the real tokens only.
    valid = length_mask(batch["token_lens"], tt)
    assert torch.allclose(out["attn"].sum(-1), torch.ones(b, tm // r), atol=1e-5)
    assert out["attn"].masked_select(~valid[:, None, :].expand_as(out["attn"])).abs().max() == 0


def test_padding_does_not_change_valid_outputs():
    model, cfg = still_model()
    tight = random_batch()
    loose = random_batch(tt=23 + 7, tm=64 + 16, tr=48 + 10)  # same data, more padding
    loose["tokens"][:, 23:] = 0
    with torch.no_grad():
        a, b = model(tight), model(loose)
    r = cfg.model.reduction
    for i, (n_tok, n_mel) in enumerate(zip(tight["token_lens"].tolist(), tight["mel_lens"].tolist())):
        s = -(-n_mel // r)
        for k in ("mel_pre", "mel_post"):
            torch.testing.assert_close(a[k][i, :n_mel], b[k][i, :n_mel], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a["stop_logits"][i, :s], b["stop_logits"][i, :s], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a["attn"][i, :s, :n_tok], b["attn"][i, :s, :n_tok], atol=1e-6, rtol=1e-5)
        assert b["attn"][i, :s, n_tok:].abs().max() == 0
    la, lb = model.losses(tight, a), model.losses(loose, b)
    for k in ("mel_l1", "postnet_l1", "stop_bce", "guided_attn", "attn_diag"):
        torch.testing.assert_close(la[k], lb[k], atol=1e-5, rtol=1e-5)


def test_reference_padding_and_neutral_voice():
    model, _ = still_model()
    batch = random_batch()
    enc = model.ref_encoder
    ref = normalize_mel(batch["ref_mel"])
    padded = torch.cat([ref, torch.randn(3, 9, 80) * 5], dim=1)  # garbage in the padding
    with torch.no_grad():
        torch.testing.assert_close(enc(ref, batch["ref_lens"]), enc(padded, batch["ref_lens"]),
                                   atol=1e-5, rtol=1e-5)
        # ref_lens == 0: the neutral voice, independent of whatever the reference holds.
        zero = torch.zeros(3, dtype=torch.long)
        n1, n2 = enc(ref, zero), enc(padded * 3, zero)
    assert torch.isfinite(n1).all()
    torch.testing.assert_close(n1, n2)
    torch.testing.assert_close(n1[0], n1[1])


def _latents_that_prefer_themselves(*overrides: str):
    """The reference encoder of a model whose resampler scores its latents as keys far above
    any reference feature (by about 80), as training left it on the demo corpus (attention
    share on the features 2e-6). → its latents for ``random_batch``'s three references
    (B, K, d)."""
    model, _ = still_model(*overrides)
    enc = model.ref_encoder
    attn, d = enc.blocks[0].attn, enc.latents.shape[1]
    heads = torch.arange(0, d, attn.dh)  # each head's first channel
    with torch.no_grad():
        enc.latents.zero_()
        enc.latents[:, 0] = 1.0  # latents: along channel 0 ...
        enc.proj.weight.mul_(10.0)  # features that differ by reference ...
        enc.proj.weight[0] = 0.0
        enc.proj.bias[0] = -5.0  # ... and point against it
        attn.q.weight.zero_(), attn.q.bias.zero_()
        attn.kv.weight[:d].zero_(), attn.kv.bias[:d].zero_()
        attn.q.weight[heads, 0] = 2.0  # every head's query and key read channel 0
        attn.kv.weight[heads, 0] = 2.0
        batch = random_batch()
        return enc(normalize_mel(batch["ref_mel"]), batch["ref_lens"])


def test_latents_given_a_reference_read_the_reference():
    """Latents that would rather read themselves still read the reference: its features are
    their only keys. With keys of their own as well (the old resampler) every reference gives
    the same latents: the collapse this rules out."""
    lat = _latents_that_prefer_themselves()
    assert (lat[0] - lat[1]).abs().max() > 5e-3 and (lat[1] - lat[2]).abs().max() > 5e-3
    old = _latents_that_prefer_themselves("model.ref_self_keys=true")
    torch.testing.assert_close(old[0], old[1])
    torch.testing.assert_close(old[1], old[2])


def test_losses_are_zero_dim_and_finite():
    model, _ = still_model()
    model.train()
    batch = random_batch()
    losses = model.losses(batch, model(batch))
    for k in ("loss", "mel_l1", "postnet_l1", "stop_bce", "guided_attn", "attn_diag"):
        assert losses[k].dim() == 0 and torch.isfinite(losses[k]), k
    losses["loss"].backward()
    assert all(p.grad is not None for p in model.parameters())
    assert 0.0 <= float(model.diagonality(batch, model(batch)).detach()) <= 1.0


def test_kv_cached_steps_match_teacher_forcing():
    """Feeding the true previous frames step by step through the cache gives the same frames,
    stop logits and alignment as the parallel teacher-forced pass."""
    model, cfg = still_model()
    batch = random_batch()
    r, dec = cfg.model.reduction, model.decoder
    with torch.no_grad():
        out = model(batch)
        memory, mask = model.encode(batch["tokens"], batch["token_lens"], batch["ref_mel"], batch["ref_lens"])
        kv = dec.memory_kv(memory)
        steps = batch["mel"].shape[1] // r
        caches = dec.new_caches(3, steps, memory.device, memory.dtype)
        last = normalize_mel(batch["mel"])[:, r - 1::r]  # (B, S, M)
        prev = torch.zeros(3, 1, 80)
        frames, stops, attn = [], [], []
        for t in range(steps):
            f, s, a = dec.step(prev, t, caches, kv, mask, batch["token_lens"], 23)
            frames.append(f), stops.append(s), attn.append(a)
            prev = last[:, t:t + 1]
    pre = torch.cat(frames, 1) * 2.0 - 5.0  # denormalise
    torch.testing.assert_close(pre, out["mel_pre"], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(torch.stack(stops, 1), out["stop_logits"], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(torch.stack(attn, 1), out["attn"], atol=1e-5, rtol=1e-4)


def test_generate_shapes_determinism_and_silence_after_stop():
    model, _ = still_model("model.prenet_dropout=0.5")
    batch = random_batch()
    args = (batch["tokens"], batch["token_lens"], batch["ref_mel"], batch["ref_lens"])

    def run(seed):
        return model.generate(*args, max_steps=12, generator=torch.Generator().manual_seed(seed))

    mels, lens, attn = run(7)
    assert mels.shape[0] == 3 and mels.shape[2] == 80 and mels.shape[1] % 2 == 0
    assert attn.shape == (3, mels.shape[1] // 2, 23)
    assert lens.shape == (3,) and bool((lens <= mels.shape[1]).all()) and bool((lens >= 2).all())
    for i, n in enumerate(lens.tolist()):
        assert torch.all(mels[i, n:] == SILENCE)
    again = run(7)
    assert torch.equal(mels, again[0]) and torch.equal(lens, again[1])
    # Pre-net dropout stays on at inference: another seed, another rendition (decode all 12
    # steps so the difference is not hidden behind an early stop).
    full = [model.generate(*args, max_steps=12, stop_threshold=1.0,
                           generator=torch.Generator().manual_seed(seed))[0] for seed in (7, 8)]
    assert full[0].shape[1] == 24 and not torch.equal(full[0], full[1])


def test_generate_restores_training_mode():
    model, _ = still_model()
    model.train()
    batch = random_batch()
    model.generate(batch["tokens"], batch["token_lens"], batch["ref_mel"], batch["ref_lens"], max_steps=2)
    assert model.training


def test_a_convolving_feed_forward_hears_neighbours_and_never_padding():
    torch.manual_seed(0)
    ff = FeedForward(8, 2, 0.0, kernel=3)
    x = torch.randn(2 * 5, 8)  # (B*T, d): 2 sequences of 5 rows
    keep = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    out = ff(x, keep)
    noisy = x.clone().view(2, 5, 8)
    noisy[1, 3:] = 100.0  # what padding rows hold does not matter
    torch.testing.assert_close(ff(noisy.view(10, 8), keep).view(2, 5, 8)[1, :3], out.view(2, 5, 8)[1, :3])
    moved = x.clone().view(2, 5, 8)
    moved[0, 2] += 1.0  # a row's neighbours hear it; rows two away do not
    diff = (ff(moved.view(10, 8), keep) - out).view(2, 5, 8).abs().sum(-1)[0]
    assert (diff[1:4] > 0).all() and diff[0] == 0 and diff[4] == 0
    with pytest.raises(ValueError, match="keep"):
        ff(x)
