"""Amaranth 0.5 RTL of the accelerator: one `wiring.Component` per block."""
