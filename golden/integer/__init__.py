"""The A8W4 integer path: the primitives the RTL matches bit for bit, the integer model and the
integer prefill encoder."""
