"""Studies over the policies: side-by-side evaluation, the settings ablations, measurements of the
model, prefill calibration, the dispatch benchmark."""
