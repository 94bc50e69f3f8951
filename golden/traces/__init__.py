"""Test vectors and traces the golden model writes for the RTL benches and the performance model
(formats in edgexpert.contracts)."""
