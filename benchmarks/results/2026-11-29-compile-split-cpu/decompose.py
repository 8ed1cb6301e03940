"""base's cold compile of one shape, as compile_cold_warm.py's cold_one_shape measures it
(data.max_buckets=1, compile_shapes), with the compiling process's time split into what only a
CPU compile does: writing the CPU kernels' C++ (CppScheduling.codegen_node, less the vector-ISA
probe that runs inside the first call), the vector-ISA probe (inductor compiles small programs
to learn what the CPU can run, once per machine and compile cache), and the wait for the C++
compilers (dynamo's async_compile.wait); the rest is what a GPU compile does too.

    MYXTTS_COMPILE_CACHE=EMPTY TMPDIR=EMPTY/tmp PYTHONPATH=TREE python decompose.py base CACHE OUT.json
"""
import json
import sys
import time

from torch._dynamo.utils import compilation_time_metrics
from torch._inductor import cpu_vec_isa
from torch._inductor.codegen import cpp

from myxtts.config import load
from myxtts.train.build import build_run
from myxtts.train.compile import CompileTally, compile_shapes

acc = {"cpp_codegen_node_s": 0.0, "vec_isa_probe_s": 0.0, "n_nodes": 0}
orig_codegen = cpp.CppScheduling.codegen_node


def codegen_node(self, node):
    t = time.perf_counter()
    r = orig_codegen(self, node)
    acc["cpp_codegen_node_s"] += time.perf_counter() - t
    acc["n_nodes"] += 1
    return r


orig_valid = cpu_vec_isa.valid_vec_isa_list  # functools.cache: the probe runs on the first call


def valid_vec_isa_list():
    t = time.perf_counter()
    r = orig_valid()
    acc["vec_isa_probe_s"] += time.perf_counter() - t
    return r


cpp.CppScheduling.codegen_node = codegen_node
cpu_vec_isa.valid_vec_isa_list = valid_vec_isa_list

cfg = load(sys.argv[1], ["data.max_buckets=1", "data.num_workers=0", "train.compile=default"])
run = build_run(cfg, sys.argv[2], with_batches=False)
tally = CompileTally()
per = compile_shapes(run)
ct = {k: round(sum(v), 2) for k, v in compilation_time_metrics.items()}
acc["cpp_codegen_node_s"] -= acc["vec_isa_probe_s"]  # the probe ran inside the first node
out = {"preset": sys.argv[1], "compile_s": round(sum(per), 1), "shapes": [list(s) for s in run.shapes],
       "tally": tally.read(), "split": {k: round(v, 1) if isinstance(v, float) else v for k, v in acc.items()},
       "async_compile_wait_s": ct.get("async_compile.wait"), "phases": ct,
       "cpp_kernels_compiled": len(compilation_time_metrics.get("compile_file", []))}
with open(sys.argv[3], "w") as f:
    json.dump(out, f, indent=1)
print(json.dumps({k: v for k, v in out.items() if k != "phases"}))
