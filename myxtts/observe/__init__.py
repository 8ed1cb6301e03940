"""Watching the GPU from the side: gpu (GpuSampler, NVML/GPM), stats (series verdicts), measured
(the typed figures a diagnosis reads), diagnose (verdict and rules -> findings), report
(report.html), runlog (the trainer's log with all of these), profile, doctor, tune, monitor.

Submodules are imported where used so that `import myxtts.observe.stats` pulls in no torch.
"""
