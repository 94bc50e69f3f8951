"""The EAGLE-3-style draft head for the golden MoE model (docs/golden-model.md, "EAGLE draft").

A subpackage with one module per concern, so decoding imports the head and its drafting without
the trainer or the file format: `head.py` (the head and its A8W4 integer twin), `draft.py` (its
draft passes over a tree), `train.py` (training with the target as teacher), `files.py` (the
files that hold a trained head, tied to their checkpoint).
"""
