"""Does a model's reference encoder still hear the reference? For each checkpoint: the first clip
of every voice in the cache (its first data.ref_seconds, as training cuts references) through
the reference encoder, and

- the latents' spread: max |latents(voice 0) - latents(voice i)| (about 0 where every voice
  gives the same conditioning: the voice is lost);
- for each stage (the three convolutions before their GELU, the projection, the resampler's key
  and value norm): the per-element RMS, and each voice's mean over time split into what all
  voices share (the norm of their mean) and what tells them apart (the mean norm of each voice's
  difference from it), with their ratio.

    PYTHONPATH=. python reference_spread.py CACHE CHECKPOINT...
"""
import sys

import numpy as np
import torch

from myxtts.data.cache import Cache
from myxtts.data.dataset import ref_frames_for
from myxtts.models.checkpoint import load_model

cache = Cache(sys.argv[1])
voices = sorted(cache.first_of_each_speaker().items())
for path in sys.argv[2:]:
    model, cfg = load_model(path)[:2]
    enc = model.ref_encoder
    n_ref = ref_frames_for(cfg.audio, cfg.data.ref_seconds)
    acts: dict[str, list] = {}
    stages = [(f"conv{j}", c) for j, c in enumerate(enc.convs)] + [("proj", enc.proj), ("norm_kv", enc.blocks[0].norm_kv)]
    for name, m in stages:
        m.register_forward_hook(lambda m, i, o, name=name: acts.setdefault(name, []).append(o.detach()))
    latents = []
    with torch.no_grad():
        for _, i in voices:
            mel = torch.from_numpy(np.asarray(cache.mel(i), dtype=np.float32))[:n_ref][None]  # (1, Tr, M)
            latents.append(model.conditioning(mel, torch.tensor([mel.shape[1]]))[0])  # (K, d)
    lat = torch.stack(latents)
    print(f"{path}: latents' spread across {len(voices)} voices {(lat[1:] - lat[0]).abs().amax():.4f}")
    for name, outs in acts.items():
        if name.startswith("conv"):  # (1, C, T): mean over time
            mean = torch.stack([o[0].mean(-1) for o in outs])
        else:  # (1, T, d) or (T, d)
            mean = torch.stack([o.reshape(-1, o.shape[-1]).mean(0) for o in outs])
        rms = torch.stack([o.pow(2).mean().sqrt() for o in outs]).mean()
        shared, apart = mean.mean(0).norm(), (mean - mean.mean(0)).norm(dim=1).mean()
        print(f"  {name:8s} RMS {rms:9.3f}   shared {shared:10.3f}   apart {apart:9.3f}   ratio {apart / shared:.3f}")
