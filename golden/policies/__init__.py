"""Decoding policies: what each pass fetches (EdgeXpert, the reference systems, ours) and the
registry that builds them by name."""
