"""Block references written from the contracts: the EMA controller, the depth coalescing unit and
the prompt routing unit."""
