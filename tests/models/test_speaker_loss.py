"""The speaker loss (models.losses.speaker_contrast): what it says of voices kept apart, of voices
read the same, of one speaker, and that it reaches the reference encoder through the model."""
import math

import torch

from myxtts.models.losses import speaker_contrast

from .conftest import random_batch, still_model

SPEAKERS = torch.tensor([0, 0, 1, 1, 2, 2])
ALL_HEARD = torch.ones(6, dtype=torch.bool)


def voices(spread: float, seed: int = 0) -> torch.Tensor:
    """(6, 16): one shared direction, plus ``spread`` times a direction of each speaker's own."""
    g = torch.Generator().manual_seed(seed)
    shared, own = torch.randn(16, generator=g), torch.randn(3, 16, generator=g)
    return shared + spread * own[SPEAKERS] + 0.01 * torch.randn(6, 16, generator=g)


def test_voices_kept_apart_cost_little_and_voices_read_the_same_cost_the_odds():
    apart = speaker_contrast(voices(10.0), SPEAKERS, ALL_HEARD)
    same = speaker_contrast(voices(0.0), SPEAKERS, ALL_HEARD)
    # read the same: each row finds its one partner among 5 others by chance
    assert abs(same.item() - math.log(5)) < 0.05
    assert apart.item() < 0.05


def test_one_speaker_costs_nothing_and_pulls_nowhere():
    v = voices(1.0).requires_grad_()
    loss = speaker_contrast(v, torch.zeros(6, dtype=torch.long), ALL_HEARD)
    loss.backward()
    assert loss.item() == 0 and v.grad.abs().sum() == 0


def test_rows_without_a_reference_are_left_out():
    v = voices(0.0)
    heard = ALL_HEARD.clone()
    heard[0] = False  # speaker 0's other row keeps no partner: no term of its own, only a rival
    base = speaker_contrast(v, SPEAKERS, heard)
    v[0] = 100 * torch.randn(16)  # whatever the dropped row's latents say
    assert torch.equal(speaker_contrast(v, SPEAKERS, heard), base)
    assert abs(base.item() - math.log(4)) < 0.05  # 4 terms, each its partner among 4 others


def test_the_loss_reaches_the_reference_encoder():
    model, _ = still_model("model.speaker_loss_weight=0.1")
    model.train()
    batch = random_batch(token_lens=(23, 17, 9, 12), mel_lens=(64, 50, 31, 40), ref_lens=(48, 30, 12, 20))
    batch["speaker"] = torch.tensor([0, 0, 1, 1])
    losses = model.losses(batch, model(batch))
    assert losses["speaker"].item() > 0
    losses["speaker"].backward()
    conv = model.ref_encoder.convs[0].weight.grad
    assert conv is not None and conv.abs().sum() > 0
    off, _ = still_model("model.speaker_loss_weight=0")
    assert "speaker" not in off.losses(batch, off(batch))
