"""Watching the GPU from the side: gpu (GpuSampler, NVML/GPM), stats (series verdicts), measured
(the typed figures a diagnosis reads), diagnose (verdict and rules -> findings), report and svg
(report.html, and what `myxtts monitor` draws), runlog (the trainer's log with all of these),
profile, doctor, tune, and what they share: measure (the one harness), modes (bench train),
loaders (loader throughput, bench loader), serving (bench serve), flops (FLOPs, MFU), ops (ATen
ops and host syncs per step), format (figures and findings as text).

Submodules are imported where used so that `import myxtts.observe.stats` pulls in no torch.
"""
