"""cocotb bench of the expert engine (bench.py), its host side (host.py) and the function that
runs it."""
