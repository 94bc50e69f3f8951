"""cocotb benches: one folder per block, each checking the RTL against golden/ bit for bit."""
