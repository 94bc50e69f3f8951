"""PyTorch golden model: the reference every RTL block is checked against, bit for bit."""
