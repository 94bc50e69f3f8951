"""RTL stimuli: the input sequences the synthesis flow's activity simulations drive each block
with."""
