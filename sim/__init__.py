"""Simulation: cocotb runners for the RTL (runner.py); the trace-driven performance model joins
later."""
