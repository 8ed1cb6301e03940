"""torch.compile captures the whole forward + loss as one graph and agrees with eager.

The training-mode check uses the ``aot_eager`` backend: the same Dynamo capture and AOTAutograd
(forward + backward graphs) as the trainer's compiled step, without inductor's minutes of C++
compilation on a CPU; it replays random ops in eager order, so dropout masks match under one seed
and outputs, losses and gradients can be compared. Set MYXTTS_TEST_INDUCTOR=1 to also compare
inductor's generated kernels (dropout off: inductor has its own random stream)."""
import os

import pytest
import torch

from myxtts.models.xtts import XTTS

from .conftest import random_batch, tiny


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _forward_loss(model):
    def fn(batch):
        out = model(batch)
        return out, model.losses(batch, out)
    return fn


def test_compiled_training_step_matches_eager():
    cfg = tiny()  # all dropouts on: pre-net, attention/FFN, reference dropout
    torch.manual_seed(0)
    model = XTTS(cfg.model, 40, 80).train()
    batch = random_batch()
    # fullgraph=True: a graph break (.item(), data-dependent branch) fails the test.
    compiled = torch.compile(_forward_loss(model), backend="aot_eager", fullgraph=True, dynamic=False)
    results = []
    for fn in (compiled, _forward_loss(model)):
        torch.manual_seed(1)
        out, losses = fn(batch)
        losses["loss"].backward()
        results.append((out, losses, [p.grad.clone() for p in model.parameters()]))
        model.zero_grad(set_to_none=True)
    (out_c, loss_c, grad_c), (out_e, loss_e, grad_e) = results
    for k in out_e:
        torch.testing.assert_close(out_c[k], out_e[k], atol=1e-4, rtol=1e-4, msg=k)
    for k in loss_e:
        assert loss_c[k].dim() == 0
        torch.testing.assert_close(loss_c[k], loss_e[k], atol=1e-4, rtol=1e-4, msg=k)
    for (name, _), gc, ge in zip(model.named_parameters(), grad_c, grad_e):
        torch.testing.assert_close(gc, ge, atol=1e-4, rtol=1e-3, msg=name)


def test_duration_decoder_compiles_as_one_graph():
    """The duration decoder's alignment search and CTC loss are custom ops: the compiled step
    is one graph (fullgraph=True fails on any break) and matches eager (outputs, losses,
    gradients)."""
    cfg = tiny("model.decoder=duration", "model.dropout=0", "model.ref_dropout=0")
    torch.manual_seed(0)
    model = XTTS(cfg.model, 40, 80).train()
    batch = random_batch()
    explained = torch._dynamo.explain(_forward_loss(model))(batch)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    compiled = torch.compile(_forward_loss(model), backend="aot_eager", fullgraph=True, dynamic=False)
    results = []
    for fn in (compiled, _forward_loss(model)):
        out, losses = fn(batch)
        losses["loss"].backward()
        results.append((out, losses, [p.grad.clone() for p in model.parameters()]))
        model.zero_grad(set_to_none=True)
    (out_c, loss_c, grad_c), (out_e, loss_e, grad_e) = results
    for k in ("mel_post", "dur", "log_dur"):
        torch.testing.assert_close(out_c[k], out_e[k], atol=1e-4, rtol=1e-4, msg=k)
    for k in loss_e:
        torch.testing.assert_close(loss_c[k], loss_e[k], atol=1e-4, rtol=1e-4, msg=k)
    for (name, _), gc, ge in zip(model.named_parameters(), grad_c, grad_e):
        torch.testing.assert_close(gc, ge, atol=1e-4, rtol=1e-3, msg=name)


@pytest.mark.skipif(not os.environ.get("MYXTTS_TEST_INDUCTOR"),
                    reason="inductor on a CPU compiles for minutes; MYXTTS_TEST_INDUCTOR=1 runs it")
def test_inductor_forward_and_loss_match_eager():
    cfg = tiny("model.prenet_dropout=0", "model.dropout=0", "model.ref_dropout=0")
    torch.manual_seed(0)
    model = XTTS(cfg.model, 40, 80).eval()
    batch = random_batch()
    compiled = torch.compile(_forward_loss(model), fullgraph=True, dynamic=False)
    with torch.no_grad():
        (out_c, loss_c), (out_e, loss_e) = compiled(batch), _forward_loss(model)(batch)
    for k in out_e:
        torch.testing.assert_close(out_c[k], out_e[k], atol=1e-4, rtol=1e-4, msg=k)
    for k in loss_e:
        torch.testing.assert_close(loss_c[k], loss_e[k], atol=1e-4, rtol=1e-4, msg=k)
