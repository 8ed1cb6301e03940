"""The text encoder of `tiny` compiled with its blocks as compile regions, every gradient
compared with eager's. `nested` marks EncoderBlock.forward (on the code before the change, which
did not); NOREUSE=1 turns inductor's buffer reuse off; MANUAL=1 replaces SDPA by matmul+softmax;
BT=B,T the batch; OV="key=value ..." overrides the preset."""
import sys, os, copy, torch
from myxtts.config import load
from myxtts.models.text_encoder import TextEncoder
from myxtts.models.layers import EncoderBlock
from myxtts.train.symbolic import keep_shapes_symbolic
torch.manual_seed(0); torch.set_num_threads(1)
cfg = load("tiny", ["model.dropout=0"] + [x for x in os.environ.get("OV", "").split() if x])
m = TextEncoder(cfg.model, 60); e = copy.deepcopy(m)
keep_shapes_symbolic(torch.device("cpu"))
if os.environ.get("NOREUSE"):
    import torch._inductor.config as icfg; icfg.allow_buffer_reuse = False
if os.environ.get("MANUAL"):
    import math, torch.nn.functional as F
    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if attn_mask is not None: s = s + attn_mask
        return torch.softmax(s, -1) @ v
    F.scaled_dot_product_attention = sdpa
if os.environ.get("CONTIG"):
    import torch.nn.functional as F
    real = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = lambda q, k, v, **kw: real(q.contiguous(), k.contiguous(), v.contiguous(), **kw)
if sys.argv[1] == "nested":
    EncoderBlock.forward = torch.compiler.nested_compile_region(EncoderBlock.forward)
B, T = [int(v) for v in os.environ.get("BT", "16,48").split(",")]
tok = torch.randint(1, 60, (B, T)); lens = torch.randint(T // 2, T + 1, (B,)); lens[0] = T
if os.environ.get("FULL"): lens[:] = T
def loss(mod):
    y, mask = mod(tok, lens)
    return (y * torch.linspace(0, 1, y.shape[-1])).pow(2).sum() / B
import time; t0 = time.perf_counter()
got = torch.compile(loss, dynamic=True)(m); got.backward()
print('compile+step s', round(time.perf_counter() - t0, 1))
want = loss(e); want.backward()
ge = dict(e.named_parameters())
print(sys.argv[1], B, T, "loss", float(got), float(want))
bad = [(n, float((p.grad - ge[n].grad).abs().max())) for n, p in m.named_parameters()]
print("worst", max(bad, key=lambda x: x[1]))
