"""Decoding: autoregressive and speculative decoding over the float or integer model, the EAGLE
draft head, the quality metrics."""
