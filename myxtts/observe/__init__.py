"""Watching the GPU from the side: timers (StepTimer), gpu (GpuSampler, NVML/GPM), stats (series
verdicts), diagnose (rules -> findings), report (report.html), monitor (`myxtts monitor`).

Submodules are imported where used so that `import myxtts.observe.stats` pulls in no torch.
"""
