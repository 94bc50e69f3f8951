"""The DRAM model (sim/perf/dram.py) on patterns whose answer is computed by hand here."""

import pytest

from edgexpert.sim.perf.dram import DEVICES, LPDDR4X_4266, LPDDR5_6400, DramModel, device_for

# EdgeXpert's point (configs/default.yaml): LPDDR4X, 2 x16 channels at 4000 MT/s = 16 GB/s
RATE = 4000
T_BURST = 16 / RATE * 1e3          # BL16 at 4000 MT/s: 4 ns
RL = 36 * 0.469                    # LPDDR4X-4266 read latency, ns
T_RCD, T_RP, T_RPAB, T_RAS, T_RRD, T_FAW = 18.0, 18.0, 21.0, 42.0, 10.0, 40.0
T_REFI, T_RFC = 3904.0, 280.0


def lpddr4x(channels=2):
    return DramModel(LPDDR4X_4266, channels=channels, data_rate_mtps=RATE, interleave_bytes=64)


def test_peak_is_edgexperts_16_gb_per_s():
    assert lpddr4x().peak_bytes_per_s == pytest.approx(16e9)


def test_address_mapping_row_bank_column_channel():
    m = lpddr4x()
    assert m.locate(0) == (0, 0, 0)
    assert m.locate(64) == (1, 0, 0)                  # the next 64-byte chunk: other channel
    assert m.locate(128) == (0, 0, 0)
    assert m.locate(2 * 2048) == (0, 1, 0)            # a channel's 2 KB row is full: next bank
    assert m.locate(2 * 2048 * 8) == (0, 0, 1)        # every bank's row used: next row


def test_sequential_stream_reaches_peak_less_refresh():
    # 2 MiB from address 0: each channel reads 1 MiB = 32768 bursts of 32 bytes, back to back on
    # its data bus (row changes hide behind the open row: activates run ahead). The first data
    # come tRCD + RL after the first activate. Every all-bank refresh costs the bus
    # G = tRPab + tRFCab + tRCD + RL (precharge all, refresh, re-open the row, read latency).
    # Channel 0 refreshes at 1952 + 3904 k ns (channel 1 at 3904 + 3904 k: staggered); a refresh
    # is due once a column command passes its time, so n refreshes happen while
    # 1952 + 3904 (n - 1) <= 18 + 131072 + G n, i.e. n = 37 (the 38th would be due at 146400 ns,
    # after the channel's last command at ~143500 ns); channel 1 refreshes 36 times and ends first.
    G = T_RPAB + T_RFC + T_RCD + RL
    busy = 32768 * T_BURST
    expected_ns = T_RCD + RL + busy + 37 * G
    # One more thing can cost: a row change within tRRD of the activate that re-opens the row
    # after a refresh waits for tRRD (happens once on channel 0 here: 2 ns), never more than one
    # tRRD per refresh.
    r = lpddr4x().stream([(0, 2 << 20)])
    assert r.refreshes == 37 + 36
    assert expected_ns * 1e-9 <= r.time_s <= (expected_ns + T_RRD) * 1e-9
    # near peak: only refresh is lost, 1 - G / tREFI = 91.4 % in the long run
    assert r.efficiency == pytest.approx((2 << 20) / (expected_ns * 1e-9) / 16e9, rel=1e-4)
    assert 0.91 < r.efficiency < 1 - G / T_REFI + 0.001


def test_one_burst_per_row_same_bank_pays_trc_each():
    # 30 reads of 32 bytes, each in a new row of bank 0 of channel 0 (stride: 2 channels x 8
    # banks x 2 KB). Each row: activate, tRCD, one read, then precharge once tRAS has passed
    # (tRCD + tRTP = 25.5 ns < tRAS = 42 ns), tRP, the next activate: one row per
    # tRC = tRAS + tRP = 60 ns. No refresh: the last command (1758 ns) is before 1952 ns.
    n = 30
    r = lpddr4x().stream([(i * 2 * 8 * 2048, 32) for i in range(n)])
    assert r.activates == n and r.refreshes == 0
    assert r.time_s == pytest.approx(((n - 1) * (T_RAS + T_RP) + T_RCD + RL + T_BURST) * 1e-9)


def test_one_burst_per_row_across_banks_is_bound_by_trrd_and_tfaw():
    # the same, but each read in the next bank (stride 2 channels x 2 KB): no bank waits for its
    # own precharge; activates are spaced by tRRD = 10 ns and tFAW / 4 = 10 ns.
    n = 40
    r = lpddr4x().stream([(i * 2 * 2048, 32) for i in range(n)])
    assert r.activates == n
    assert r.time_s == pytest.approx(((n - 1) * max(T_RRD, T_FAW / 4) + T_RCD + RL + T_BURST)
                                     * 1e-9)
    # a short scattered burst costs what it costs: 32 bytes per 10 ns is 20 % of the peak
    assert r.efficiency == pytest.approx(n * 32 / r.time_s / 16e9)
    assert r.efficiency < 0.21


def test_lpddr5_streams_alternate_bank_groups():
    # LPDDR5 in bank-group mode: consecutive bursts rotate over the 4 bank groups, so a stream
    # runs at tCCD_S (one BL16 = 2.5 ns at 6400 MT/s); the four groups' rows open tRRD = 5 ns
    # apart, so the fourth burst's column command waits until 3 x 5 + 18 ns.
    t_burst, rl = 16 / 6400 * 1e3, 17 * 1.25
    r = DramModel(LPDDR5_6400, channels=1, interleave_bytes=64).stream([(0, 2048)])
    assert r.activates == 4
    assert r.time_s == pytest.approx((3 * 5.0 + 18.0 + 60 * t_burst + rl + t_burst) * 1e-9)
    # bursts that all fall in one bank group (every fourth burst, one row) go at tCCD_L = 2
    # bursts
    r = DramModel(LPDDR5_6400, channels=1, interleave_bytes=64).stream(
        [(i * 4 * 32, 32) for i in range(16)])
    assert r.activates == 1
    assert r.time_s == pytest.approx((18.0 + 15 * 2 * t_burst + rl + t_burst) * 1e-9)


def test_energy_of_sequential_bytes_is_the_hand_formula():
    # Per-action energies from the Micron LPDDR4 currents (mA), the DRAMPower method:
    # activate-precharge = sum over VDD1 (1.8 V), VDD2 (1.1 V) of
    #   V x (IDD0 tRC - IDD3N tRAS - IDD2N (tRC - tRAS)), tRC = 60.625 ns, tRAS = 42.5 ns
    e_act = (1.8 * (3.5 * 60.625 - 2.25 * 42.5 - 2.0 * 18.125)
             + 1.1 * (45 * 60.625 - 30 * 42.5 - 27 * 18.125)) * 1e-12
    # a burst: VDD2 x (IDD4R - IDD3N) x 5 ns; its I/O: VDDQ 0.6 V x (IDDQ4R - IDDQ3N) x 0.6/1.1
    e_rd = 1.1 * (275 - 30) * 5 * 1e-12
    e_io = 0.6 * (150 - 0.75) * (0.6 / 1.1) * 5 * 1e-12
    # standby with a row open, and refresh (IDD5 above IDD3N for 280 ns) every tREFI
    p_bg = (1.8 * 2.25 + 1.1 * 30 + 0.6 * 0.75 * 0.6 / 1.1) * 1e-3
    p_ref = (1.8 * (10 - 2.25) + 1.1 * (90 - 30)) * 280e-12 / (T_REFI * 1e-9)
    d = LPDDR4X_4266
    assert (d.activate_j, d.read_j, d.io_j) == pytest.approx((e_act, e_rd, e_io))
    # 16 KiB sequential: 8 KiB per channel = 4 rows (4 activates), 256 bursts, no refresh
    # (1059 ns < 1952 ns)
    t = T_RCD + RL + 256 * T_BURST
    r = lpddr4x().stream([(0, 16384)])
    assert (r.activates, r.bursts, r.refreshes) == (8, 512, 0)
    assert r.time_s == pytest.approx(t * 1e-9)
    expected = 8 * e_act + 512 * (e_rd + e_io) + 2 * (p_bg + p_ref) * t * 1e-9
    assert r.total_energy_j == pytest.approx(expected)
    assert set(r.energy_j) == {"activate_j", "read_j", "io_j", "refresh_j", "background_j"}
    # about 7 pJ per bit streamed, inside the 8-40 pJ/bit range published for LPDDR4
    assert 5e-12 < r.total_energy_j / (16384 * 8) < 9e-12


def test_scattered_bursts_cost_more_energy_per_bit_than_streams():
    seq = lpddr4x().stream([(0, 1 << 16)])
    scattered = lpddr4x().stream([(i * 2 * 2048, 32) for i in range(2048)])
    per_bit = lambda r: r.total_energy_j / (r.bytes_requested * 8)   # noqa: E731
    # one activate (1.2 nJ) per 32-byte burst adds 1.2 nJ / 256 bits = 4.7 pJ per bit
    assert per_bit(scattered) - per_bit(seq) > 4e-12


def test_bad_parameters_name_the_accepted_range():
    with pytest.raises(ValueError, match="accepted 1..4266"):
        DramModel(LPDDR4X_4266, data_rate_mtps=5000)
    with pytest.raises(ValueError, match="accepted multiples of 32"):
        DramModel(LPDDR4X_4266, interleave_bytes=48)
    with pytest.raises(ValueError, match="accepted LPDDR4X, LPDDR5"):
        device_for("DDR9")
    assert set(DEVICES) == {"LPDDR4X", "LPDDR5"}
