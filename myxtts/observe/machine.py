"""What ``myxtts doctor`` writes down (``Doc``: checks, findings and its typed figures,
``DoctorFigures``), and its checks of this machine: the environment (torch and its CUDA, the
driver, NVML, bf16/TF32, triton, the aligner's kernels), the host (usable CPU cores against
``data.num_workers``, shared memory for the workers, pinned memory) and the cache's disk (read
speed with the page cache dropped, against the rate the measured step needs).

The checks of the configuration and the step and loader tests, and the flow that runs them all,
are in ``observe.doctor``.
"""
from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from myxtts.data.cachedir import CacheDir
from myxtts.models.monotonic import check_device
from myxtts.observe import loaders as R
from myxtts.observe.findings import Finding
from myxtts.rundir import RunDir
from myxtts.train.memory import DeviceMemory
from myxtts.train.precision import usable_cpus
from myxtts.train.symbolic import supported_torch, torch_in_range

DISK_SAMPLE = 64 << 20   # bytes of shard files read to time the disk


@dataclass
class DoctorFigures:
    """What the doctor measured, for ``--json`` and for the diagnosis; None: not measured."""
    device_name: str = "CPU"
    gpu_memory: int | None = None              # bytes, the device's capacity
    bf16_supported: bool | None = None
    cpu_count: int | None = None
    padding_pct: float | None = None           # of mel frames, over the sampler's epoch
    n_shapes: int | None = None
    step_ms: float | None = None               # the step test's eager step
    loss: float | None = None
    host_syncs_per_step: float | None = None
    mem_peak_pct: float | None = None          # peak memory of the step test (train.memory)
    memory: DeviceMemory | None = None         # ... with the allocator's retries and OOMs
    loader_ms_per_batch: float | None = None   # with the configured workers
    loader_ms_in_process: float | None = None
    predicted_input_bound_pct: float | None = None
    disk_read_mb_s: float | None = None
    cache_bytes: int | None = None


class Doc:
    def __init__(self):
        self.checks: list[dict] = []
        self.findings: list[Finding] = []
        self.figures = DoctorFigures()

    def check(self, section: str, name: str, status: str, detail: str) -> None:
        self.checks.append({"section": section, "name": name, "status": status, "detail": detail})

    def find(self, sev, title, evidence, action, rule, impact) -> None:
        self.findings.append(Finding(sev, title, evidence, action, rule, impact))

    def note(self, **figures) -> None:
        """Write measured figures down; a misspelt name is a TypeError, not a figure lost."""
        self.figures = dataclasses.replace(self.figures, **figures)


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
    """torch, the GPU, its driver, bf16 and triton, each a check (and a finding when it is
    wrong) → the device the rest of the checks use."""
    E = "environment"
    _torch_build(doc)
    if not torch.cuda.is_available():
        _no_gpu(doc)
        doc.check(E, "GPU", "skip", "none visible: GPU checks skipped")
        return torch.device("cpu")
    dev = torch.device("cuda", 0)
    p = torch.cuda.get_device_properties(dev)
    doc.note(device_name=p.name, gpu_memory=p.total_memory)
    doc.check(E, "GPU", "ok", f"{torch.cuda.device_count()} visible; cuda:0 {p.name}, compute capability "
              f"{p.major}.{p.minor}, {_gib(p.total_memory)}")
    _driver(doc)
    bf16 = torch.cuda.is_bf16_supported()
    doc.note(bf16_supported=bf16)
    doc.check(E, "bf16 / TF32", "ok" if bf16 else "warn",
              f"bf16 {'yes' if bf16 else 'no'}, TF32 {'yes' if p.major >= 8 else 'no'} "
              f"(compute capability {p.major}.{p.minor})")
    if cfg.train.precision == "bf16" and not bf16:
        doc.find("high", "bf16 requested on a GPU without it", f"{p.name} has no bf16",
                 "`train.precision=fp16`", "env-bf16", 100)
    if _triton(doc, cfg):
        aligner_kernels(doc, cfg, dev)
    return dev


def _torch_build(doc: Doc) -> None:
    """The torch release and build, against the range MyXTTS supports."""
    cuda_build = torch.version.cuda
    spec = supported_torch()
    inside = spec is None or torch_in_range(torch.__version__, spec)
    doc.check("environment", "torch", ("ok" if cuda_build else "info") if inside else "warn",
              f"{torch.__version__} ({'CUDA ' + cuda_build if cuda_build else 'CPU-only'} build)"
              + (f"; MyXTTS supports torch{spec}" if spec else ""))
    if not inside:
        doc.find("high", "A torch release MyXTTS was not checked with",
                 f"torch {torch.__version__}; MyXTTS supports torch{spec}: the compiled step touches torch "
                 "internals that change between releases", f"`pip install 'torch{spec}'`", "env-torch-range", 60)


def _no_gpu(doc: Doc) -> None:
    """Why torch sees no GPU, where one seems to be there: a CPU-only build, or a CUDA build
    kept from the device."""
    cuda_build = torch.version.cuda
    nvidia_hw = Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None
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


def _driver(doc: Doc) -> None:
    """The driver's CUDA version, read through NVML, against the one torch was built for."""
    E, cuda_build = "environment", torch.version.cuda
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
                 f"`myxtts monitor`, {RunDir.REPORT})", "`pip install 'myxtts[gpu]'` (nvidia-ml-py)", "env-nvml", 1)


def _triton(doc: Doc, cfg) -> bool:
    """Is triton there where the settings need it (train.compile, or the duration decoder's
    aligner, which runs Triton kernels compiled or not)? False, with the way around, if not."""
    E = "environment"
    duration = cfg.model.decoder == "duration"
    if cfg.train.compile == "off" and not duration:
        return True
    try:
        import triton  # noqa: F401
        doc.check(E, "triton", "ok", f"{triton.__version__} (torch.compile can build GPU kernels)")
        return True
    except ImportError:
        doc.check(E, "triton", "fail", "not installed")
    ways = (["`train.compile=off`"] if cfg.train.compile != "off" else []) + \
           (["`train.aligner_on_host=true`"] if duration else [])
    needs = " and ".join((["train.compile"] if cfg.train.compile != "off" else []) +
                         (["the duration decoder's aligner"] if duration else []))
    doc.find("high", "No triton to build GPU kernels", f"{needs} on CUDA need triton, which is not "
             "installed", f"`pip install triton` (or {' and '.join(ways)})", "env-triton", 90)
    return False


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
    doc.note(cpu_count=cpus)
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
    files = sorted(CacheDir(cache.path).shards.glob("*/*.npy"))
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
    doc.note(disk_read_mb_s=mbs, cache_bytes=total)
    need = None
    if step and step.get("frames_per_s"):
        n_mels = cache.audio_cfg.n_mels
        ref = math.ceil(cfg.data.ref_seconds * cache.audio_cfg.sample_rate / cache.audio_cfg.hop_length)
        per_frame = n_mels * 2 * (1 + ref / max(float(cache.index.n_frames.mean()), 1.0))  # mel + reference, float16
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
