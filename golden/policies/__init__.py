"""Decoding policies: what each pass fetches, one family per module (EdgeXpert, the reference
systems, ours), EdgeXpert's prefill (`prefill.py`), and the registry that builds them by name
(`registry.py`)."""
