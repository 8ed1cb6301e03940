"""The blocks under bf16 autocast: the residual stream and its norms stay in the compute dtype
from each stack's input to its output (an fp32 stream doubles the bytes of every element-wise
kernel on it), the weights and their gradients stay fp32, and the step still compiles whole."""
import pytest
import torch
from torch import nn

from myxtts.models.layers import CrossBlock, DecoderBlock, EncoderBlock, Norm
from myxtts.models.xtts import XTTS

from .conftest import random_batch, tiny

BLOCKS = (EncoderBlock, CrossBlock, DecoderBlock)


def _bf16(fn):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return fn()


@pytest.mark.parametrize("overrides", [("model.decoder=duration",),
                                       ("model.decoder=duration", "model.frame_position=absolute"),
                                       ("model.decoder=autoregressive",)],
                         ids=["duration", "duration-absolute", "autoregressive"])
def test_the_residual_stream_and_its_norms_stay_in_the_compute_dtype(overrides):
    torch.manual_seed(0)
    model = XTTS(tiny(*overrides).model, 40, 80).train()
    seen = []  # (where, dtype) of every block's stream input and every norm's output
    for m in model.modules():
        if isinstance(m, BLOCKS):
            m.register_forward_pre_hook(lambda mod, args: seen.append((type(mod).__name__, args[0].dtype)))
        if isinstance(m, Norm):
            m.register_forward_hook(lambda mod, args, out: seen.append(("Norm", out.dtype)))
    batch = random_batch()

    def step():
        out = model(batch)
        return model.losses(batch, out)["loss"]

    loss = _bf16(step)
    kinds = {where for where, _ in seen}
    assert {"EncoderBlock", "CrossBlock", "DecoderBlock", "Norm"} <= kinds
    assert {dtype for _, dtype in seen} == {torch.bfloat16}, sorted(set(seen), key=str)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32, name
        assert p.grad is None or (p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()), name


def test_a_norm_is_layer_norm_outside_autocast_and_rounds_only_its_output_inside():
    torch.manual_seed(0)
    x = torch.randn(6, 32) * 3 + 1
    ours, theirs = Norm(32, bias=False), nn.LayerNorm(32, bias=False)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        theirs.weight.copy_(ours.weight)
    assert torch.equal(ours(x), theirs(x))  # fp32: the same kernel, bit for bit
    xb = x.bfloat16().requires_grad_()
    y = _bf16(lambda: ours(xb))
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), theirs(xb.detach().float()), atol=2e-2, rtol=1e-2)
    y.float().sum().backward()
    assert xb.grad.dtype == torch.bfloat16 and ours.weight.grad.dtype == torch.float32


def test_the_bf16_step_compiles_as_one_graph():
    """The norms leave autocast for their kernel: inside every block's compile region too, that
    must not break the graph."""
    torch._dynamo.reset()
    cfg = tiny("model.decoder=duration", "model.dropout=0", "model.ref_dropout=0")
    torch.manual_seed(0)
    model = XTTS(cfg.model, 40, 80).train()
    batch = random_batch()

    def loss():
        out = model(batch)
        return model.losses(batch, out)["loss"]

    try:
        explained = _bf16(lambda: torch._dynamo.explain(loss)())
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
        compiled = torch.compile(loss, backend="aot_eager", fullgraph=True, dynamic=False)
        torch.testing.assert_close(_bf16(compiled), _bf16(loss), atol=1e-3, rtol=1e-3)
    finally:
        torch._dynamo.reset()
