"""Nodes of the forward and backward graphs AOTAutograd hands the compiler, counted by the
module they come from (no inductor). PYTHONPATH=TREE python nodes.py base CACHE"""
import os, sys, collections, torch
from myxtts.config import load
from myxtts.train.build import build_run
from myxtts.data.sampler import shape_plans
from myxtts.train.batches import BucketBatches
torch.set_num_threads(2)
seen = {}
def backend(gm, example_inputs):
    from torch._functorch.aot_autograd import aot_module_simplified
    def fw(g, inp):
        seen.setdefault("fw", g); return g
    def bw(g, inp):
        seen.setdefault("bw", g); return g
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._decomp import core_aten_decompositions
    from torch._inductor.decomposition import select_decomp_table
    return aot_module_simplified(gm, example_inputs, fw_compiler=fw, bw_compiler=bw,
                                 partition_fn=min_cut_rematerialization_partition, decompositions=select_decomp_table())
cfg = load(sys.argv[1], ["data.max_buckets=2", "data.num_workers=0", "train.compile=default"])
run = build_run(cfg, sys.argv[2], with_batches=False, backend=backend)
bb = BucketBatches(run.cache, run.cfg, run.device)
b = bb.device_batch(shape_plans(run.sampler)[0]).tensors
run.step_fn.loss_fn(b)["loss"].backward()
for k, g in seen.items():
    c = collections.Counter()
    for n in g.graph.nodes:
        if n.op != "call_function": continue
        st = n.meta.get("nn_module_stack") or n.meta.get("fwd_nn_module_stack") or {}
        path = list(st.values())[-1][0] if st else "?"
        parts = path.replace("L['self'].", "").split(".")
        key = ".".join(p for p in parts[:4] if not p.startswith("_modules"))
        c[path.split("blocks")[0][:70] if "blocks" in path else path[:70]] += 1
    print(k, sum(c.values()))
    for p, n in c.most_common(25): print("  ", n, p)
