"""More calibrations of the xlat-perf RFC 8219 tester against DUTs of known
capacity, as a user of the documented CLI would run them: a bit-rate token
bucket (``tc tbf``) measured with 512- and 1518-byte frames, IPv6 frames,
bidirectional traffic through one shared packet-rate limit, the frame loss
rate above and below a limit, late frames after the post-trial wait, and
trials the tester itself spoiled (sender behind schedule).

The DUT is a router namespace (IPv4 and IPv6 forwarding). This kernel has no
netem and no tc police: nftables ``limit`` (packets/s), ``tc tbf`` (bytes/s)
and ``xlat-perf delay-relay`` (a fixed delay) stand in. Rates stay far below
the tester's own ceiling (5-25 k frames/s); a search disturbed by the shared,
loaded machine is run once more, a wrong tester fails both times.
Namespaces use the prefix ``xlt``.
"""

from __future__ import annotations

import itertools
import json

import pytest

from lab import netns
from tests.test_perf import _router2, delay_relay, measured_trial, perf, perf_json


@pytest.fixture
def lab():
    with netns.Lab(netns.random_prefix("xlt")) as lab:
        yield lab


def _nft_forward(lab: netns.Lab, r: str, rules: str) -> None:
    lab.exec(
        r,
        ["nft", "-f", "-"],
        input="table inet xlt {\n chain xforward {\n"
        "  type filter hook forward priority 0; policy accept;\n"
        f"  {rules}\n }}\n}}\n",
    )


def _ends(s: str, d: str, v6: bool = False) -> list[str]:
    if v6:
        dst, src = "[2001:db8:2::2]:7000", "2001:db8:1::1"
    else:
        dst, src = "198.51.100.2:7000", "192.0.2.1"
    return ["--send-netns", s, "--recv-netns", d, "--dst", dst, "--src", src]


def _tbf_toward_receiver(lab: netns.Lab, r: str, rate: str, burst: int, *queue: str):
    """A tc token bucket (``tbf``) of ``rate`` and ``burst`` bytes on the router's
    port toward the receiver; ``queue``: its ``latency`` or ``limit``."""
    lab.exec(
        r,
        ["tc", "qdisc", "replace", "dev", "p1", "root", "tbf", "rate", rate]
        + ["burst", str(burst), *queue],
    )


def _search(args: list[str], expect: float, attempts: int = 2) -> dict:
    """Throughput search (RFC 8219 section 7.1) whose result must lie within
    +-5% of ``expect``; one more search if a disturbed one missed."""
    for _ in range(attempts):
        r = perf_json("throughput", *args, "--error", "0.02", timeout=60)
        rep = r["repetitions"][0]
        got = rep["throughput_fps"]
        print(f"expected {expect:.0f} fps, measured {got}: {rep['search']}")
        if abs(got - expect) <= 0.05 * expect:
            break
    assert abs(got - expect) <= 0.05 * expect, rep
    # The result is the final lower bound: a rate that passed.
    assert any(
        t["rate"] == got and t["zero_loss"] and t["valid"] for t in rep["trials"]
    ), rep
    return r


# RFC 8219 section 5.1.1 / RFC 2544 section 9 frame sizes against a bit-rate
# token bucket. A frame size counts the Ethernet FCS, which a veth never
# carries: the shaper sees frame - 4 bytes (Ethernet header + IP packet), so a
# tbf of R bit/s forwards R / (8 (frame - 4)) frames/s. The tbf's queue is
# 10 ms (a scheduling hiccup of the loaded machine) and its bucket holds 64
# frames (adding at most ~1% to a 1.5 s trial), so what the tester
# finds is that rate within +-5%.
@pytest.mark.timeout(60)
@pytest.mark.parametrize("frame,fps", [(512, 10000), (1518, 5000)])
def test_rfc8219_s7_1_throughput_of_bit_rate_token_bucket(lab, frame, fps):
    s, router, d = _router2(lab)
    rate_bit = fps * (frame - 4) * 8
    burst = 64 * (frame - 4)
    _tbf_toward_receiver(lab, router, f"{rate_bit}bit", burst, "latency", "10ms")
    r = _search(
        [
            *_ends(s, d),
            "--frame-size",
            str(frame),
            "--max-rate",
            str(fps * 5 // 2),
            "--duration",
            "1.5",
            "--wait",
            "0.2",
        ],
        fps,
    )
    assert r["parameters"]["frame_size"] == frame
    assert r["parameters"]["udp_payload"] == frame - 18 - 20 - 8
    # What the shaper counted: frame - 4 bytes per frame (a stray ARP or
    # neighbour frame among ~100000 test frames moves the mean by < 0.1).
    (q,) = json.loads(
        lab.exec(router, ["tc", "-s", "-j", "qdisc", "show", "dev", "p1"]).stdout
    )
    assert q["packets"] > 10 * fps, q
    assert abs(q["bytes"] / q["packets"] - (frame - 4)) < 1, q


# RFC 8219 section 7.1 with IPv6 frames (84 bytes, RFC 8219 section 5.1.1)
# through a router that forwards at most 20000 IPv6 frames/s.
@pytest.mark.timeout(60)
def test_rfc8219_s7_1_ipv6_throughput_calibrated(lab):
    s, r, d = _router2(lab)
    _nft_forward(
        lab, r, "meta nfproto ipv6 limit rate over 20000/second burst 500 packets drop"
    )
    r = _search(
        [
            *_ends(s, d, v6=True),
            "--max-rate",
            "25000",
            "--duration",
            "1.5",
            "--wait",
            "0.2",
        ],
        20000,
    )
    assert r["parameters"]["frame_size"] == 84


# RFC 8219 section 7.1 / RFC 2544 section 26.1 (frames at a constant rate)
# against the shallowest common policer: an nft limit with its default burst
# of 5 frames at 20000 frames/s. A tester that sends in trains longer than 5
# frames (a batch due at once, or trains grown by late wake-ups) is measured
# far below the limit (0.57-0.74x with trains of 200 us); one that keeps its
# trains short finds the limit within +-5%. Five searches at most: a stall of
# the shared machine near the limit spoils one (its sender then catches up
# faster than the rate; with 5 tokens every lag of a few ms costs frames).
# At 50000 frames/s (this test until 2026-11-29) the same policer was
# measured at 0.77-0.96x in 15 searches on a busier day (the inline router
# made each frame cost the sender 15 us, 70% of its CPU; docs/xlat-perf.md).
@pytest.mark.timeout(150)
def test_rfc8219_s7_1_throughput_of_a_policer_with_a_5_frame_burst(lab):
    s, r, d = _router2(lab)
    _nft_forward(lab, r, "udp dport 7000 limit rate over 20000/second drop")
    _search(
        [
            *_ends(s, d),
            "--max-rate",
            "25000",
            "--duration",
            "1",
            "--wait",
            "0.2",
        ],
        20000,
        attempts=5,
    )


# RFC 2544 section 14 / RFC 8219 section 5.3: a bidirectional test offers the
# same rate from each direction, and the throughput is the highest such rate
# at which neither direction loses a frame. Through one limit of 20000
# frames/s shared by both directions, that is 10000 frames/s per direction
# (20000 in aggregate); each direction's counts are reported.
@pytest.mark.timeout(60)
def test_rfc8219_bidirectional_throughput_per_direction(lab):
    s, r, d = _router2(lab)
    _nft_forward(
        lab, r, "udp dport 7000 limit rate over 20000/second burst 500 packets drop"
    )
    j = _search(
        [
            *_ends(s, d),
            "--bidirectional",
            "--reverse-dst",
            "192.0.2.1:7000",
            "--max-rate",
            "25000",
            "--duration",
            "2",
            "--wait",
            "0.2",
        ],
        10000,
    )
    rep = j["repetitions"][0]
    assert rep["directions"] == 2
    assert rep["aggregate_throughput_fps"] == 2 * rep["throughput_fps"], rep
    agg = j["summary"]["aggregate throughput (both directions)"]["summary"]
    assert agg["median"] == 2 * rep["throughput_fps"], j["summary"]
    # Each trial carries both directions at the same rate; a failed trial
    # lost frames in at least one of them.
    for t in rep["trials"]:
        rev = t["reverse"]
        assert rev["rate"] == t["rate"] and rev["planned"] == t["planned"], t
        if t["valid"] and not t["zero_loss"]:
            assert t["lost"] + rev["lost"] + t["duplicates"] + rev["duplicates"] > 0, t


# RFC 8219 section 7.4 / RFC 2544 section 26.3: above a 10000 frames/s limit
# (bucket 200) the frame loss rate is (offered - forwarded) / offered; below
# it, zero. 2 s at 20000 frames/s: 40000 offered, 20200 forwarded, FLR
# 49.5% (+-2.5 points: 5% of the limit); at 5000 frames/s: 0%.
@pytest.mark.timeout(60)
def test_rfc8219_s7_4_frame_loss_above_and_below_a_limit(lab):
    s, r, d = _router2(lab)
    _nft_forward(
        lab, r, "udp dport 7000 limit rate over 10000/second burst 200 packets drop"
    )
    for _ in range(3):
        j = perf_json(
            "frame-loss",
            *_ends(s, d),
            "--max-rate",
            "20000",
            "--rates",
            "100%,25%",
            "--duration",
            "2",
            "--wait",
            "0.2",
            "--retries",
            "3",
        )
        above, below = j["repetitions"][0]["trials"]
        print(above["frame_loss_rate_percent"], below["frame_loss_rate_percent"])
        if above["valid"] and below["valid"] and below["lost"] == 0:
            break
    assert above["valid"] and below["valid"], j
    expect = (40000 - (2 * 10000 + 200)) / 40000 * 100
    assert abs(above["frame_loss_rate_percent"] - expect) <= 2.5, above
    assert above["lost"] == above["planned"] - above["received"]
    assert below["frame_loss_rate_percent"] == 0.0 and below["lost"] == 0, below
    s_above = j["summary"]["FLR at 20000 fps"]["summary"]
    assert s_above["n"] == 1 and s_above["median"] == above["frame_loss_rate_percent"]


# RFC 2544 section 26.3: the default rates go down from 100% of the maximum
# in 10% steps "until there are two successive trials in which no frames are
# lost". Against a 10000 frames/s limit offered at most 20000: the rates
# above the limit lose frames, the run stops after two lossless ones, and
# only the valid trials enter the summary.
@pytest.mark.timeout(60)
def test_rfc2544_s26_3_frame_loss_steps_stop_after_two_lossless(lab):
    s, r, d = _router2(lab)
    _nft_forward(
        lab, r, "udp dport 7000 limit rate over 10000/second burst 100 packets drop"
    )
    for _ in range(3):
        j = perf_json(
            "frame-loss",
            *_ends(s, d),
            "--max-rate",
            "20000",
            "--duration",
            "1",
            "--wait",
            "0.2",
            "--retries",
            "3",
        )
        trials = j["repetitions"][0]["trials"]
        if all(t["valid"] for t in trials):
            break
    rates = [t["rate"] for t in trials]
    print(rates, [t["frame_loss_rate_percent"] for t in trials])
    assert j["parameters"]["default_rates"] is True
    assert (
        rates
        == [20000, 18000, 16000, 14000, 12000, 10000, 8000, 6000, 4000, 2000][
            : len(rates)
        ]
    ), rates
    # Above the limit every trial loses frames: (offered - 10100) / offered.
    for t in trials:
        if t["rate"] >= 12000:
            expect = (t["rate"] - 10100) / t["rate"] * 100
            assert abs(t["frame_loss_rate_percent"] - expect) <= 3.0, t
    # The run ended with two lossless trials in a row, and not before.
    clean = [t["valid"] and t["zero_loss"] for t in trials]
    assert clean[-2:] == [True, True], trials
    assert not any(a and b for a, b in itertools.pairwise(clean[:-1])), clean
    assert len(rates) <= 9, rates


# RFC 2544 section 23 / RFC 8219 section 7.4: frames that arrive after the
# post-trial wait are lost. Every frame is delayed 300 ms (delay-relay); with
# a 0.1 s wait the frames of the last 0.2 s of a 1 s trial are late (FLR
# 20%), with a 0.6 s wait none is (FLR 0), with no wait those of the last
# 0.3 s (FLR 30%: the wait counts from the last frame sent; it counted from
# the senders' socket close, which with packet I/O waits tens of
# milliseconds, and 25.7-27.7% were lost).
@pytest.mark.timeout(60)
def test_rfc2544_s23_frames_after_the_wait_are_lost(lab):
    s, r, d = _router2(lab)
    _nft_forward(lab, r, 'iifname "p0" udp dport 7000 drop')
    with delay_relay(lab, r, "--delay-ms", "300", "--duration", "40"):
        got = {}
        for wait in ("0", "0.1", "0.6"):
            for _ in range(3):
                j = perf_json(
                    "frame-loss",
                    *_ends(s, d),
                    "--max-rate",
                    "2000",
                    "--rates",
                    "100%",
                    "--duration",
                    "1",
                    "--wait",
                    wait,
                    "--retries",
                    "3",
                )
                t = measured_trial(j["repetitions"][0])
                if t["valid"]:
                    break
            assert t["valid"], t
            got[wait] = t
            print(wait, t["frame_loss_rate_percent"], t)
    # The relay may add to a delay (a late wake-up), never take from it.
    assert 29.8 <= got["0"]["frame_loss_rate_percent"] <= 31.5, got["0"]
    assert abs(got["0.1"]["frame_loss_rate_percent"] - 20.0) <= 1.5, got["0.1"]
    assert got["0.1"]["received"] + got["0.1"]["lost"] == 2000
    assert got["0.6"]["lost"] == 0, got["0.6"]


# RFC 8219 section 7.3.1 / 7.3.2 (PDV after RFC 5481, IPDV after RFC 3393)
# through a known delay variation (this kernel has no netem jitter): the
# relay holds every frame 2 ms and every 50th 10 ms more; first in first
# out, the frames behind a held one wait for it. So D_min = 2 ms, the
# 99.9th percentile of the delays is the held frames' 12 ms (PDV = 10 ms),
# the largest |IPDV| is the step onto a held frame (+10 ms), and most
# consecutive frames have equal delays (median IPDV 0). Over 3 repetitions
# (medians); the relay's own wake-ups on the loaded machine may add to the
# largest delays, never take from them.
@pytest.mark.timeout(60)
def test_rfc8219_s7_3_pdv_and_ipdv_through_known_delay_variation(lab):
    s, r, d = _router2(lab)
    _nft_forward(lab, r, 'iifname "p0" udp dport 7000 drop')
    common = [*_ends(s, d), "--rate", "1000", "--duration", "2", "--wait", "0.2"]
    spikes = ("--spike-ms", "10", "--spike-every", "50")
    with delay_relay(lab, r, "--delay-ms", "2", *spikes, "--duration", "50"):
        pdv = perf_json("pdv", *common, "--repeat", "3", "--retries", "3")
        ipdv = perf_json("ipdv", *common, "--repeat", "3", "--retries", "3")
    for rep in pdv["repetitions"]:
        t = rep["trial"]
        print("pdv", t["pdv_ns"], t["d_min_ns"], t["valid"])
        if t["valid"]:
            assert t["received"] == t["planned"] == 2000, t
            assert 1.9e6 <= t["d_min_ns"] <= 2.5e6, t
    v = pdv["summary"]["PDV"]["summary"]
    assert v["n"] >= 2, pdv["summary"]
    assert 9.5e6 <= v["median"] <= 15e6, v
    stats = [
        rep["trial"]["ipdv_ns"] for rep in ipdv["repetitions"] if rep["trial"]["valid"]
    ]
    print("ipdv", stats)
    assert len(stats) >= 2, ipdv
    big = sorted(x["abs_p99_9"] for x in stats)[len(stats) // 2]
    assert 8e6 <= big <= 13e6, stats
    assert all(abs(x["median"]) < 0.3e6 and x["n"] == 1999 for x in stats), stats
    assert ipdv["summary"]["IPDV 99.9th percentile of |IPDV|"]["summary"]["n"] == len(
        stats
    )


# RFC 8219 section 7 / siitperf's rule: a trial in which the sender fell
# behind schedule is invalid; it is reported as such and never enters the
# summary (its loss is the tester's, not the DUT's). 5 M frames/s from one
# sender thread cannot be kept here.
@pytest.mark.timeout(40)
def test_invalid_trials_are_reported_not_summarised(lab):
    s, _r, d = _router2(lab)
    # 5 M frames/s, one 0.2 s trial, no retry.
    fast = [*_ends(s, d), "--max-rate", "5000000", "--duration", "0.2"]
    fast += ["--wait", "0.1", "--retries", "0"]
    j = perf_json("frame-loss", *fast, "--rates", "100%")
    (t,) = j["repetitions"][0]["trials"]
    assert not t["valid"] and not t["zero_loss"], t
    assert t["sent"] < t["planned"], t
    assert "FLR at 5000000 fps" not in j["summary"], j["summary"]
    assert any("invalid" in w for w in j["warnings"]), j["warnings"]
    # In the table the trial says so, and no summary value comes from it.
    out = perf("frame-loss", *fast, "--rates", "100%").stdout
    assert "invalid: sender behind" in out, out
    assert "FLR at 5000000 fps over" not in out, out
    # The same for a throughput search whose every trial was invalid: its 0
    # says nothing about the DUT and does not enter the summary (it was
    # counted there as a throughput of 0, pulling the median down).
    j = perf_json("throughput", *fast, "--max-trials", "1")
    (rep,) = j["repetitions"]
    assert rep["throughput_fps"] == 0 and rep["invalid_trials"] == 1, rep
    assert j["summary"]["throughput"]["summary"] is None, j["summary"]
    assert any("left out of the summary" in w for w in j["warnings"]), j["warnings"]


# RFC 8219 section 5.1.1 through a real translator (xlat SIIT, TUN
# datapath): 84-byte IPv6 frames arrive as 64-byte IPv4 frames and 64-byte
# IPv4 frames as 84-byte IPv6 ones; at a rate far below the translator's
# capacity every frame of both directions, also of a bidirectional trial
# (RFC 2544 section 14), is received once and counted per direction.
@pytest.mark.timeout(90)
def test_rfc8219_s5_1_1_both_directions_through_xlat_siit():
    from tests.conftest import close_siit, make_siit, need_xlat

    need_xlat()
    t, x = make_siit(datapath="tun")
    try:
        t.lab.exec(t.h6, ["ping", "-c1", "-W2", t.h4_v6], check=False)
        t.lab.exec(t.h4, ["ping", "-c1", "-W2", t.h6_v4], check=False)
        cases = [
            # (sender ns, receiver ns, dst, src, recv-bind, frame, recv frame, extra)
            (
                t.h6,
                t.h4,
                f"[{t.h4_v6}]:7000",
                t.h6_addr,
                f"{t.h4_addr}:7000",
                84,
                64,
                [],
            ),
            (
                t.h4,
                t.h6,
                f"{t.h6_v4}:7000",
                t.h4_addr,
                f"[{t.h6_addr}]:7000",
                64,
                84,
                [],
            ),
            (
                t.h6,
                t.h4,
                f"[{t.h4_v6}]:7000",
                t.h6_addr,
                f"{t.h4_addr}:7000",
                84,
                64,
                ["--bidirectional", "--reverse-dst", f"{t.h6_v4}:7000"],
            ),
        ]
        for sns, rns, dst, src, rbind, frame, rframe, extra in cases:
            for _ in range(3):
                j = perf_json(
                    "frame-loss",
                    "--send-netns",
                    sns,
                    "--recv-netns",
                    rns,
                    "--dst",
                    dst,
                    "--src",
                    src,
                    "--recv-bind",
                    rbind,
                    "--frame-size",
                    str(frame),
                    *extra,
                    "--max-rate",
                    "2000",
                    "--rates",
                    "100%",
                    "--duration",
                    "1",
                    "--wait",
                    "0.5",
                    "--retries",
                    "3",
                )
                tr = measured_trial(j["repetitions"][0])
                if tr["valid"] and tr["zero_loss"]:
                    break
            print(dst, extra, {k: tr[k] for k in ("planned", "received", "foreign")})
            assert j["parameters"]["frame_size"] == frame
            assert j["parameters"]["recv_frame_size"] == rframe
            assert tr["valid"] and tr["zero_loss"], tr
            assert tr["received"] == tr["planned"] == 2000 and tr["foreign"] == 0, tr
            if extra:
                rev = tr["reverse"]
                assert rev["received"] == rev["planned"] == 2000, rev
    finally:
        close_siit(t, x)


# RFC 2544 section 26.5: the recovery time is from the rate change (A) to
# the last frame lost (B). A DUT that still loses frames at the end of the
# recovery phase has not recovered while measured: its recovery time is
# unknown (null), not the length of the phase. A router that drops every
# test frame never recovers; a lossless one recovers at once.
@pytest.mark.timeout(40)
def test_rfc2544_s26_5_a_dut_that_never_recovers(lab):
    s, r, d = _router2(lab)
    args = [
        *_ends(s, d),
        "--throughput",
        "1000",
        "--duration",
        "0.5",
        "--recovery-duration",
        "0.3",
        "--wait",
        "0.1",
        "--retries",
        "3",
    ]
    rep = perf_json("system-recovery", *args)["repetitions"][0]
    assert rep["recovered"] and rep["recovery_lost"] == 0, rep
    assert rep["system_recovery_time_ms"] == 0, rep
    _nft_forward(lab, r, "udp dport 7000 drop")
    j = perf_json("system-recovery", *args)
    rep = j["repetitions"][0]
    print(rep)
    assert rep["overload_rate_fps"] == 1100 and rep["recovery_rate_fps"] == 550
    assert rep["recovery_lost"] == 165 and rep["overload_lost"] == 550, rep
    assert rep["recovered"] is False and rep["system_recovery_time_ms"] is None, rep
    assert rep["note"].startswith("not recovered"), rep


# RFC 2544 section 26.5: a DUT at exactly its capacity (a tbf forwarding 2000
# 64-byte frames/s, 60 bytes each on the shaper, behind a 100-frame queue)
# loses frames at 110% and its queue is full at the rate change (A); at 55%
# it then has room for every frame: it recovers at once. The first frame of
# the 55% phase used to leave right behind the last one at 110% (a new clock
# per phase), into the full queue, and was lost in 4 of 5 attempts: a
# recovery time of a few microseconds where there was none. Now it follows
# one interval of the 55% rate later.
@pytest.mark.timeout(60)
def test_rfc2544_s26_5_a_dut_at_capacity_recovers_at_once(lab):
    s, router, d = _router2(lab)
    _tbf_toward_receiver(lab, router, "960kbit", 600, "limit", "6000")
    j = perf_json(
        "system-recovery",
        *_ends(s, d),
        "--throughput",
        "2000",
        "--duration",
        "1",
        "--recovery-duration",
        "0.5",
        "--wait",
        "0.3",
        "--repeat",
        "3",
        "--retries",
        "2",
        timeout=50,
    )
    reps = [r for r in j["repetitions"] if r["valid"]]
    print([(r["overload_lost"], r["recovery_lost"], r["note"]) for r in reps])
    if len(reps) < 2:
        pytest.skip("sender fell behind on the loaded machine (reported as invalid)")
    # The DUT was at its capacity: the 110% phase overflowed its queue.
    assert all(r["overload_lost"] >= 20 for r in reps), reps
    # Recovered at once in (at least) all but one: a stall of the loaded
    # machine right at the change may still bunch two frames.
    at_once = [r for r in reps if r["recovery_lost"] == 0]
    assert len(at_once) >= len(reps) - 1, reps
    for r in at_once:
        assert r["recovered"] and r["system_recovery_time_ms"] == 0, r


# RFC 2544 section 26.5: a policer under the recovery rate (500/s against 550/s
# offered) drops one frame in 11 to the end of the recovery phase: frames
# arrive after its last loss, yet it never recovered. Before, it "recovered"
# after about the phase's length (B - A of the last of those losses).
@pytest.mark.timeout(40)
def test_rfc2544_s26_5_a_policer_under_the_recovery_rate_never_recovers(lab):
    s, r, d = _router2(lab)
    _nft_forward(
        lab, r, "udp dport 7000 limit rate over 500/second burst 20 packets drop"
    )
    args = [
        *_ends(s, d),
        "--throughput",
        "1000",
        "--duration",
        "0.5",
        "--recovery-duration",
        "1",
        "--wait",
        "0.1",
        "--retries",
        "3",
    ]
    rep = perf_json("system-recovery", *args)["repetitions"][0]
    print(rep)
    if not rep["valid"]:
        pytest.skip("sender fell behind on the loaded machine (reported as invalid)")
    # About 50 of the 550 frames of the recovery phase are lost, to its end.
    assert 20 <= rep["recovery_lost"] <= 100, rep
    assert rep["recovered"] is False and rep["system_recovery_time_ms"] is None, rep
    assert rep["note"].startswith("not recovered"), rep


# RFC 8219 section 7.2: with bidirectional traffic each direction's latency
# is measured and reported on its own. The relay delays the forward frames
# by 20 ms; the reverse frames take the router's own forwarding path.
@pytest.mark.timeout(60)
def test_rfc8219_s7_2_bidirectional_latency_per_direction(lab):
    s, r, d = _router2(lab)
    _nft_forward(lab, r, 'iifname "p0" udp dport 7000 drop')
    with delay_relay(lab, r, "--delay-ms", "20", "--duration", "40"):
        for _ in range(3):
            j = perf_json(
                "latency",
                *_ends(s, d),
                "--bidirectional",
                "--reverse-dst",
                "192.0.2.1:7000",
                "--rate",
                "1000",
                "--duration",
                "1",
                "--warmup",
                "0.2",
                "--tagged",
                "500",
                "--wait",
                "0.3",
                "--retries",
                "3",
            )
            t = j["repetitions"][0]["trial"]
            if t["valid"]:
                break
    assert t["valid"], t
    rev = t["reverse_latency"]
    assert t["tagged_lost"] == 0 and rev["tagged_lost"] == 0, t
    # Forward: the relay's 20 ms (+10%); reverse: well under a millisecond
    # on the loaded machine, never the forward delay.
    assert 20e6 <= t["typical_latency_ns"] <= 22e6, t
    assert 0 < rev["typical_latency_ns"] < 2e6, rev
    summary = j["summary"]
    assert summary["typical latency"]["summary"]["median"] == t["typical_latency_ns"]
    rs = summary["typical latency (reverse)"]["summary"]
    assert rs["median"] == rev["typical_latency_ns"], summary
    out = perf(
        "latency",
        *_ends(s, d),
        "--bidirectional",
        "--reverse-dst",
        "192.0.2.1:7000",
        "--rate",
        "1000",
        "--duration",
        "0.5",
        "--warmup",
        "0.1",
        "--tagged",
        "100",
        "--wait",
        "0.1",
    ).stdout
    assert "worst-case latency (reverse)" in out, out
