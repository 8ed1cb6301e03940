"""The duration decoder (``model.decoder=duration``): shapes, the masking contract, generation
lengths from the predicted durations, and on real speech, that it learns a monotonic alignment,
the durations and the mel together."""
import pytest
import torch

from myxtts.models.aligner import durations_to_alignment
from myxtts.models.duration_decoder import frames_at_pace, length_scale_of
from myxtts.models.xtts import XTTS

from .conftest import SILENCE, fit, lj_batch, random_batch, still_model, tiny


def _model(*overrides: str):
    return still_model("model.decoder=duration", *overrides)


def test_forward_shapes_and_alignment():
    model, cfg = _model()
    batch = random_batch()
    out = model(batch)
    b, tm, tt, r = 3, 64, 23, cfg.model.reduction
    assert out["mel_pre"].shape == out["mel_post"].shape == (b, tm, 80)
    assert out["log_dur"].shape == out["dur"].shape == (b, tt)
    assert out["attn"].shape == (b, tm // r, tt)
    # The aligner's durations cover each clip exactly, every real token at least once.
    assert out["dur"].sum(dim=1).tolist() == batch["mel_lens"].float().tolist()
    for i, n in enumerate(batch["token_lens"].tolist()):
        assert (out["dur"][i, :n] >= 1).all() and (out["dur"][i, n:] == 0).all()


@pytest.mark.parametrize("frame_position", ["token", "local", "absolute"])
def test_padding_does_not_change_valid_outputs(frame_position):
    model, _ = _model(f"model.frame_position={frame_position}")
    tight = random_batch()
    loose = random_batch(tt=23 + 7, tm=64 + 16, tr=48 + 10)  # same data, more padding
    with torch.no_grad():
        a, b = model(tight), model(loose)
    for i, (n_tok, n_mel) in enumerate(zip(tight["token_lens"].tolist(), tight["mel_lens"].tolist())):
        assert torch.equal(a["dur"][i, :n_tok], b["dur"][i, :n_tok])
        for k in ("mel_pre", "mel_post"):
            torch.testing.assert_close(a[k][i, :n_mel], b[k][i, :n_mel], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a["log_dur"][i, :n_tok], b["log_dur"][i, :n_tok],
                                   atol=1e-5, rtol=1e-5)
    la, lb = model.losses(tight, a), model.losses(loose, b)
    for k in ("mel_l1", "postnet_l1", "duration", "align", "attn_diag"):
        torch.testing.assert_close(la[k], lb[k], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("frame_position", ["token", "local", "absolute"])
def test_losses_are_finite_and_reach_every_parameter(frame_position):
    model, _ = _model(f"model.frame_position={frame_position}")
    model.train()
    batch = random_batch()
    losses = model.losses(batch, model(batch))
    for k in ("loss", "mel_l1", "postnet_l1", "duration", "align", "attn_diag"):
        assert losses[k].dim() == 0 and torch.isfinite(losses[k]), k
    losses["loss"].backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, missing


def test_generate_length_is_the_sum_of_the_durations():
    model, cfg = _model()
    batch = random_batch()
    args = (batch["tokens"], batch["token_lens"], batch["ref_mel"], batch["ref_lens"])
    mels, lens, attn = model.generate(*args)
    r = cfg.model.reduction
    assert mels.shape[1] % r == 0 and mels.shape[1] == -(-int(lens.max()) // r) * r
    assert attn.shape == (3, mels.shape[1] // r, 23)
    for i, n in enumerate(lens.tolist()):
        assert n >= int(batch["token_lens"][i])  # at least a frame per token
        assert torch.all(mels[i, n:] == SILENCE) and torch.all(mels[i, :n] > SILENCE - 1e-3)
    assert torch.equal(mels, model.generate(*args)[0])  # no sampling anywhere
    capped = model.generate(*args, max_steps=5)[1]
    assert bool((capped <= 5 * r).all())


def test_frames_at_a_pace_round_the_frames_then_scale_them():
    """Predicted 2.4, 0.2 and 7.6 frames: rounded (2, at least 1, 8), then scaled and rounded again,
    every token still a frame; a speed is the length scale 1 / speed, and padding speaks nothing."""
    log_dur = torch.log1p(torch.tensor([[2.4, 0.2, 7.6, 3.0]]))
    mask = torch.tensor([[True, True, True, False]])
    at = lambda scale: frames_at_pace(log_dur, mask, torch.tensor(scale)).tolist()  # noqa: E731
    assert at(1.0) == [[2, 1, 8, 0]]
    assert at(2.0) == [[4, 2, 16, 0]]  # twice as slow: the rounded frames doubled, not 2.4 * 2 = 5
    assert at(0.5) == [[1, 1, 4, 0]]
    assert at(0.8) == frames_at_pace(log_dur, mask, length_scale_of(1.25)).tolist() == [[2, 1, 6, 0]]


def test_generate_at_a_speed_is_that_pace():
    model, _ = _model()
    with torch.no_grad():  # about 3.5 frames a token, so a pace has frames to scale
        model.decoder.duration.out.bias.fill_(1.5)
    batch = random_batch()
    args = (batch["tokens"], batch["token_lens"], batch["ref_mel"], batch["ref_lens"])
    lens = {speed: model.generate(*args, speed=speed)[1] for speed in (0.8, 1.0, 1.25)}
    assert bool((lens[0.8] >= lens[1.0]).all() and (lens[1.25] <= lens[1.0]).all())
    assert bool((lens[0.8] > lens[1.25]).any())


def test_tiny_duration_model_learns_real_speech():
    """Four LJSpeech clips, 150 steps of AdamW: the mel loss halves, the aligner's hard path is
    diagonal, and the predicted durations give each sentence about its true length."""
    cfg = tiny("model.decoder=duration")
    batch, vocab = lj_batch(cfg, ["LJ001-0002", "LJ001-0008", "LJ001-0004", "LJ001-0006"],
                            pad_multiple=cfg.data.pad_multiple)
    torch.manual_seed(0)
    model = XTTS(cfg.model, len(vocab), cfg.audio.n_mels)
    history = fit(model, batch, 150)
    first, last = history[0], history[-1]
    assert last["mel_l1"] < 0.5 * first["mel_l1"], (first, last)
    assert last["align"] < first["align"] and last["duration"] < 0.5 * first["duration"]
    assert last["attn_diag"] > 0.6, last

    mels, lens, _ = model.generate(batch["tokens"], batch["token_lens"], batch["ref_mel"],
                                   batch["ref_lens"])
    ratio = lens.float() / batch["mel_lens"].float()
    assert bool(((ratio > 0.75) & (ratio < 1.33)).all()), (lens, batch["mel_lens"])
    assert torch.isfinite(mels).all()


def test_a_frame_carries_its_index_within_its_token():
    """``token``: the frames of a token differ by how far into it they are, and only by that: a
    frame's vector depends on its token and its index there, not on what came before."""
    model, cfg = _model("model.frame_position=token")
    d = cfg.model.d_model
    text = torch.randn(1, 3, d)
    seen = {}

    def first_block(_, args):
        seen["x"] = args[0].clone()  # (B*Tm, d): what the decoder's first layer reads

    model.decoder.blocks[0].register_forward_pre_hook(first_block)
    latents, lens = torch.zeros(1, 1, d), torch.tensor([6])
    for dur in ([2, 3, 1], [1, 3, 2]):
        align = durations_to_alignment(torch.tensor([dur]), 6)  # (1, 6, 3)
        with torch.no_grad():
            model.decoder._decode(align, text, latents, lens)
        seen[tuple(dur)] = seen.pop("x")
    a, b = seen[(2, 3, 1)], seen[(1, 3, 2)]
    torch.testing.assert_close(a[2:5], b[1:4])  # token 1's three frames, wherever they start
    assert not torch.allclose(a[2], a[3])  # its first and second frames differ
    torch.testing.assert_close(a[0], b[0])  # the first frame of token 0 in both
