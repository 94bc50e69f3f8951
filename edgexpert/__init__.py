"""edgexpert: an open, RTL-level model of an EdgeXpert-style accelerator for speculative decoding
of Mixture-of-Experts language models (Amaranth RTL, PyTorch golden model, cocotb benches,
Yosys/OpenSTA costs)."""

__version__ = "0.1.0"
