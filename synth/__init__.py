"""Synthesis (Yosys) and timing (OpenSTA) on the OSU 0.18 um standard cells."""
