# Static timing of the mapped netlist. Placeholders are filled in by edgexpert.synth.flow.
read_liberty ${liberty}
read_verilog ${netlist}
link_design ${top}
create_clock -name clk -period ${clock_period_ns} [get_ports clk]
# Ports are registered on both sides in the accelerator: inputs arrive at the clock edge from a
# BUFX2, outputs drive a fixed load and are due by the next edge. The reset, like the clock, is
# an ideal network: a chip distributes it through a buffer tree that physical design builds, so
# `rst` has no driving cell (an unbuffered BUFX2 into the top's thousands of loads took 23 ns);
# its paths through the logic in front of each flip-flop are still timed.
set_input_delay 0 -clock clk [delete_from_list [all_inputs] [get_ports clk]]
set_driving_cell -lib_cell BUFX2 -pin Y [delete_from_list [all_inputs] [get_ports -quiet {clk rst}]]
set_output_delay 0 -clock clk [all_outputs]
set_load ${output_load_pf} [all_outputs]
report_checks -path_delay max -digits 4
${gated_reports}puts "edgexpert-worst-slack-ns [sta::worst_slack -max]"
exit
