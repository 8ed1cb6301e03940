import sys, time, types, torch
from myxtts.config import load
from myxtts.train.build import build_run
from myxtts.train.compile import compiled_graphs
from myxtts.data.sampler import shape_plans
from myxtts.train.batches import BucketBatches
nested = sys.argv[1] == "nested"
preset = sys.argv[2]
torch.set_num_threads(1)
cfg = load(preset, ["data.max_buckets=2", "data.num_workers=0", "train.compile=default",
                    "model.dropout=0", "model.prenet_dropout=0", "model.ref_dropout=0"])
eager = build_run(cfg, sys.argv[3], with_batches=False, compile="off")
run = build_run(cfg, sys.argv[3], with_batches=False)
run.model.load_state_dict(eager.model.state_dict())
if nested:
    from myxtts.models.layers import CrossBlock, DecoderBlock, EncoderBlock
    wrapped = {c: torch.compiler.nested_compile_region(c.forward) for c in (EncoderBlock, CrossBlock, DecoderBlock)}
    for c, f in wrapped.items():
        c.forward = f
bb = BucketBatches(run.cache, run.cfg, run.device)
plans = shape_plans(run.sampler)
b = bb.device_batch(plans[0]).tensors
t = time.perf_counter()
got = run.step_fn.loss_fn(b)["loss"]; got.backward()
print("compile+step s", round(time.perf_counter() - t, 1), "graphs", compiled_graphs())
want = eager.step_fn.loss_fn(b)["loss"]; want.backward()
gd = dict(eager.model.named_parameters())
worst = max(float((p.grad - gd[n].grad).abs().max()) for n, p in run.model.named_parameters() if p.grad is not None)
diffs = sorted(((float((p.grad - gd[n].grad).abs().max()), n) for n, p in run.model.named_parameters() if p.grad is not None), reverse=True)
print("top diffs", diffs[:8])
print("no grad in compiled:", [n for n, p in run.model.named_parameters() if p.grad is None and gd[n].grad is not None][:10])
print("loss", float(got), float(want), "worst grad diff", worst)
b2 = bb.device_batch(plans[-1]).tensors
t = time.perf_counter(); run.step_fn.loss_fn(b2)["loss"].backward()
print("second shape s", round(time.perf_counter() - t, 1), "graphs", compiled_graphs())
from torch._dynamo.utils import compile_times
print(compile_times(repr="str")[:1500])
