"""DRAM model: LPDDR4X and LPDDR5 devices from cited timing and current figures, and an
event-level model that turns a stream of reads [(address, bytes)] into time and energy.

What is modelled (docs/performance-model.md):
- **Address mapping** `row : bank : column : bank group : burst : channel : offset`: the address
  space is cut into `interleave_bytes` chunks dealt round-robin over the channels; inside a
  channel, consecutive bursts rotate over the bank groups (LPDDR5; LPDDR4X has none), then fill
  a row (`row_bytes`, the page of one x16 channel), then the next bank, then the next row.
- **Reads only, in issue order per channel** (an in-order controller: a read's column command
  never passes an earlier one's), each cut into device bursts of `burst_bytes` (BL16 x 16 bits =
  32 bytes); a partial burst costs a whole one.
- **Open-page policy**: a row stays open until a read to another row of its bank (precharge
  after tRAS and the read-to-precharge time tRTP, activate tRP later), or until a refresh.
  A row hit waits only for the data bus (tCCD between column commands; tCCD_L inside a bank
  group). A new row waits for tRP, tRRD after the channel's last activate and tFAW (four
  activates per window), then tRCD; its data come RL after the column command.
- Activates are issued as early as their bank and the channel allow, so a row change in another
  bank hides behind the data of the open row (a controller with a row look-ahead).
- **Refresh**: all-bank refresh every tREFI per channel: the channel finishes its data, all
  banks precharge (tRPab), refresh for tRFCab; rows are then closed.
- **Energy** (the DRAMPower / Micron TN-41-01 method, from IDD currents): per activate-precharge
  pair, per burst read (array and I/O), refresh and background power over the elapsed time.

Not modelled: writes, per-bank refresh, power-down, command-bus conflicts, reordering (FR-FCFS),
the controller's and PHY's own pipeline latency (give it as a fixed latency where it matters).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Iterable

__all__ = ["DramDevice", "DramRails", "LPDDR4X_4266", "LPDDR5_6400", "DEVICES", "DramModel",
           "DramResult", "device_for"]


@dataclass(frozen=True)
class DramRails:
    """Supply voltages (V) and IDD currents (mA) of one x16 channel, per rail: VDD1 (core, 1.8 V),
    VDD2 (core), VDDQ (I/O). `t_ref_ns` is the burst length the IDD4R figure was measured at."""
    vdd1: float
    vdd2: float
    vddq: float
    idd0: tuple[float, float]       # one bank ACT-PRE at tRC (VDD1, VDD2)
    idd2n: tuple[float, float]      # all banks precharged, standby
    idd3n: tuple[float, float]      # one bank active, standby
    idd4r: tuple[float, float]      # continuous burst reads
    idd4rq: float                   # VDDQ during continuous reads (I/O)
    idd3nq: float                   # VDDQ in standby
    idd5: tuple[float, float]       # all-bank refresh, back to back
    t_rc_ref_ns: float              # tRC and tRAS of the IDD0 measurement
    t_ras_ref_ns: float
    t_burst_ref_ns: float           # one BL16 burst at the IDD4R measurement's data rate
    t_rfc_ref_ns: float             # tRFCab of the IDD5 measurement
    #: VDDQ currents at this VDDQ over the measured ones: LVSTL I/O is terminated to VSS, so its
    #: current scales with VDDQ (and its energy with VDDQ squared)
    iq_scale: float = 1.0


@dataclass(frozen=True)
class DramDevice:
    """One DRAM type at one speed: geometry and timing of one x16 channel (times in ns)."""
    name: str
    data_rate_mtps: int             # the speed bin's top data rate, MT/s per pin
    width_bits: int                 # data pins of one channel
    burst_length: int               # beats per read burst
    banks: int
    bank_groups: int                # 1: no bank groups
    row_bytes: int                  # page size of one channel
    t_rcd_ns: float
    t_rp_ns: float                  # per-bank precharge
    t_rpab_ns: float                # all-bank precharge (before a refresh)
    t_ras_ns: float
    t_rrd_ns: float
    t_faw_ns: float
    t_rtp_ns: float
    rl_ns: float                    # read latency: column command to first data
    ccd_long_bursts: int            # tCCD_L / tCCD_S in burst times (1 without bank groups)
    t_refi_ns: float
    t_rfc_ns: float                 # all-bank refresh
    rails: DramRails
    source: str

    @property
    def burst_bytes(self) -> int:
        return self.burst_length * self.width_bits // 8

    def burst_ns(self, data_rate_mtps: float) -> float:
        """Data-bus time of one burst at `data_rate_mtps` (tCCD_S)."""
        return self.burst_length / data_rate_mtps * 1e3

    # --- energy per action (J), from the currents ----------------------------------------
    @property
    def activate_j(self) -> float:
        """One activate-precharge pair: IDD0 over tRC less the standby it replaces (IDD3N while
        the row is open for tRAS, IDD2N for the rest), per core rail (DRAMPower)."""
        r = self.rails
        e = 0.0
        for rail, v in ((0, r.vdd1), (1, r.vdd2)):
            charge = (r.idd0[rail] * r.t_rc_ref_ns - r.idd3n[rail] * r.t_ras_ref_ns
                      - r.idd2n[rail] * (r.t_rc_ref_ns - r.t_ras_ref_ns))
            e += v * charge
        return e * 1e-12                                        # mA x ns x V = pJ

    @property
    def read_j(self) -> float:
        """The array's part of one burst read: IDD4R above active standby for one burst."""
        r = self.rails
        e = (r.vdd1 * (r.idd4r[0] - r.idd3n[0])
             + r.vdd2 * (r.idd4r[1] - r.idd3n[1])) * r.t_burst_ref_ns
        return e * 1e-12

    @property
    def io_j(self) -> float:
        """The I/O's part of one burst read: VDDQ current above standby for one burst."""
        r = self.rails
        return r.vddq * (r.idd4rq - r.idd3nq) * r.iq_scale * r.t_burst_ref_ns * 1e-12

    @property
    def refresh_j(self) -> float:
        """One all-bank refresh: IDD5 above active standby for tRFCab."""
        r = self.rails
        e = (r.vdd1 * (r.idd5[0] - r.idd3n[0])
             + r.vdd2 * (r.idd5[1] - r.idd3n[1])) * r.t_rfc_ref_ns
        return e * 1e-12

    @property
    def background_w(self) -> float:
        """Standby power of one channel with a row open (open-page policy): IDD3N on every
        rail."""
        r = self.rails
        return (r.vdd1 * r.idd3n[0] + r.vdd2 * r.idd3n[1]
                + r.vddq * r.idd3nq * r.iq_scale) * 1e-3


# Currents of one x16 channel of a Micron 6 Gb LPDDR4-3200 part (MT53B, per-channel IDD table),
# as DRAMPower transcribes them (tukl-msd/DRAMPower, memspecs/MICRON_6Gb_LPDDR4-3200_32bit_A.json):
# VDD1 1.8 V / VDD2 1.1 V / VDDQ 1.1 V; the IDD0 measurement at tRC = 97 tCK, tRAS = 68 tCK of
# 1600 MHz (60.6 / 42.5 ns), IDD4R at BL16 = 8 tCK (5 ns), IDD5 at tRFCab = 448 tCK (280 ns).
_MICRON_LPDDR4_3200 = DramRails(
    vdd1=1.8, vdd2=1.1, vddq=1.1,
    idd0=(3.5, 45.0), idd2n=(2.0, 27.0), idd3n=(2.25, 30.0), idd4r=(2.25, 275.0),
    idd4rq=150.0, idd3nq=0.75, idd5=(10.0, 90.0),
    t_rc_ref_ns=97 / 1.6, t_ras_ref_ns=68 / 1.6, t_burst_ref_ns=8 / 1.6, t_rfc_ref_ns=448 / 1.6)

#: LPDDR4X-4266, one x16 channel of an 8 Gb-per-channel die. Timing: JEDEC JESD209-4B (LPDDR4)
#: and JESD209-4-1 (LPDDR4X: the same core and timing, VDDQ 0.6 V), the 4266 bin as DRAMSys
#: transcribes it (tukl-msd/DRAMSys, configs/memspec/JEDEC_1Gbx16_LPDDR4-4266.json: tCK 0.469 ns,
#: RCD 39, RPpb 39, RPab 45, RAS 90, RRD 22, FAW 86, RTP 17, RL 36, CCD 8 = BL16/2 tCK,
#: REFI 8341 tCK) and the refresh row for 8 Gb per channel (tRFCab 280 ns, JESD209-4B).
#: 8 banks, 2 KB page per x16 channel, BL16 (JESD209-4B). Energies: the Micron LPDDR4 currents
#: above; LPDDR4X drives its I/O at VDDQ 0.6 V instead of 1.1 V (`iq_scale`: I/O energy
#: x (0.6 / 1.1)^2).
LPDDR4X_4266 = DramDevice(
    name="LPDDR4X", data_rate_mtps=4266, width_bits=16, burst_length=16, banks=8, bank_groups=1,
    row_bytes=2048,
    t_rcd_ns=18.0, t_rp_ns=18.0, t_rpab_ns=21.0, t_ras_ns=42.0, t_rrd_ns=10.0, t_faw_ns=40.0,
    t_rtp_ns=7.5, rl_ns=36 * 0.469, ccd_long_bursts=1,
    t_refi_ns=3904.0, t_rfc_ns=280.0,
    rails=replace(_MICRON_LPDDR4_3200, vddq=0.6, iq_scale=0.6 / 1.1),
    source="JESD209-4B / JESD209-4-1 (timing, 4266 bin via DRAMSys memspec); Micron LPDDR4 "
           "currents via DRAMPower memspec MICRON_6Gb_LPDDR4-3200, VDDQ 0.6 V")

#: LPDDR5-6400, one x16 channel in bank-group mode (4 groups x 4 banks, 2 KB page, BL16):
#: JEDEC JESD209-5 and Micron's LPDDR5 data sheet (MT62F, y31m: 6400 Mb/s per pin, 2 KB page in
#: BG mode, VDD1 1.8 V / VDD2H 1.05 V / VDDQ 0.5 V). Timing JESD209-5: tRCD 18 ns, tRPpb 18 ns,
#: tRPab 21 ns, tRAS 42 ns, tRRD 5 ns, tFAW 20 ns, tRTP 7.5 ns, RL 17 tCK of 1.25 ns (CK 800 MHz),
#: BL16 = 2 tCK with tCCD_S = 2 tCK and tCCD_L = 4 tCK (same bank group), tREFI 3.906 us, tRFCab
#: 280 ns (16 Gb die). Currents: no LPDDR5 IDD table is at hand, so the Micron LPDDR4 currents
#: are used at LPDDR5's rails: VDD2 energies x 1.05 / 1.1 (same current, lower supply), I/O
#: x (0.5 / 1.1)^2 (`iq_scale`, LVSTL at VDDQ 0.5 V) - an estimate, flagged as such in the docs.
LPDDR5_6400 = DramDevice(
    name="LPDDR5", data_rate_mtps=6400, width_bits=16, burst_length=16, banks=16, bank_groups=4,
    row_bytes=2048,
    t_rcd_ns=18.0, t_rp_ns=18.0, t_rpab_ns=21.0, t_ras_ns=42.0, t_rrd_ns=5.0, t_faw_ns=20.0,
    t_rtp_ns=7.5, rl_ns=17 * 1.25, ccd_long_bursts=2,
    t_refi_ns=3906.0, t_rfc_ns=280.0,
    rails=replace(_MICRON_LPDDR4_3200, vdd2=1.05, vddq=0.5, iq_scale=0.5 / 1.1),
    source="JESD209-5 and Micron MT62F LPDDR5 data sheet (timing, rails); Micron LPDDR4 "
           "currents via DRAMPower at LPDDR5's rails (estimate)")

DEVICES = {"LPDDR4X": LPDDR4X_4266, "LPDDR5": LPDDR5_6400}


def device_for(name: str) -> DramDevice:
    try:
        return DEVICES[name]
    except KeyError:
        raise ValueError(f"DRAM type {name!r} is not known: accepted "
                         f"{', '.join(DEVICES)}") from None


@dataclass
class DramResult:
    """Time and energy of a read stream. Energy in J, split by action."""
    time_s: float
    bytes_requested: int
    bytes_moved: int                # whole bursts
    bursts: int
    activates: int
    refreshes: int
    peak_bytes_per_s: float
    energy_j: dict = field(default_factory=dict)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bytes_requested / self.time_s if self.time_s else 0.0

    @property
    def efficiency(self) -> float:
        """Achieved / peak bandwidth (requested bytes over the elapsed time)."""
        return self.bandwidth_bytes_per_s / self.peak_bytes_per_s

    @property
    def row_misses(self) -> int:
        """Device bursts that opened their row (an activate each; after a refresh, too)."""
        return self.activates

    @property
    def row_hits(self) -> int:
        """Device bursts served from a row already open."""
        return self.bursts - self.activates

    @property
    def total_energy_j(self) -> float:
        return sum(self.energy_j.values())


class _Channel:
    def __init__(self, device: DramDevice, first_refresh_ns: float):
        self.open_row = [None] * device.banks
        self.act_at = [float("-inf")] * device.banks
        self.ready_at = [0.0] * device.banks             # earliest next activate
        self.last_read = [float("-inf")] * device.banks
        self.acts: deque = deque(maxlen=4)               # the tFAW window
        self.last_cas = float("-inf")
        self.last_cas_group = [float("-inf")] * device.bank_groups
        self.bus_free = 0.0
        self.next_refresh = first_refresh_ns


class DramModel:
    """An LPDDR system: `channels` x16 channels of `device` at `data_rate_mtps` (at most the
    device's bin), the address space interleaved over them every `interleave_bytes`.

    `access(at_s, address, nbytes)` takes reads in issue order and returns the times (s) of the
    first and last data; `result()` the totals; `stream(reads)` does both for reads that are
    all waiting at time 0."""

    def __init__(self, device: DramDevice, channels: int = 2, data_rate_mtps: float | None = None,
                 interleave_bytes: int = 64):
        rate = data_rate_mtps or device.data_rate_mtps
        if not 0 < rate <= device.data_rate_mtps:
            raise ValueError(f"data rate {rate} MT/s is out of range for {device.name}: accepted "
                             f"1..{device.data_rate_mtps}")
        if channels < 1:
            raise ValueError(f"channels = {channels} is out of range: accepted integers >= 1")
        if interleave_bytes % device.burst_bytes or interleave_bytes > device.row_bytes:
            raise ValueError(f"interleave_bytes = {interleave_bytes} is not accepted: accepted "
                             f"multiples of {device.burst_bytes} up to {device.row_bytes}")
        self.device = device
        self.channels = channels
        self.rate = rate
        self.interleave = interleave_bytes
        self.t_burst = device.burst_ns(rate)
        # refreshes of the channels are staggered evenly over one tREFI
        self._ch = [_Channel(device, device.t_refi_ns * (c + 1) / channels)
                    for c in range(channels)]
        self.bytes_requested = 0
        self.bursts = 0
        self.activates = 0
        self.refreshes = 0
        self.end_ns = 0.0

    @classmethod
    def from_config(cls, dram) -> "DramModel":
        """The DRAM of a `config.DramConfig` (`platform.dram`)."""
        return cls(device_for(dram.type), dram.channels, dram.data_rate_mtps,
                   dram.interleave_bytes)

    @property
    def peak_bytes_per_s(self) -> float:
        return self.channels * self.rate * 1e6 * self.device.width_bits / 8

    def locate(self, address: int) -> tuple[int, int, int]:
        """(channel, bank, row) of a byte address; bank = bank in its group x groups + group."""
        d = self.device
        chunk, offset = divmod(address, self.interleave)
        local_chunk, channel = divmod(chunk, self.channels)
        local = local_chunk * self.interleave + offset
        # bank groups rotate every burst, so a stream alternates groups (tCCD_S, not tCCD_L)
        bursts, offset = divmod(local, d.burst_bytes)
        bursts, group = divmod(bursts, d.bank_groups)
        local = bursts * d.burst_bytes + offset
        per_group = d.banks // d.bank_groups
        bank = (local // d.row_bytes) % per_group * d.bank_groups + group
        row = local // (d.row_bytes * per_group)
        return channel, bank, row

    def _refresh(self, ch: _Channel) -> None:
        d = self.device
        start = max(ch.next_refresh, ch.bus_free)
        ready = start + d.t_rpab_ns + d.t_rfc_ns
        ch.open_row = [None] * d.banks
        ch.ready_at = [max(r, ready) for r in ch.ready_at]
        ch.next_refresh += d.t_refi_ns
        self.refreshes += 1

    def _burst(self, at_ns: float, address: int) -> tuple[float, float]:
        d = self.device
        c, bank, row = self.locate(address)
        ch = self._ch[c]
        while max(at_ns, ch.last_cas) >= ch.next_refresh:
            self._refresh(ch)
        group = bank % d.bank_groups
        if ch.open_row[bank] == row:
            cas = at_ns
        else:
            if ch.open_row[bank] is not None:
                pre = max(at_ns, ch.act_at[bank] + d.t_ras_ns, ch.last_read[bank] + d.t_rtp_ns)
                ch.ready_at[bank] = max(ch.ready_at[bank], pre + d.t_rp_ns)
            act = max(at_ns, ch.ready_at[bank])
            if ch.acts:
                act = max(act, ch.acts[-1] + d.t_rrd_ns)
            if len(ch.acts) == 4:
                act = max(act, ch.acts[0] + d.t_faw_ns)
            ch.acts.append(act)
            ch.act_at[bank] = act
            ch.open_row[bank] = row
            self.activates += 1
            cas = act + d.t_rcd_ns
        cas = max(cas, ch.last_cas + self.t_burst,
                  ch.last_cas_group[group] + d.ccd_long_bursts * self.t_burst,
                  ch.bus_free - d.rl_ns)
        ch.last_cas = ch.last_cas_group[group] = ch.last_read[bank] = cas
        start = cas + d.rl_ns
        ch.bus_free = start + self.t_burst
        self.bursts += 1
        self.end_ns = max(self.end_ns, ch.bus_free)
        return start, ch.bus_free

    def _read(self, at_s: float, address: int, nbytes: int) -> list[tuple[int, float, float]]:
        """Schedule one read: (address, first data, last data) in ns of each device burst."""
        B = self.device.burst_bytes
        self.bytes_requested += nbytes
        at_ns = at_s * 1e9
        return [(a, *self._burst(at_ns, a))
                for a in range(address - address % B, address + nbytes, B)]

    def access(self, at_s: float, address: int, nbytes: int) -> tuple[float, float]:
        """One read of `nbytes` from `address` arriving at `at_s`: (first data, last data) in s."""
        bursts = self._read(at_s, address, nbytes)
        return (min(s for _, s, _ in bursts) * 1e-9, max(e for _, _, e in bursts) * 1e-9)

    def arrivals(self, at_s: float, address: int, nbytes: int, piece_bytes: int) -> list[float]:
        """One read, as `access`, cut into pieces of `piece_bytes` from `address` (a bus's beats):
        the time (s) each piece has fully arrived, the end of the last device burst holding one
        of its bytes. Channels work in parallel, so the times need not rise piece by piece."""
        if piece_bytes < 1 or nbytes % piece_bytes:
            raise ValueError(f"piece_bytes = {piece_bytes} does not divide the read's {nbytes} "
                             "bytes: accepted positive divisors")
        B = self.device.burst_bytes
        ends = {a: e for a, _, e in self._read(at_s, address, nbytes)}
        out = []
        for start in range(address, address + nbytes, piece_bytes):
            last = start + piece_bytes - 1
            out.append(max(ends[a] for a in range(start - start % B, last + 1, B)) * 1e-9)
        return out

    def stream(self, reads: Iterable[tuple[int, int]]) -> "DramResult":
        """All `reads` (address, bytes) waiting at time 0, served in order."""
        for address, nbytes in reads:
            self.access(0.0, address, nbytes)
        return self.result()

    def result(self, elapsed_s: float | None = None) -> DramResult:
        """Totals so far; energy over `elapsed_s` (default: until the last data)."""
        d = self.device
        time_s = self.end_ns * 1e-9 if elapsed_s is None else elapsed_s
        energy = {
            "activate_j": self.activates * d.activate_j,
            "read_j": self.bursts * d.read_j,
            "io_j": self.bursts * d.io_j,
            # refresh runs whatever the traffic: its average power over the elapsed time
            "refresh_j": self.channels * d.refresh_j / (d.t_refi_ns * 1e-9) * time_s,
            "background_j": self.channels * d.background_w * time_s,
        }
        return DramResult(time_s, self.bytes_requested, self.bursts * d.burst_bytes, self.bursts,
                          self.activates, self.refreshes, self.peak_bytes_per_s, energy)
