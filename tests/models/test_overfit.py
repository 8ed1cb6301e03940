"""The tiny model learns real speech: on four LJSpeech clips, a few seconds each, plain AdamW
drives the mel loss well down, the guided cross-attention becomes diagonal, and free-running
generation finds its own end at about the right length.

This is the test that catches a broken alignment path (masks, positions, guided attention,
teacher-forcing shift, stop targets): each of those breaks one of the assertions below."""
import torch

from myxtts.models.losses import attention_diagonality
from myxtts.models.xtts import XTTS

from .conftest import fit, lj_batch, tiny

CLIPS = ["LJ001-0002", "LJ001-0008", "LJ001-0004", "LJ001-0006"]  # 1.7-5.6 s
# The alignment and losses get there by ~120 steps; free-running stop lengths land within 10% of
# the truth for every seed tried (0-7) from ~200 on an AMD EPYC, but on an Intel Xeon seed 0 still
# ran one sentence to the step cap at 200 (the same code; other vector kernels) and stopped in
# time at 260 and 320: 300 keeps a margin on both.
STEPS, LR, WARMUP = 300, 2e-3, 30


def test_tiny_model_overfits_real_speech_and_learns_to_align():
    cfg = tiny()
    batch, vocab = lj_batch(cfg, CLIPS, pad_multiple=cfg.data.pad_multiple)
    torch.manual_seed(0)
    model = XTTS(cfg.model, len(vocab), cfg.audio.n_mels)
    history = fit(model, batch, STEPS, LR, WARMUP)

    first, last = history[0], history[-1]
    assert last["mel_l1"] < 0.5 * first["mel_l1"], (first, last)
    assert last["postnet_l1"] < 0.5 * first["postnet_l1"], (first, last)
    # Uniform attention puts ~0.2 of its mass in the +-0.1 band; a learned alignment ~0.9.
    assert first["attn_diag"] < 0.3
    assert last["attn_diag"] > max(0.6, 2 * first["attn_diag"]), (first, last)
    assert last["stop_bce"] < 0.25 * first["stop_bce"]

    # Free-running: every sentence ends through its own stop token, near its true length, and
    # the alignment it follows is diagonal.
    r, cap = cfg.model.reduction, cfg.model.max_decoder_steps
    mels, lens, attn = model.generate(batch["tokens"], batch["token_lens"], batch["ref_mel"],
                                      batch["ref_lens"], generator=torch.Generator().manual_seed(0))
    assert bool((lens < cap * r).all()), lens
    ratio = lens.float() / batch["mel_lens"].float()
    assert bool(((ratio > 0.7) & (ratio < 1.4)).all()), (lens, batch["mel_lens"])
    assert float(attention_diagonality(attn, batch["token_lens"], lens, r)) > 0.5
    assert torch.isfinite(mels).all()
