"""Simulation: cocotb runners for the RTL (runner.py), the stimuli behind each block's power, and
the performance model (docs/performance-model.md): the DRAM model (dram.py) and the EMA cycle
model calibrated on the RTL (ema_model.py); the pass model joins later."""
