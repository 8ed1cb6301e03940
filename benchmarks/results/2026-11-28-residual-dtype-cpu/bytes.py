"""Ops, bytes written by op outputs (by dtype), and the residual stream's dtype per block, for one
eager training step under the run's precision. python bytes.py CACHE PRESET [key=value ...]"""
import collections, sys, json
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from myxtts.config import load
from myxtts.train.batches import BucketBatches
from myxtts.train.build import build_run
from myxtts.data.sampler import bucket_plan
from myxtts.models.layers import EncoderBlock, CrossBlock, DecoderBlock

cache, preset, *ov = sys.argv[1:]
cfg = load(preset, ["train.compile=off", "data.frame_budget=6000", "data.max_batch_size=16"] + ov)
run = build_run(cfg, cache, compile="off", with_batches=False)
bb = BucketBatches(run.cache, run.cfg, run.device)
b = bb.device_batch(bucket_plan(run.sampler, 0)).tensors
run.step_fn([b])

class Bytes(TorchDispatchMode):
    def __init__(self):
        super().__init__(); self.by = collections.Counter(); self.byop = collections.Counter(); self.ops = 0
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        if func.overloadpacket in (torch.ops.aten.view, torch.ops.aten._unsafe_view, torch.ops.aten.t,
                                   torch.ops.aten.transpose, torch.ops.aten.permute, torch.ops.aten.expand,
                                   torch.ops.aten.unbind, torch.ops.aten.slice, torch.ops.aten.select,
                                   torch.ops.aten.unsqueeze, torch.ops.aten.squeeze, torch.ops.aten.detach,
                                   torch.ops.aten.alias, torch.ops.aten.as_strided, torch.ops.aten.split):
            return out
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.by[str(t.dtype)] += t.numel() * t.element_size()
                self.byop[(str(func.overloadpacket), str(t.dtype))] += t.numel() * t.element_size()
        return out

seen = collections.Counter()
def hook(mod, args):
    seen[(type(mod).__name__, str(args[0].dtype))] += 1
hs = [m.register_forward_pre_hook(hook) for m in run.model.modules()
      if isinstance(m, (EncoderBlock, CrossBlock, DecoderBlock))]
with Bytes() as m:
    run.step_fn([b])
for h in hs: h.remove()
print(json.dumps({"preset": preset, "overrides": ov, "precision": run.precision.name if hasattr(run, "precision") else None,
                  "batch": [list(b["tokens"].shape), list(b["mel"].shape)], "ops": m.ops,
                  "bytes_written_MB": {k: round(v / 1e6, 1) for k, v in m.by.items()},
                  "total_MB": round(sum(m.by.values()) / 1e6, 1),
                  "block_input_dtypes": {f"{k[0]} {k[1]}": v for k, v in seen.items()}}, indent=1))

for (op, dt), v in m.byop.most_common(25):
    print(f"{v/1e6:9.1f} MB  {dt:15s} {op}")
