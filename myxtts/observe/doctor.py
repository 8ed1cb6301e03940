"""``myxtts doctor``: check this machine, this configuration and this cache before training.

Generic tips printed the same on every machine help nobody. This command measures instead, in
well under a minute, and ranks what it finds by the share of step time at stake, each finding
naming the exact setting or command to change:

* environment: GPU visible, driver vs the torch build's CUDA, CPU-only torch on a GPU machine,
  bf16/TF32, NVML, triton (torch.compile on CUDA), usable CPU cores vs ``data.num_workers``,
  shared memory for the workers, pinned memory, RAM vs the cache, the cache disk's read speed
  (page cache dropped first, so the figure is close to a first epoch's);
* configuration: workers, frame budget, compile mode, precision, the bucket shapes the sampler
  plans and their padding waste (rules of observe.diagnose);
* a step test (``observe.measure``: a few eager steps of the configured model on real batches,
  one per bucket shape first: it runs, the loss is finite, its time, host syncs and peak memory
  on a GPU, so a frame budget that leaves most of the memory unused is named with the budget
  that would fill it) and a loader test (time per
  batch of the cached loader, in-process and with the configured workers, against that step
  time: the input-bound share a run would see, docs/design.md "Input-bound").

On a CPU-only machine it says so in one line and runs every check that still applies.
"""
from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path

import torch

from myxtts.models.monotonic import check_device
from myxtts.observe import loaders as R
from myxtts.observe.diagnose import (
    INPUT_BOUND_HIGH_PCT,
    INPUT_BOUND_MODERATE_PCT,
    INPUT_BOUND_TARGET_PCT,
    PADDING_LOW_PCT,
    Finding,
    diagnose,
    ranked,
    workers_needed,
)
from myxtts.observe.measure import FixedBatches, measure
from myxtts.observe.measured import Measured, Settings
from myxtts.observe.ops import count_host_syncs
from myxtts.train.build import build_run, size_batches
from myxtts.train.distributed import DistInfo
from myxtts.train.memory import read_memory
from myxtts.train.precision import usable_cpus
from myxtts.train.symbolic import supported_torch, torch_in_range

DISK_SAMPLE = 64 << 20   # bytes of shard files read to time the disk
STEP_TEST_S = 8.0        # time cap of the timed steps
LOADER_TEST_S = 2.5      # per loader configuration
SECTIONS = ("environment", "configuration", "tests")


class Doc:
    def __init__(self):
        self.checks: list[dict] = []
        self.findings: list[Finding] = []
        self.m: dict = {}  # measurements, for --json and for diagnose()

    def check(self, section: str, name: str, status: str, detail: str) -> None:
        self.checks.append({"section": section, "name": name, "status": status, "detail": detail})

    def find(self, sev, title, evidence, action, rule, impact) -> None:
        self.findings.append(Finding(sev, title, evidence, action, rule, impact))


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def _meminfo(key: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# ------------------------------------------------------------------------------ environment
def environment(doc: Doc, cfg) -> torch.device:
    E = "environment"
    cuda_build = torch.version.cuda
    spec = supported_torch()
    inside = spec is None or torch_in_range(torch.__version__, spec)
    doc.check(E, "torch", ("ok" if cuda_build else "info") if inside else "warn",
              f"{torch.__version__} ({'CUDA ' + cuda_build if cuda_build else 'CPU-only'} build)"
              + (f"; MyXTTS supports torch{spec}" if spec else ""))
    if not inside:
        doc.find("high", "A torch release MyXTTS was not checked with",
                 f"torch {torch.__version__}; MyXTTS supports torch{spec}: the compiled step touches torch "
                 "internals that change between releases", f"`pip install 'torch{spec}'`", "env-torch-range", 60)
    nvidia_hw = Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None
    if not torch.cuda.is_available():
        if not cuda_build and nvidia_hw:
            doc.find("high", "CPU-only torch on a machine with an NVIDIA GPU",
                     f"torch {torch.__version__} has no CUDA support, and an NVIDIA device is present",
                     "install a CUDA build: `pip install torch --index-url https://download.pytorch.org/whl/cu128` "
                     "(pick the CUDA version your driver supports)", "env-cpu-torch", 100)
        elif cuda_build:
            vis = os.environ.get("CUDA_VISIBLE_DEVICES")
            doc.find("high", "CUDA torch sees no GPU",
                     f"torch {torch.__version__} (CUDA {cuda_build}) finds no device"
                     + (f"; CUDA_VISIBLE_DEVICES={vis!r}" if vis is not None else ""),
                     "unset or fix `CUDA_VISIBLE_DEVICES`; check the driver with `nvidia-smi`",
                     "env-no-gpu", 100)
        doc.check(E, "GPU", "skip", "none visible: GPU checks skipped")
        return torch.device("cpu")
    dev = torch.device("cuda", 0)
    p = torch.cuda.get_device_properties(dev)
    doc.m.update(device_name=p.name, gpu_memory=p.total_memory)
    doc.check(E, "GPU", "ok", f"{torch.cuda.device_count()} visible; cuda:0 {p.name}, compute capability "
              f"{p.major}.{p.minor}, {_gib(p.total_memory)}")
    try:
        from myxtts.observe.gpu import _import_nvml
        nv = _import_nvml()
        nv.nvmlInit()
        drv = nv.nvmlSystemGetDriverVersion()
        drv = drv.decode() if isinstance(drv, bytes) else drv
        cv = nv.nvmlSystemGetCudaDriverVersion()
        nv.nvmlShutdown()
        drv_cuda = (cv // 1000, cv % 1000 // 10)
        want = tuple(int(x) for x in (cuda_build or "0.0").split(".")[:2])
        ok = drv_cuda >= want
        doc.check(E, "driver", "ok" if ok else "fail",
                  f"{drv}, supports CUDA {drv_cuda[0]}.{drv_cuda[1]}; torch built for CUDA {cuda_build}; NVML present")
        if not ok:
            doc.find("high", "The driver is older than the torch build's CUDA",
                     f"driver supports CUDA {drv_cuda[0]}.{drv_cuda[1]}, torch needs {cuda_build}",
                     "update the NVIDIA driver, or install a torch build for an older CUDA", "env-driver", 100)
    except Exception as e:  # no nvidia-ml-py, or NVML failing
        doc.check(E, "driver/NVML", "warn", f"NVML not usable ({type(e).__name__}: {e})")
        doc.find("low", "NVML not available", "GPU utilisation cannot be sampled (progress line, "
                 "`myxtts monitor`, report.html)", "`pip install 'myxtts[gpu]'` (nvidia-ml-py)", "env-nvml", 1)
    bf16 = torch.cuda.is_bf16_supported()
    doc.m["bf16_supported"] = bf16
    doc.check(E, "bf16 / TF32", "ok" if bf16 else "warn",
              f"bf16 {'yes' if bf16 else 'no'}, TF32 {'yes' if p.major >= 8 else 'no'} "
              f"(compute capability {p.major}.{p.minor})")
    if cfg.train.precision == "bf16" and not bf16:
        doc.find("high", "bf16 requested on a GPU without it", f"{p.name} has no bf16",
                 "`train.precision=fp16`", "env-bf16", 100)
    duration = cfg.model.decoder == "duration"  # its aligner runs Triton kernels, compiled or not
    if cfg.train.compile != "off" or duration:
        try:
            import triton  # noqa: F401
            doc.check(E, "triton", "ok", f"{triton.__version__} (torch.compile can build GPU kernels)")
        except ImportError:
            doc.check(E, "triton", "fail", "not installed")
            ways = (["`train.compile=off`"] if cfg.train.compile != "off" else []) + \
                   (["`train.aligner_on_host=true`"] if duration else [])
            needs = " and ".join((["train.compile"] if cfg.train.compile != "off" else []) +
                                 (["the duration decoder's aligner"] if duration else []))
            doc.find("high", "No triton to build GPU kernels", f"{needs} on CUDA need triton, which is not "
                     "installed", f"`pip install triton` (or {' and '.join(ways)})", "env-triton", 90)
            return dev
    aligner_kernels(doc, cfg, dev)
    return dev


def aligner_kernels(doc: Doc, cfg, dev: torch.device, check=check_device) -> None:
    """The duration decoder's two aligner ops run as Triton kernels on a GPU, whatever
    train.compile says: try them on a small batch against the CPU reference (``check``, the
    models' own by default), and name the way around a Triton that cannot build them."""
    E = "environment"
    if cfg.model.decoder != "duration" or dev.type != "cuda":
        return
    if cfg.train.aligner_on_host:
        doc.check(E, "aligner kernels", "info", "train.aligner_on_host: the alignment runs on the CPU "
                  "(two copies to the host per step, no CUDA graphs)")
        return
    err = check(dev)
    if err is None:
        doc.check(E, "aligner kernels", "ok", "Triton alignment search and CTC loss agree with the CPU reference")
        return
    doc.check(E, "aligner kernels", "fail", err)
    doc.find("high", "The aligner's Triton kernels fail on this GPU",
             f"the duration decoder (the default model) needs them at every step: {err}",
             "`train.aligner_on_host=true` (the alignment on the CPU: two copies to the host and a host "
             "sync per step, no CUDA graphs), or a triton that builds them (`myxtts doctor` checks again)",
             "env-aligner", 95)


def host(doc: Doc, cfg, dev, cache=None, sampler=None) -> None:
    E, d = "environment", cfg.data
    cpus = usable_cpus()
    doc.m["cpu_count"] = cpus
    doc.check(E, "CPU", "ok" if d.num_workers < cpus else "warn",
              f"{cpus} usable cores (os.cpu_count {os.cpu_count()}); data.num_workers={d.num_workers}")
    if d.num_workers > 0 and Path("/dev/shm").is_dir():
        free = shutil.disk_usage("/dev/shm").free
        need = (R.batch_bytes(cfg, cache, sampler) * (d.prefetch_factor * d.num_workers + 2)) if sampler else 1 << 30
        ok = free >= 1.5 * need
        doc.check(E, "shared memory", "ok" if ok else "fail",
                  f"/dev/shm {_gib(free)} free; the workers' batches in flight need about {_gib(need)}")
        if not ok:
            doc.find("high", "Shared memory too small for the loader workers",
                     f"/dev/shm has {_gib(free)} free, {d.num_workers} workers x {d.prefetch_factor} "
                     f"prefetched batches need about {_gib(need)}: workers crash or stall",
                     "in Docker: `docker run --shm-size=16g ...`; otherwise `data.prefetch_factor=2`",
                     "env-shm", 50)
    if dev.type == "cuda":
        try:
            x = torch.empty(64 << 20, dtype=torch.uint8, pin_memory=True)
            y = torch.empty_like(x, device=dev)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            y.copy_(x, non_blocking=True)
            torch.cuda.synchronize()
            gbs = x.numel() / (time.perf_counter() - t0) / 1e9
            doc.check(E, "pinned memory", "ok" if d.pin_memory else "warn",
                      f"64 MiB pinned host-to-device copy at {gbs:.1f} GB/s; data.pin_memory={d.pin_memory}")
            if not d.pin_memory:
                doc.find("medium", "Batches are not pinned", "data.pin_memory=false: each host-to-device "
                         "copy is synchronous and cannot overlap the step", "`data.pin_memory=true`", "env-pin", 10)
        except RuntimeError as e:
            doc.check(E, "pinned memory", "fail", f"cannot pin host memory ({e})")
            doc.find("medium", "Pinned memory unavailable", str(e), "raise the locked-memory limit "
                     "(`ulimit -l unlimited`), or `data.pin_memory=false`", "env-pin", 10)
    else:
        doc.check(E, "pinned memory", "skip", "not applicable on the CPU")


def disk(doc: Doc, cache, step: dict | None, cfg) -> None:
    """Time reading up to DISK_SAMPLE bytes of shard files after dropping them from the page
    cache (POSIX_FADV_DONTNEED; clean pages only, no root needed)."""
    files = sorted(Path(cache.path).glob("shards/*/*.npy"))
    total = sum(f.stat().st_size for f in files)
    left, got, t0 = DISK_SAMPLE, 0, time.perf_counter()
    for f in files:
        if left <= 0:
            break
        fd = os.open(f, os.O_RDONLY)
        try:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            while left > 0:
                chunk = os.read(fd, min(left, 4 << 20))
                if not chunk:
                    break
                got += len(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)
    secs = max(time.perf_counter() - t0, 1e-9)
    mbs = got / secs / 1e6
    avail = _meminfo("MemAvailable")
    fits = avail is not None and total < avail
    doc.m.update(disk_read_mb_s=mbs, cache_bytes=total)
    need = None
    if step and step.get("frames_per_s"):
        n_mels = cache.audio_cfg.n_mels
        ref = math.ceil(cfg.data.ref_seconds * cache.audio_cfg.sample_rate / cache.audio_cfg.hop_length)
        per_frame = n_mels * 2 * (1 + ref / max(float(cache.n_frames.mean()), 1.0))  # mel + reference, float16
        need = step["frames_per_s"] * per_frame / 1e6
    detail = (f"read {got / 1e6:.0f} MB of {total / 1e6:.0f} MB of shards at {mbs:,.0f} MB/s (page cache dropped); "
              + (f"the measured step rate needs ~{need:,.1f} MB/s; " if need else "")
              + (f"the cache fits in available RAM ({_gib(avail)}): after the first epoch the page cache "
                 "serves it" if fits else
                 f"the cache is larger than available RAM ({_gib(avail or 0)}): every epoch reads the disk"))
    slow = need is not None and mbs < 2 * need and not fits
    doc.check("environment", "cache disk", "warn" if slow else "ok", detail)
    if slow:
        doc.find("high", "The cache's disk is too slow for the step", detail,
                 f"copy the cache to a local NVMe disk (`cp -r {cache.path} /local/...`) and pass that to --data",
                 "env-disk", min(100.0, 100.0 * (1 - mbs / (2 * need))))


# ---------------------------------------------------------------------------- configuration
def configuration(doc: Doc, cfg, dev, sampler) -> None:
    C, d, t = "configuration", cfg.data, cfg.train
    doc.check(C, "loader", "info", f"data.num_workers={d.num_workers}, prefetch_factor={d.prefetch_factor}, "
              f"pin_memory={d.pin_memory}, on_the_fly={d.on_the_fly}")
    doc.check(C, "step", "info", f"train.precision={t.precision}, train.compile={t.compile}, "
              f"grad_accum={t.grad_accum}, data.frame_budget={d.frame_budget}")
    if dev.type == "cpu" and t.compile != "off":
        cost = "once for every shape, a minute or more" if t.compile == "regional" else "for every shape, minutes each"
        doc.find("low", "torch.compile on the CPU", f"train.compile={t.compile}: inductor builds C++ "
                 f"kernels {cost} on a small CPU", "`train.compile=off`", "cpu-compile", 5)
    if sampler is not None:
        rep = sampler.padding_report()
        doc.m.update(padding_pct=rep["mel_padding_pct"], n_shapes=len(sampler.shapes()))
        shapes = ", ".join("x".join(map(str, s)) for s in sampler.shapes())
        doc.check(C, "buckets", "ok" if rep["mel_padding_pct"] < PADDING_LOW_PCT else "warn",
                  f"{len(sampler.shapes())} shapes (B x Tt x Tm): {shapes}; padding {rep['mel_padding_pct']:.1f} % "
                  f"of mel frames, filler {rep['filler_pct']:.1f} %")


# ------------------------------------------------------------------------------------ tests
def step_test(doc: Doc, cfg, data) -> dict | None:
    """A few eager steps of the configured model on real batches (``observe.measure``)."""
    T = "tests"
    run = build_run(cfg, data, compile="off", with_batches=False)
    cuda = run.device.type == "cuda"
    try:
        st = measure(run, 3, seconds=STEP_TEST_S)
        if cuda:
            with count_host_syncs() as sc:
                run.step_fn([FixedBatches(run.cache, run.cfg, run.device).next().tensors])
            st["host_syncs_per_step"] = sc.count
            st["mem_peak_pct"] = read_memory(run.device).reserved_peak_pct
    except torch.OutOfMemoryError:
        run.step_fn.opt.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        doc.check(T, "step test", "fail", f"out of GPU memory at data.frame_budget={run.cfg.data.frame_budget}")
        doc.find("high", "The largest batch does not fit in GPU memory", f"a step of a bucket shape "
                 f"ran out of memory at data.frame_budget={run.cfg.data.frame_budget}",
                 f"`myxtts tune --config ... --data {data}` finds the largest budget that fits", "oom", 100)
        return None
    loss = st["loss"]
    finite = loss is not None and math.isfinite(loss)
    frames_s = st["throughput"].get("frames_per_s", 0.0)
    doc.m.update(step_ms=st["step_ms"], loss=loss,
                 **{k: st[k] for k in ("host_syncs_per_step", "mem_peak_pct") if k in st})
    doc.check(T, "step test", "ok" if finite else "fail",
              f"{st['steps']} eager steps at {st['step_ms']:,.1f} ms/step on {run.plan.device_name}, "
              f"{frames_s:,.0f} mel frames/s, loss {loss if loss is None else round(loss, 3)}"
              + (f", peak memory {st['mem_peak_pct']:.0f} %" if "mem_peak_pct" in st else "")
              + " (`myxtts profile` times the compiled step)")
    if not finite:
        doc.find("high", "The loss is not finite", f"loss {loss} after {st['steps']} steps",
                 "check the cache (`myxtts cache verify`), lower `train.lr`, or `train.precision=fp32`", "nan", 100)
    return {"step_ms": st["step_ms"], "frames_per_s": frames_s}


def _workers(w: int) -> str:
    return "in-process (0 workers)" if w == 0 else f"{w} worker" + ("s" if w > 1 else "")


def loader_test(doc: Doc, cfg, cache, step_ms: float, dev) -> None:
    T, w, cpus = "tests", cfg.data.num_workers, usable_cpus()
    base = R.loader_speed(cache, cfg, 0, seconds=LOADER_TEST_S)
    runs = [base] + ([R.loader_speed(cache, cfg, w, seconds=LOADER_TEST_S)] if w > 0 else [])
    mine = runs[-1]
    ib = R.predicted_input_bound(mine["ms_per_batch"], step_ms, w)
    doc.m.update(loader_ms_per_batch=mine["ms_per_batch"], loader_ms_in_process=base["ms_per_batch"],
                 predicted_input_bound_pct=ib)
    label = "GPU" if dev.type == "cuda" else "CPU"
    doc.check(T, "loader test", "ok" if ib < INPUT_BOUND_TARGET_PCT else "warn",
              "; ".join(f"{_workers(r['workers'])}: {r['ms_per_batch']:.1f} ms/batch "
                        f"({r['batches_per_s']:,.0f} batches/s)" for r in runs)
              + f"; against the {label} step of {step_ms:,.1f} ms: predicted input-bound {ib:.1f} % with "
                f"data.num_workers={w}")
    if ib < INPUT_BOUND_TARGET_PCT:
        return
    need, n = workers_needed(base["ms_per_batch"], step_ms, cpus)
    sev = "high" if ib >= INPUT_BOUND_HIGH_PCT else "medium" if ib >= INPUT_BOUND_MODERATE_PCT else "low"
    ev = (f"the loader needs {base['ms_per_batch']:.1f} ms per batch in one process; with {w} workers the "
          f"loop would wait {ib:.1f} % of the time (target < {INPUT_BOUND_TARGET_PCT:g} %)")
    if n > w:
        act = f"`data.num_workers={n}`" + (f" (about {need} needed; {cpus} CPUs cap it: use a machine with more "
                                           "cores or a larger data.frame_budget)" if need > n else "")
    else:
        act = "`myxtts tune` (measures the workers this machine needs); check the cache is on local disk"
    doc.find(sev, "The loader would not keep up with the step", ev, act, "loader", ib)


# -------------------------------------------------------------------------------------- run
def doctor(cfg, data=None, say=lambda s: None) -> dict:
    doc = Doc()
    dev = environment(doc, cfg)
    cache = sampler = None
    if data is not None:
        from myxtts.data.cache import Cache
        from myxtts.data.loader import make_sampler
        cache = Cache(data, expect=cfg)
        cfg = sized(doc, cfg, data, dev)
        sampler = make_sampler(cache, cfg, "train")
    host(doc, cfg, dev, cache, sampler)
    configuration(doc, cfg, dev, sampler)
    step = None
    if cache is None:
        doc.check("tests", "step and loader tests", "skip", "need a cache: pass --data CACHE")
    else:
        say("step test ...")
        step = step_test(doc, cfg, data)
        say("loader test ...")
        if step:
            loader_test(doc, cfg, cache, step["step_ms"], dev)
        disk(doc, cache, step, cfg)
    diag = diagnose(measured(doc.m, cfg, dev))
    # "unmeasured" asks for NVML samples, which are monitor's job; "cpu" is said more precisely
    # by an environment finding when there is one.
    skip = {"unmeasured"} | ({"cpu"} if {f.rule for f in doc.findings} & {"env-cpu-torch", "env-no-gpu"} else set())
    found = ranked(doc.findings + [f for f in diag.findings if f.rule not in skip])
    cpu_line = (f"no GPU: running on the CPU (torch {torch.__version__}); GPU checks are skipped, the rest applies"
                if dev.type == "cpu" else None)
    return {"device": str(dev), "cpu_note": cpu_line, "checks": doc.checks, "measurements": doc.m,
            "verdict": {"bound": diag.bound, "reason": diag.reason, "headline": diag.headline()},
            "findings": [vars(f) | {"rank": i} for i, f in enumerate(found, 1)]}


def sized(doc: Doc, cfg, data, dev: torch.device):
    """``data.frame_budget=auto`` resolved as a training run on this machine resolves it (measured
    on a GPU), so that the buckets, the step test and the figures the diagnosis reads all belong
    to the budget a run would train with."""
    cfg, note = size_batches(cfg, data, dev, DistInfo())
    if note:
        doc.check("configuration", "frame budget", "info", note)
    return cfg


def measured(figures: dict, cfg, dev: torch.device) -> Measured:
    """The doctor's figures (``Doc.m``) that the diagnosis reads."""
    g = figures.get
    settings = Settings.from_config(cfg, device=str(dev), device_name=g("device_name", "CPU"),
                                    bf16_supported=g("bf16_supported"), cpu_count=g("cpu_count"))
    return Measured(settings=settings, step_ms=g("step_ms"), host_syncs_per_step=g("host_syncs_per_step"),
                    mem_peak_pct=g("mem_peak_pct"), padding_pct=g("padding_pct"), n_shapes=g("n_shapes"))
