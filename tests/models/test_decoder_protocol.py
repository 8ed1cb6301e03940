"""Both decoders behind one protocol (models.xtts): the same signatures, and forward, losses and
generate called on the decoder itself return the documented keys and shapes."""
import inspect

import pytest
import torch

from myxtts.models.xtts import DECODERS

from .conftest import SILENCE, random_batch, still_model

OWN_OUTPUTS = {"autoregressive": {"stop_logits"}, "duration": {"log_dur", "dur", "align_logp"}}
OWN_LOSSES = {"autoregressive": {"stop_bce", "guided_attn"}, "duration": {"duration", "align"}}


def test_the_decoders_share_their_signatures():
    ar, dur = DECODERS["autoregressive"], DECODERS["duration"]
    for name in ("forward", "losses", "generate"):
        assert inspect.signature(getattr(ar, name)) == inspect.signature(getattr(dur, name)), name


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_protocol_outputs(decoder):
    model, cfg = still_model(f"model.decoder={decoder}")
    dec, r = model.decoder, cfg.model.reduction
    assert type(dec) is DECODERS[decoder]
    batch = random_batch()
    b, tm, tt = 3, 64, 23
    memory, mask = model.encode(batch["tokens"], batch["token_lens"], batch["ref_mel"], batch["ref_lens"])
    out = dec(batch["mel"], memory, mask, batch["mel_lens"], batch["token_lens"], tt)
    assert set(out) == {"mel_pre", "mel_post", "attn"} | OWN_OUTPUTS[decoder]
    assert out["mel_pre"].shape == out["mel_post"].shape == (b, tm, 80)
    assert out["attn"].shape == (b, tm // r, tt)

    losses = dec.losses(batch, out)
    assert set(losses) == {"loss", "mel_l1", "postnet_l1", "attn_diag"} | OWN_LOSSES[decoder]
    assert all(v.dim() == 0 and torch.isfinite(v) for v in losses.values())

    with torch.no_grad():
        mels, lens, attn = dec.generate(memory, mask, batch["token_lens"], tt, 6, 0.5,
                                        torch.Generator().manual_seed(0))
    t = mels.shape[1]
    assert mels.shape == (b, t, 80) and t % r == 0 and t <= 6 * r
    assert lens.shape == (b,) and bool((lens <= t).all())
    assert attn.shape == (b, t // r, tt)
    for i, n in enumerate(lens.tolist()):
        assert torch.all(mels[i, n:] == SILENCE)
