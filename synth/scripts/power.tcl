# Power of the mapped netlist under simulated switching activity. Placeholders are filled in by
# edgexpert.synth.flow; the netlist is synth/netlist.py's, with registered input pads.
read_liberty ${liberty}
read_verilog ${power_netlist}
link_design ${top}
create_clock -name clk -period ${clock_period_ns} [get_ports clk]
set_input_delay 0 -clock clk [delete_from_list [all_inputs] [get_ports clk]]
set_load ${output_load_pf} [all_outputs]
# OpenSTA 2019 propagates activities on its first power evaluation and overwrites flip-flop
# annotations made before it; annotations made after it are kept (synth/activity.py)
sta::design_power [sta::cmd_corner]
source ${activity_tcl}
puts "edgexpert-power-design [sta::design_power [sta::cmd_corner]]"
set pads {0 0 0 0}
foreach inst [get_cells ${pad_prefix}*] {
  set pads [lmap a $$pads b [sta::instance_power $$inst [sta::cmd_corner]] {expr {$$a + $$b}}]
}
puts "edgexpert-power-pads $$pads"
puts "edgexpert-instances [llength [get_cells *]]"
exit
