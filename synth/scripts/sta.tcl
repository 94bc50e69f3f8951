# Static timing of the mapped netlist. Placeholders are filled in by edgexpert.synth.flow.
read_liberty ${liberty}
read_verilog ${netlist}
link_design ${top}
create_clock -name clk -period ${clock_period_ns} [get_ports clk]
# Ports are registered on both sides in the accelerator: inputs arrive at the clock edge from a
# BUFX2, outputs drive a fixed load and are due by the next edge.
set_input_delay 0 -clock clk [delete_from_list [all_inputs] [get_ports clk]]
set_driving_cell -lib_cell BUFX2 -pin Y [delete_from_list [all_inputs] [get_ports clk]]
set_output_delay 0 -clock clk [all_outputs]
set_load ${output_load_pf} [all_outputs]
report_checks -path_delay max -digits 4
puts "edgexpert-worst-slack-ns [sta::worst_slack -max]"
exit
