"""The analytical performance model: DRAM timing, the EMA's bus model, pass costs, the full-size
models, `estimate` and the Dask `sweep`. It never imports hw/."""
