"""The accelerator top (docs/blocks/top.md): the EMA system, the DCU, the feeder and the expert
engine behind one host command stream, with status and performance counters.

- `Dispatcher`, `CommandMerge`, `CommandFork` (command.py): command beats to their consumers,
  each checked against the instance (a bad one reported, the engine kept in step); the host's
  and the DCU's EMA commands joined a whole command at a time, then to the EMA and the feeder;
- `CandidateTap`, `ScaleTap`, `HiddenPacker`, `DownJobs`, `DataMux` (feedback.py): the DCU's
  jobs, DOWN jobs completed from the engine's hidden outputs;
- `Replayer`, `MaskWalker`, `Locator`, `LineReader`, `Router` (feeder.py): each fetched
  matrix's scale block and selected columns from the weight buffer into the engine, tagged
  with their channels (a descriptor pair once per engine group that uses it);
- `Feeder`, `MatrixSplit`, `MatrixLane`, `BankArbiter` (lanes.py): those stages as two word
  streams, one per matrix, sharing the buffer's banks;
- `UseCounter` (prefill.py): from the PRU's routes, how many engine groups use each expert it
  fetches for a prefill chunk (the `Replayer`'s `uses`); `PrefillPath`: the PRU with it;
- `DcuPath` (dcu_path.py): the DCU with those parts and their queues, one component;
- `TopRegisters` (registers.py): status and counters, and the EMA's registers and the command
  path's, the DCU's and the PRU's rejections on the same port; `Activity` (registers.py): what
  the top does each cycle (its counters' events) and when a NEW_STEP may go;
- `AcceleratorTop` (top.py) joins them with `EmaSystem` and `ExpertEngine`.
"""

from .command import CommandFork, CommandMerge, Dispatcher
from .dcu_path import DcuPath
from .feedback import CandidateTap, DataMux, DownJobs, HiddenPacker, ScaleTap
from .feeder import LineReader, Locator, MaskWalker, Replayer, Router
from .lanes import BankArbiter, Feeder, MatrixLane, MatrixSplit
from .layouts import command_layout, job_layout
from .prefill import PrefillPath, UseCounter
from .registers import Activity, TopRegisters
from .top import AcceleratorTop

__all__ = ["AcceleratorTop", "Dispatcher", "CommandMerge", "CommandFork", "CandidateTap",
           "ScaleTap", "HiddenPacker", "DownJobs", "DataMux", "Replayer", "MaskWalker", "Locator",
           "LineReader", "Router", "Feeder", "MatrixSplit", "MatrixLane", "BankArbiter",
           "TopRegisters", "Activity", "DcuPath", "PrefillPath", "UseCounter", "command_layout",
           "job_layout"]
