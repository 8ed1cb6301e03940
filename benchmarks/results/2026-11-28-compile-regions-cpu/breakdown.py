"""Cold compile of the step's first shape with dynamo's per-phase times (compile_times).
Run as in the record: before = main at e4b0de6; regions = the change before its marker moved
into layers.py (NESTED=1 marked the three block forwards from here, NOREUSE=1 turned inductor's
buffer reuse off: what train.compile now does). PYTHONPATH=TREE python breakdown.py base CACHE"""
import os, sys, time, torch
from myxtts.config import load
from myxtts.train.build import build_run
from myxtts.data.sampler import shape_plans
from myxtts.train.batches import BucketBatches
torch.set_num_threads(1)
if os.environ.get("NOREUSE"):
    import torch._inductor.config as icfg; icfg.allow_buffer_reuse = False
cfg = load(sys.argv[1], ["data.max_buckets=2", "data.num_workers=0", "train.compile=default"])
run = build_run(cfg, sys.argv[2], with_batches=False, backend=os.environ.get("BACKEND"))
if os.environ.get("NESTED"):
    from myxtts.models.layers import CrossBlock, DecoderBlock, EncoderBlock
    for c in (EncoderBlock, CrossBlock, DecoderBlock):
        c.forward = torch.compiler.nested_compile_region(c.forward)
bb = BucketBatches(run.cache, run.cfg, run.device)
b = bb.device_batch(shape_plans(run.sampler)[0]).tensors
t = time.perf_counter()
run.step_fn.loss_fn(b)["loss"].backward()
print("compile+step s", round(time.perf_counter() - t, 1))
from torch._dynamo.utils import compile_times
print(compile_times(repr="str"))
