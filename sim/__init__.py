"""Simulation: cocotb runners for the RTL (runner.py), the stimuli behind each block's power, and
the performance model (docs/performance-model.md): the DRAM model (dram.py), the EMA cycle model
calibrated on the RTL (ema_model.py), the full-size MoE models (models.py), the pass model
(passes.py) and latency and energy per token (estimate.py)."""
