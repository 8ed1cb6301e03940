"""Device, dtype and autocast: decided once, applied from outside the model.

bf16 autocast where the GPU has it (no loss scaling needed), fp16 + GradScaler on older GPUs,
fp32 on the CPU by default (CPU autocast is slower than fp32 for these models). TF32 matmuls
are switched on for CUDA: full-precision storage with tensor-core throughput.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from myxtts.errors import UserError


@dataclass
class Precision:
    device: torch.device
    name: str  # fp32 | bf16 | fp16
    dtype: torch.dtype

    def autocast(self):
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def grad_scaler(self):
        """A GradScaler for fp16 (gradients underflow without it); None otherwise."""
        if self.name != "fp16":
            return None
        return torch.amp.GradScaler(self.device.type)


def pick_device(local_rank: int | None = None) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank or 0)
    return torch.device("cpu")


def resolve(setting: str, device: torch.device) -> Precision:
    """Turn the ``train.precision`` setting into what this device can run."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        bf16_ok = torch.cuda.is_bf16_supported()
        if setting == "auto":
            setting = "bf16" if bf16_ok else "fp16"
        if setting == "bf16" and not bf16_ok:
            raise UserError(f"train.precision=bf16: {torch.cuda.get_device_name(device)} has no "
                            "bf16 support; use train.precision=fp16")
    else:
        if setting == "auto":
            setting = "fp32"
        if setting == "fp16":
            raise UserError("train.precision=fp16 needs a CUDA GPU; use fp32 or bf16 on the CPU")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[setting]
    return Precision(device, setting, dtype)


def device_name(device: torch.device | None = None) -> str:
    """The GPU's name (this process's GPU by default), or the CPU's model and usable cores: what
    every record and run header names the machine by."""
    if device is None:
        device = pick_device()
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_info('model name', 'unknown CPU')} ({usable_cpus()} cores)"


def cpu_info(field: str, default: str) -> str:
    """A field of the first CPU in /proc/cpuinfo ("model name", "vendor_id"); ``default`` where
    there is none (another system)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return default


def usable_cpus() -> int:
    """CPUs this process may run on (a container's cgroup/affinity, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU, where work is synchronous)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
