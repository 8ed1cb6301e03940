"""train.recompute: each transformer block recomputed in the backward pass keeps less for the
backward and computes the same loss and gradients, eager and compiled."""
import copy

import torch

from myxtts.config import load
from myxtts.models.layers import CrossBlock, DecoderBlock, EncoderBlock
from myxtts.models.xtts import XTTS
from myxtts.train.compile import compile_step, compiled_graphs
from myxtts.train.optim import build_optimizer, build_scheduler
from myxtts.train.precision import resolve
from myxtts.train.recompute import recompute_blocks, saved_bytes
from myxtts.train.step import TrainStep

from .conftest import FAST
from .test_step import _batch


def _models():
    cfg = load("tiny", [o for o in FAST if o.startswith("model.")])
    torch.manual_seed(0)
    plain = XTTS(cfg.model, 20, 80)
    again = copy.deepcopy(plain)
    blocks = [m for m in plain.modules() if isinstance(m, (EncoderBlock, CrossBlock, DecoderBlock))]
    assert recompute_blocks(again) == len(blocks) > 0
    return cfg, plain, again


def _loss_and_grads(model, batch, seed=7):
    torch.manual_seed(seed)  # dropout on: both draw the same masks
    loss = model.losses(batch, model(batch))["loss"]
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return loss.detach(), grads


def test_recomputed_blocks_keep_less_and_compute_the_same():
    _, plain, again = _models()
    batch = _batch(tt=24, tm=64)
    want, want_g = _loss_and_grads(plain, batch)
    got, got_g = _loss_and_grads(again, batch)
    torch.testing.assert_close(got, want)
    assert want_g.keys() == got_g.keys()
    for name, g in want_g.items():
        torch.testing.assert_close(got_g[name], g, rtol=1e-4, atol=1e-6, msg=name)
    kept = saved_bytes(lambda: plain.losses(batch, plain(batch))["loss"])
    recomputed = saved_bytes(lambda: again.losses(batch, again(batch))["loss"])
    assert recomputed < 0.8 * kept, (recomputed, kept)


def test_recompute_works_compiled_for_every_shape():
    """Under the compiled step (dynamo and AOTAutograd; aot_eager for speed) the recomputed
    model trains: one graph for two shapes, the loss of the plain compiled step."""
    cfg, plain, again = _models()
    torch._dynamo.reset()
    losses = {}
    for name, model in (("plain", plain), ("recompute", again)):
        opt = build_optimizer(model, cfg.train)
        step = TrainStep(model, model, opt, build_scheduler(opt, cfg.train), resolve("fp32", torch.device("cpu")),
                         cfg.train)
        compile_step(step, "default", backend="aot_eager")
        g0 = compiled_graphs()
        torch.manual_seed(3)
        for s in (dict(tt=16, tm=32), dict(tt=32, tm=64)):
            step([_batch(**s)])
        assert compiled_graphs() - g0 == 1
        losses[name] = step.read_window()["loss"]
    assert abs(losses["plain"] - losses["recompute"]) < 1e-4 * abs(losses["plain"])


def test_generation_does_not_recompute():
    _, plain, again = _models()
    again.eval()
    b = _batch()
    with torch.no_grad():
        mels, lens, _ = again.generate(b["tokens"][:1], b["token_lens"][:1], b["ref_mel"][:1],
                                       b["ref_lens"][:1], max_steps=4)
    assert torch.isfinite(mels).all() and mels.shape[0] == 1
