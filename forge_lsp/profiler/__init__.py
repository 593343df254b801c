"""Profiler layer: Nsight Compute metrics, roofline placement and rule-based bottleneck findings."""
