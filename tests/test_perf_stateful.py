"""Calibration of the xlat-perf procedures beyond throughput and frame loss
(issue 5): back-to-back frames, system recovery, latency through a known
delay, the RFC 9693 stateful tests against a real stateful DUT, and the
config file.

The DUTs are router namespaces whose behaviour is known: nftables ``limit``
(a token bucket of known rate and depth), ``ct count`` (a connection limit),
masquerade NAT44 with the kernel's connection tracking, and
``xlat-perf delay-relay`` (a fixed 5 ms delay: this kernel has no netem).
Namespaces use the prefix ``xlq`` and are removed even when a test fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import netns
from tests.test_perf import delay_relay, ipv4_router, measured_trial, nft_counter

ROOT = Path(__file__).resolve().parent.parent
PERF = Path(
    os.environ.get("XLAT_PERF_BIN", str(ROOT / "target" / "release" / "xlat-perf"))
)
CT_FLUSH = Path(__file__).resolve().parent / "tools" / "ct_flush.py"


def perf(*args: str, timeout: float = 60, check: bool = True):
    if not PERF.exists():
        pytest.fail(f"{PERF} not built: run `make build` first")
    cp = netns.run([str(PERF), *args], timeout=timeout, check=False)
    if check and cp.returncode != 0:
        raise AssertionError(f"xlat-perf {args} exited {cp.returncode}: {cp.stderr}")
    return cp


def perf_json(*args: str, timeout: float = 60) -> dict:
    return json.loads(perf(*args, "--json", timeout=timeout).stdout)


@pytest.fixture
def lab():
    with netns.Lab(netns.random_prefix("xlq")) as lab:
        yield lab


def router(lab: netns.Lab, rules: str = "", nat: bool = False, quiet: bool = False):
    """Sender/Initiator -- router (IPv4 forwarding, nft ``rules`` in forward,
    optionally masquerade NAT44 towards the receiver) -- receiver/Responder."""
    s, r, d = ipv4_router(lab)
    script = (
        "table inet xlq {\n chain xforward {\n"
        "  type filter hook forward priority 0; policy accept;\n"
        f"  {rules}\n }}\n}}\n"
    )
    if nat:
        # RFC 9693's stateful NATxy: NAT44 (masquerade) with connection
        # tracking; the Responder sees the router's public address and ports.
        script += (
            "table ip xlqnat {\n chain post {\n"
            "  type nat hook postrouting priority 100;\n"
            '  oifname "p1" masquerade\n }\n}\n'
        )
    lab.exec(r, ["nft", "-f", "-"], input=script)
    # The receivers of these procedures are AF_PACKET sockets (they see the
    # frames before the input hook): drop the test frames at the endpoints'
    # input so the kernel sends no ICMP port unreachable through the DUT.
    for ns in (s, d) if (nat or quiet) else ():
        lab.exec(
            ns,
            ["nft", "-f", "-"],
            input="table inet xlqin {\n chain in {\n"
            "  type filter hook input priority 0; policy accept;\n"
            "  udp dport 1024-65535 drop\n }\n}\n",
        )
    return s, r, d


def flush_cmd(r: str) -> str:
    # It also says something on stdout, as `xlat bib flush` does: that went into
    # xlat-perf's --json output (the lab's JSON parse failed), now to stderr.
    return f"ip netns exec {r} {sys.executable} {CT_FLUSH} && echo flushed"


def common(s: str, d: str) -> list[str]:
    return [
        "--send-netns",
        s,
        "--recv-netns",
        d,
        "--dst",
        "198.51.100.2:7000",
        "--src",
        "192.0.2.1",
    ]


def stateful(s: str, d: str, r: str) -> list[str]:
    return [
        "--initiator-netns",
        s,
        "--responder-netns",
        d,
        "--initiator",
        "192.0.2.1",
        "--dst",
        "198.51.100.2",
        "--between-cmd",
        flush_cmd(r),
        "--wait",
        "0.1",
    ]


# RFC 2544 section 26.4 / RFC 9004 (RFC 8219 section 7.5): a token bucket of
# depth B = 1000 frames refilled at R = 2000 frames/s passes a burst sent at
# F = 20000 frames/s as long as B + R * K / F >= K, i.e. K <= B / (1 - R/F)
# = 1111 frames. The measured back-to-back value must be within +-5%. (A
# bucket of 2000 took 1.1 s to refill between bursts and the test a minute.)
# RFC 2544 section 26.4 repeats the test and reports the average: three
# repetitions here, their median checked, so that one search thrown off by
# the shared machine (a vCPU stalled mid-burst: once 2003 frames in CI)
# does not decide; each repetition's own result must still be a burst that
# passed, below one that failed.
@pytest.mark.timeout(200)
def test_rfc2544_s26_4_back_to_back_calibrated_against_token_bucket(lab):
    s, _r, d = router(
        lab, "limit rate over 2000/second burst 1000 packets drop", quiet=True
    )
    r = perf_json(
        "back-to-back",
        *common(s, d),
        "--rate",
        "20000",
        "--max-burst",
        "3000",
        # The bucket refills 1000 tokens in 0.5 s.
        "--gap",
        "0.6",
        "--wait",
        "0.1",
        "--error",
        "0.01",
        # A loaded machine makes some bursts invalid (sender late): retry.
        "--retries",
        "5",
        "--repeat",
        "3",
        # About 25 s on a quiet machine; the command must not time out first.
        timeout=170,
    )
    expected = 1000 / (1 - 2000 / 20000)
    got = [rep["back_to_back_frames"] for rep in r["repetitions"]]
    median = r["summary"]["back-to-back"]["summary"]["median"]
    print(f"back-to-back: {got} frames, median {median}, expected {expected:.0f}")
    assert len(got) == 3 and median == sorted(got)[1]
    assert abs(median - expected) <= 0.05 * expected, r["repetitions"]
    for rep in r["repetitions"]:
        # The result is a burst that passed; the bound above it failed.
        passed = [t["burst"] for t in rep["trials"] if t["outcome"] == "pass"]
        assert rep["back_to_back_frames"] in passed
        assert rep["upper_bound_frames"] > rep["back_to_back_frames"]


# RFC 2544 section 26.5 (RFC 8219 section 7.6): 110% of a 20000 frames/s
# limit for 2 s loses the excess (2 s * 2000/s minus the 500-frame bucket =
# 3500 of 44000 frames, 8%); at "50% of the above rate" (11000/s) the
# policer loses (next to) nothing,
# so the DUT recovers at once (recovery time ~0, far below 50 ms).
@pytest.mark.timeout(40)
def test_rfc2544_s26_5_system_recovery_of_a_policer(lab):
    s, _r, d = router(
        lab, "limit rate over 20000/second burst 500 packets drop", quiet=True
    )
    r = perf_json(
        "system-recovery",
        *common(s, d),
        "--throughput",
        "20000",
        "--duration",
        "2",
        "--recovery-duration",
        "1",
        "--wait",
        "0.2",
    )
    rep = r["repetitions"][0]
    print(f"system recovery: {rep}")
    assert rep["overload_rate_fps"] == 22000 and rep["recovery_rate_fps"] == 11000
    if not rep["valid"]:
        pytest.skip("sender fell behind on the loaded machine (reported as invalid)")
    # A sender that catches up after a scheduling hiccup sends a burst the
    # bucket cannot absorb: on a loaded machine a few hundred more are lost.
    assert 2800 <= rep["overload_lost"] <= 5500, rep
    # The bucket is empty at the change; it refills at 20000/s against
    # 10000/s offered, so at most a catch-up burst of the sender right
    # after the change can be lost: a recovery of a few ms at most.
    assert rep["recovery_lost"] <= 50, rep
    assert rep["system_recovery_time_ms"] < 50, rep


# RFC 8219 section 7.2 calibration: through a router that forwards every
# test frame exactly 5 ms late (xlat-perf delay-relay, router mode: this
# kernel has no netem), the typical latency is 5 ms +- 10%.
@pytest.mark.timeout(40)
def test_rfc8219_s7_2_latency_calibrated_with_5ms_delay(lab):
    # The router drops the test frames from its forwarding path; the relay
    # reads them from p0 and sends them on, unchanged, 5 ms later.
    s, r, d = router(lab, 'iifname "p0" udp dport 7000 drop')
    with delay_relay(lab, r, "--delay-ms", "5", "--duration", "30"):
        out = perf_json(
            "latency",
            *common(s, d),
            "--rate",
            "1000",
            "--duration",
            "2",
            "--warmup",
            "0.5",
            "--tagged",
            "500",
            "--wait",
            "0.2",
            # One frame per system call: the send time stamp is per batch.
            "--batch",
            "1",
        )
    t = out["repetitions"][0]["trial"]
    typ = (t["typical_latency_ns"] or float("inf")) / 1e6
    print(f"typical latency through a 5 ms delay: {typ:.3f} ms; {t}")
    # A lost tagged frame is an infinite latency (RFC 8219 section 7.2); a
    # few may be lost on a loaded machine, the median stays finite.
    assert t["tagged_lost"] <= 5, t
    assert abs(typ - 5.0) <= 0.5, t
    assert t["worst_case_latency_ns"] >= t["typical_latency_ns"]


# RFC 9693 section 4.6 validation against a stateful NAT44: every connection
# made in the preliminary phase carries a reply from the Responder back to
# the Initiator; a NAT that drops replies establishes but validates nothing.
@pytest.mark.timeout(40)
def test_rfc9693_validation_of_established_connections(lab):
    s, r, d = router(lab, nat=True)
    out = perf_json(
        "validate",
        *stateful(s, d, r),
        "--connections",
        "2000",
        "--prelim-rate",
        "5000",
        "--repeat",
        "2",
    )
    for rep in out["repetitions"]:
        assert rep["established"] == 2000 and rep["validated"] == 2000, rep
        assert rep["all_validated"] is True
        t = rep["trials"][-1]
        assert t["recorded_tuples"] == 2000
        # The Responder recorded the 4-tuples after translation: the NAT's
        # public address, never the Initiator's.
        for tup in t["recorded_sample"]:
            src, _sport, _arrow, dst, dport = tup.split()
            assert src == "198.51.100.254" and dst == "198.51.100.2", tup
            assert 7000 <= int(dport) <= 7099, tup
    summ = out["summary"]["validated connections"]["summary"]
    assert summ["n"] == 2 and summ["median"] == summ["p1"] == 2000, summ
    # The DUT holds the connections: its conntrack table has them all.
    conns = netns.ns_exec(r, ["cat", "/proc/sys/net/netfilter/nf_conntrack_count"])
    assert int(conns.stdout) >= 2000
    # CSV: a header and one row per trial.
    rows = perf(
        "validate",
        *stateful(s, d, r),
        "--connections",
        "100",
        "--prelim-rate",
        "5000",
        "--csv",
    ).stdout.splitlines()
    assert rows[0].startswith("test,repetition,step,connections,prelim_rate,"), rows
    assert rows[0].endswith(",result,figure,value"), rows
    width = len(rows[0].split(","))
    # One row per trial (an invalid attempt, retried, is listed too), then
    # the result rows: median, p1, p99, mean of the validated connections.
    trials = [r for r in rows[1:] if r.split(",")[2] != "result"]
    for row in trials:
        assert row.split(",")[:5] == ["validate", "1", "validate", "100", "5000"], rows
        assert len(row.split(",")) == width, row
    assert trials[-1].split(",")[5:7] == ["100", "100"], rows
    assert trials[-1].endswith(",pass,,"), rows
    res = {r.split(",")[1]: r.split(",") for r in rows[1:] if r not in trials}
    assert sorted(res) == ["mean", "median", "p1", "p99"], rows
    assert all(len(r) == width for r in res.values()), res
    assert res["median"][-2] == "validated connections (connections)", res
    assert float(res["median"][-1]) == 100, res
    lab.exec(
        r,
        [
            "nft",
            "add",
            "rule",
            "inet",
            "xlq",
            "xforward",
            "ct",
            "direction",
            "reply",
            "drop",
        ],
    )
    out = perf_json(
        "validate",
        *stateful(s, d, r),
        "--connections",
        "500",
        "--prelim-rate",
        "5000",
    )
    rep = out["repetitions"][0]
    assert rep["established"] == 500 and rep["validated"] == 0, rep
    assert rep["all_validated"] is False


# RFC 9693 section 4.5: a connection is validated only if the Responder's
# reply reaches the Initiator's own port of it. A NAT whose reverse
# translation is broken (here: every reply's destination port rewritten to 9)
# validates nothing, and its state-table throughput in the reverse direction
# is 0. Before, every reply counted (300 of 300 validated).
@pytest.mark.timeout(60)
def test_rfc9693_replies_to_the_wrong_port_do_not_validate(lab):
    s, r, d = router(lab, nat=True)
    lab.exec(
        r,
        [
            "nft",
            "add",
            "rule",
            "inet",
            "xlq",
            "xforward",
            "iifname",
            "p1",
            "udp",
            "dport",
            "set",
            "9",
        ],
    )
    out = perf_json(
        "validate",
        *stateful(s, d, r),
        "--connections",
        "300",
        "--prelim-rate",
        "2000",
    )
    rep = out["repetitions"][0]
    assert rep["established"] == 300 and rep["validated"] == 0, rep
    assert rep["all_validated"] is False
    out = perf_json(
        "state-throughput",
        *stateful(s, d, r),
        "--connections",
        "300",
        "--prelim-rate",
        "2000",
        "--max-rate",
        "2000",
        "--direction",
        "reverse",
        "--duration",
        "0.5",
        "--error",
        "0.25",
    )
    assert out["repetitions"][0]["throughput_fps"] == 0, out["repetitions"][0]


# RFC 9693 section 4.5: the preliminary phase offers new connections at a
# constant rate. A NAT44 that admits 5000 new connections/s with nft's
# default bucket of 5 establishes every connection offered at 500/s (10 % of
# its limit). Before, the stateful sender held frames back until a whole
# batch (32) was due and sent them as one train: 371 of 2000 arrived.
@pytest.mark.timeout(40)
def test_rfc9693_connections_offered_at_a_constant_rate(lab):
    s, r, d = router(lab, "ct state new limit rate over 5000/second drop", nat=True)
    out = perf_json(
        "validate",
        *stateful(s, d, r),
        "--connections",
        "2000",
        "--prelim-rate",
        "500",
        "--retries",
        "4",
    )
    rep = out["repetitions"][0]
    assert rep["established"] == 2000 and rep["validated"] == 2000, rep


# RFC 9693 section 4.5 calibration: a NAT44 that admits new connections
# through a token bucket of X = 10000/s and depth B = 400 (nft limit on ct
# state new) establishes N = 8000 connections sent at rate R only if
# B + X * N / R >= N: its maximum connection establishment rate for N is
# X * N / (N - B) = 10526/s, measured within +-5%. Between trials the DUT's
# table is flushed (--between-cmd).
@pytest.mark.timeout(90)
def test_rfc9693_cer_calibrated_against_new_connection_limit(lab):
    s, r, d = router(
        lab,
        "ct state new limit rate over 10000/second burst 400 packets drop",
        nat=True,
    )
    out = perf_json(
        "cer",
        *stateful(s, d, r),
        "--connections",
        "8000",
        "--max-rate",
        "25000",
        "--error",
        "0.02",
        # A loaded machine makes some trials invalid (sender late): retry.
        "--retries",
        "4",
        timeout=80,
    )
    rep = out["repetitions"][0]
    got = rep["connection_establishment_rate"]
    expected = 10000 * 8000 / (8000 - 400)
    print(
        f"CER {got}/s (expected {expected:.0f}); {[t['result'] for t in rep['trials']]}"
    )
    assert abs(got - expected) <= 0.05 * expected, rep
    passed = [t for t in rep["trials"] if t["result"] == "pass"]
    assert any(t["prelim_rate"] == got for t in passed)
    assert all(t["validation"]["received"] == 8000 for t in passed)


# RFC 9693 section 4.8 calibration: a NAT44 that holds at most 1000
# connections (nft ct count) has a connection tracking table capacity of
# 1000; the search (C0 = 300, exponential then binary, E = 20) finds it.
@pytest.mark.timeout(60)
def test_rfc9693_capacity_calibrated_against_connection_limit(lab):
    rule = "ct state new ct count over 1000 drop"
    s, r, d = router(lab, rule, nat=True)
    # Between trials: flush conntrack and re-create the rule, whose own list
    # of counted connections forgets flushed entries only lazily.
    between = (
        f"{flush_cmd(r)} && ip netns exec {r} nft flush chain inet xlq xforward"
        f" && ip netns exec {r} nft add rule inet xlq xforward {rule}"
    )
    args = stateful(s, d, r)
    args[args.index("--between-cmd") + 1] = between
    out = perf_json(
        "capacity",
        *args,
        "--c0",
        "300",
        "--max-rate",
        "10000",
        "--error",
        "0.3",
        "--capacity-error",
        "20",
        "--max-connections",
        "20000",
        "--retries",
        "4",
    )
    rep = out["repetitions"][0]
    print(f"capacity {rep['capacity']} at {rep['rate_at_capacity']}/s: {rep['steps']}")
    assert 980 <= rep["capacity"] <= 1000, rep
    # Below the limit the rate does not depend on the table's size.
    assert rep["rate_at_capacity"] == rep["steps"][0]["rate"], rep
    assert (
        rep["capacity_upper_bound"] > 1000
        or rep["capacity_upper_bound"] - rep["capacity"] <= 20
    )
    assert rep["reached_max_connections"] is False


# RFC 9693 section 4.8: a capacity search that reaches --max-connections
# (a NAT44 with no limit, max 600 from C0 = 300) knows that the table holds
# at least 600, not its upper bound: capacity_upper_bound is null and a
# warning says so (it reported 600 as the upper bound too).
@pytest.mark.timeout(60)
def test_rfc9693_capacity_at_max_connections_has_no_upper_bound(lab):
    s, r, d = router(lab, "counter", nat=True)
    out = perf_json(
        "capacity",
        *stateful(s, d, r),
        "--c0",
        "300",
        "--max-rate",
        "5000",
        "--error",
        "0.3",
        "--max-connections",
        "600",
        "--retries",
        "4",
    )
    rep = out["repetitions"][0]
    assert rep["reached_max_connections"] is True, rep
    assert rep["capacity"] == 600, rep
    assert rep["capacity_upper_bound"] is None, rep
    assert any("reached --max-connections 600" in w for w in out["warnings"]), out[
        "warnings"
    ]


# RFC 9693 (phase 2, Responder -> Initiator over the recorded 4-tuples):
# throughput with the state table filled, through a NAT44 whose established
# traffic is limited to 10000 frames/s, within +-5%.
@pytest.mark.timeout(60)
def test_rfc9693_throughput_with_filled_state_table(lab):
    s, r, d = router(
        lab,
        "ct state established limit rate over 10000/second burst 250 packets drop",
        nat=True,
    )
    out = perf_json(
        "state-throughput",
        *stateful(s, d, r),
        "--connections",
        "1000",
        "--prelim-rate",
        "5000",
        "--direction",
        "reverse",
        "--max-rate",
        "25000",
        "--duration",
        "1",
        "--error",
        "0.02",
    )
    rep = out["repetitions"][0]
    got = rep["throughput_fps"]
    print(f"state-throughput {got} frames/s")
    # 1 s trials: the 250-frame bucket adds up to 2.5%.
    assert 9500 <= got <= 10500, rep
    # Every valid trial first filled the table with all 1000 connections.
    for t in rep["trials"]:
        if t["valid"]:
            assert t["preliminary"]["received"] == 1000, t
    # One direction: no aggregate; the short trials and wait are flagged.
    assert rep["per_direction"] is False and "aggregate_throughput_fps" not in rep
    assert any("--duration 1" in w for w in out["warnings"]), out["warnings"]
    assert any("--wait 0.1" in w for w in out["warnings"]), out["warnings"]


# RFC 9693 section 4.5 at the ends of the search. A DUT that establishes
# every connection at --max-rate has a CER of at least that, no upper bound
# (it reported --max-rate + 1, never tried). A DUT that establishes none
# (here: it drops every UDP frame) fails the same way at every rate: the
# search stops at its second trial with CER 0 and a warning naming the count
# (it halved the rate down to 1/s, every preliminary phase twice as long as
# the one before: hours for large --connections). Without --between-cmd or
# --between-wait a warning says the DUT's table is not emptied.
@pytest.mark.timeout(40)
def test_rfc9693_cer_search_ends_at_max_rate_and_at_a_table_limit(lab):
    s, r, d = router(lab, "counter", quiet=True)
    args = [*stateful(s, d, r)[:8], "--wait", "0.1", "--connections", "200"]
    args += ["--max-rate", "4000", "--retries", "4"]
    out = perf_json("cer", *args, timeout=30)
    rep = out["repetitions"][0]
    warnings = out["warnings"]
    if rep["trials"][-1]["valid"]:
        assert rep["connection_establishment_rate"] == 4000, rep
        assert rep["connection_establishment_rate_upper_bound"] is None, rep
        assert any("the CER is at least 4000" in w for w in warnings), warnings
    assert any(w.startswith("neither --between-cmd") for w in warnings), warnings
    # Every trial says where its 4-tuples came from.
    assert isinstance(out["tuple_start"], int), out
    assert all(isinstance(t["order_seed"], int) for t in rep["trials"]), rep
    drop = "nft add rule inet xlq xforward meta l4proto udp drop"
    lab.exec(r, drop.split())
    out = perf_json("cer", *args, "--between-wait", "0.1", timeout=30)
    rep = out["repetitions"][0]
    warnings = out["warnings"]
    assert rep["connection_establishment_rate"] == 0, rep
    failed = [t for t in rep["trials"] if t["valid"]]
    assert [t["preliminary"]["received"] for t in failed] == [0, 0], rep
    rates = [t["prelim_rate"] for t in failed]
    assert (
        rates[0] > rates[1]
        and rep["connection_establishment_rate_upper_bound"] == rates[1]
    )
    assert any(
        "no frame of the 200 connections reached the Responder"
        f" {out['parameters']['responder']} at {rates[0]}/s nor at {rates[1]}/s" in w
        for w in warnings
    ), warnings
    assert not any(w.startswith("neither --between-cmd") for w in warnings), warnings
    # A repetition whose every trial was invalid (5 M connections/s cannot
    # be sent here) has no result: left out of the summary, not a CER of 0.
    fast = [*stateful(s, d, r)[:8], "--wait", "0.1", "--connections", "20000"]
    out = perf_json(
        "cer", *fast, "--max-rate", "5000000", "--max-trials", "1", "--retries", "0"
    )
    (rep,) = out["repetitions"]
    assert not rep["trials"][0]["valid"], rep
    summ = out["summary"]["maximum connection establishment rate"]["summary"]
    assert summ is None, out["summary"]
    assert any("left out of the summary" in w for w in out["warnings"]), out


# RFC 9693 sections 4.4 / 4.5: a DUT that establishes every connection but
# drops the replies (here a NAT44 router dropping all that comes back) fails
# validation at every rate. The search stops at the second such trial and
# says why; it halved the rate down to 1/s, each trial twice as long as the
# last (found by a probe: no result after 300 s).
@pytest.mark.timeout(60)
def test_rfc9693_cer_search_ends_when_no_reply_returns(lab):
    s, r, d = router(lab, 'iifname "p1" meta l4proto udp drop', nat=True)
    args = [*stateful(s, d, r), "--connections", "200", "--max-rate", "4000"]
    out = perf_json("cer", *args, "--retries", "4", timeout=40)
    rep = out["repetitions"][0]
    assert rep["connection_establishment_rate"] == 0, rep
    failed = [t for t in rep["trials"] if t["valid"]]
    assert len(failed) == 2, rep
    assert [t["preliminary"]["received"] for t in failed] == [200, 200], rep
    assert [t["validation"]["received"] for t in failed] == [0, 0], rep
    rates = [t["prelim_rate"] for t in failed]
    assert any(
        f"every frame of the 200 connections reached the Responder"
        f" {out['parameters']['responder']} at {rates[0]}/s and at {rates[1]}/s,"
        " but no reply came back" in w
        for w in out["warnings"]
    ), out["warnings"]


# Config file (issue 5): every parameter in TOML, the command line
# overrides it, bad keys and values give "error: KEY: VALUE: reason" with
# exit 2 and nothing sent.
@pytest.mark.timeout(40)
def test_config_file_values_overrides_and_errors(lab, tmp_path):
    s, _r, d = router(lab, "udp dport 7000 counter")

    def forwarded() -> int:
        return nft_counter(lab, _r, "chain", "inet", "xlq", "xforward")

    cfg = tmp_path / "fl.toml"
    cfg.write_text(
        f'send-netns = "{s}"\nrecv-netns = "{d}"\ndst = "198.51.100.2:7000"\n'
        'src = "192.0.2.1"\nmax-rate = 2000\nduration = 5\nwait = 0.1\n'
        '[frame-loss]\nrates = ["50%"]\n'
    )
    out = json.loads(
        perf("frame-loss", "--config", str(cfg), "--duration", "0.5", "--json").stdout
    )
    t = measured_trial(out["repetitions"][0])
    assert out["parameters"]["duration"] == 0.5, "the command line overrides the file"
    assert t["rate"] == 1000 and t["planned"] == 500 and t["received"] == 500, t
    before = forwarded()
    cases = [
        ("rate = 5\n", "error: rate: 5: unknown key for frame-loss"),
        ('max-rate = "fast"\n', 'error: max-rate: "fast": not a valid value'),
        ("max-rate = 20000000\n", "error: max-rate: 20000000: over the media maximum"),
        ("frame-size = 60\n", "error: frame-size: 60: below the minimum 64"),
        (
            'send-netns = "xlq-absent"\n',
            'error: send-netns: "xlq-absent": no such network namespace',
        ),
        ("json = 3\n", "error: json: 3: expected true or false"),
        (
            "[frame-loss]\ntagged = 3\n",
            "error: frame-loss.tagged: 3: unknown key for frame-loss",
        ),
        ("max-rate = \n", "not valid TOML"),
    ]
    base = cfg.read_text().split("[frame-loss]")[0]
    for extra, msg in cases:
        bad = tmp_path / "bad.toml"
        text = base
        key = extra.split("=")[0].strip()
        if not extra.startswith("["):
            # Replace the key if the base file has it.
            text = "\n".join(
                ln for ln in base.splitlines() if ln.split("=")[0].strip() != key
            )
            text += "\n"
        bad.write_text(text + extra)
        cp = perf("frame-loss", "--config", str(bad), check=False)
        assert cp.returncode == 2, (extra, cp.stdout, cp.stderr)
        assert msg in cp.stderr, (extra, cp.stderr)
    assert forwarded() == before, "nothing was sent on a bad config"


# Bad stateful parameters give a clear error before any frame leaves: a rate over
# the media maximum (exit 2), a frame whose IP packet is over the route's MTU (the
# raw socket would send fragments, which are no test frames) and a Responder address
# its namespace does not have (the result would be 0 instead of an error; exit 1).
@pytest.mark.timeout(40)
def test_stateful_bad_parameters_fail_before_sending(lab):
    s, r, d = router(lab, "meta l4proto udp counter")

    def forwarded() -> int:
        return nft_counter(lab, r, "chain", "inet", "xlq", "xforward")

    base = [*stateful(s, d, r), "--connections", "10"]
    cases = [
        (["cer", "--max-rate", "20000000"], 2, "over the media maximum 14880952"),
        (["validate", "--prelim-rate", "20000000"], 2, "over the media maximum"),
        (
            ["cer", "--max-rate", "1000", "--link-gbps", "0.0005"],
            2,
            "over the media maximum 744 frames/s",
        ),
        (
            ["cer", "--max-rate", "1000", "--frame-size", "2000"],
            1,
            "IP packet of 1982 bytes is over the MTU 1500",
        ),
        (
            ["cer", "--max-rate", "1000", "--responder", "198.51.100.77"],
            1,
            "198.51.100.77: not an address of the receiving namespace",
        ),
    ]
    for args, rc, msg in cases:
        cp = perf(args[0], *base, *args[1:], check=False)
        assert cp.returncode == rc, (args, cp.stdout, cp.stderr)
        assert msg in cp.stderr, (args, cp.stderr)
        assert forwarded() == 0, (args, "frames were sent")
    # --responder left to its default, --dst's address, which the Responder's
    # namespace does not have (behind a NAT64: the IPv6 form of the server): the
    # error says where the address came from (it said only "not an address of
    # the receiving namespace").
    other = [a if a != "198.51.100.2" else "198.51.100.77" for a in base]
    cp = perf("cer", *other, "--max-rate", "1000", check=False)
    assert cp.returncode == 2, (cp.stdout, cp.stderr)
    assert (
        "--responder not given: it defaults to --dst's address 198.51.100.77"
        in cp.stderr
    ), cp.stderr
    assert forwarded() == 0, "frames were sent"
    # A --between-cmd that hangs stopped the test for good; it is ended
    # (with what it started) after --between-timeout, and the test stops
    # with the reason, before the trial.
    hang = [a if a != flush_cmd(r) else "sleep 60 & sleep 61" for a in base]
    t0 = time.monotonic()
    cp = perf(
        "cer", *hang, "--max-rate", "1000", "--between-timeout", "0.5", check=False
    )
    assert time.monotonic() - t0 < 10
    assert cp.returncode == 1, (cp.stdout, cp.stderr)
    assert "still running after --between-timeout 0.5 s: ended" in cp.stderr, cp.stderr
    left = subprocess.run(
        ["pgrep", "-f", "^sleep 6[01]$"], check=False, capture_output=True, text=True
    )
    assert not left.stdout.strip(), left.stdout
    assert forwarded() == 0, "frames were sent"
    cp = perf("cer", *base, "--max-rate", "1000", "--between-timeout", "0", check=False)
    assert cp.returncode == 2 and "--between-timeout 0: must be above 0" in cp.stderr


# RFC 9693 against xlat itself in NAT64 mode (RFC 6146; IPv6 Initiator,
# IPv4 Responder reached as 64:ff9b::198.51.100.2): every connection of the
# preliminary phase gets a session (the Responder sees pool4's address) and
# validates; with max-sessions below the number of connections, exactly
# max-sessions connections are established and validated, the rest refused
# and counted as nat64_session_limit.
@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", ("tun", "ebpf"))  # conftest.DATAPATHS
def test_rfc9693_validation_through_xlat_nat64(datapath):
    """Also with kind = "ebpf": the preliminary frames (6->4) create the sessions on
    the TUN path and, one frame per connection, are not cached; the validation frames
    (Responder -> Initiator, 4->6) are each connection's second packet: they take the
    TUN path too and get the sessions cached (docs/datapaths.md, NAT64). A second
    validation of the same connections then runs on the fast path both ways."""
    from test_nat64 import Env

    e = Env(nat64="max-sessions = 600\n", datapath=datapath)
    try:
        t = e.t
        for ns in (t.c1, t.h4):
            t.lab.exec(
                ns,
                ["nft", "-f", "-"],
                input="table inet xlqin {\n chain in {\n"
                "  type filter hook input priority 0; policy accept;\n"
                "  udp dport 1024-65535 drop\n }\n}\n",
            )
        args = [
            "--initiator-netns",
            t.c1,
            "--responder-netns",
            t.h4,
            "--initiator",
            t.c1_addr,
            "--dst",
            t.h4_v6,
            "--responder",
            t.h4_addr,
            "--prelim-rate",
            "2000",
            "--dports",
            "7000",
            "--wait",
            "0.3",
        ]
        out = perf_json(
            "validate", *args, "--connections", "500", "--sports", "10000-10499"
        )
        rep = out["repetitions"][0]
        assert rep["established"] == 500 and rep["validated"] == 500, rep
        assert out["parameters"]["frame_size"] == 84
        # IPv6 frames in, IPv4 out: the Responder saw pool4 as the source.
        sample = rep["trials"][-1]["recorded_sample"]
        assert sample and all(x.startswith("203.0.113.") for x in sample), sample
        udp = [s for s in sessions_of(e) if s[0] == "udp"]
        assert len(udp) == 500, udp[:3]
        # The sessions' IPv4 side is pool4 (203.0.113.0/24 in this topology).
        assert all(s[2].startswith("203.0.113.") for s in udp), udp[:3]
        if datapath == "ebpf":
            st = e.x.stats()
            got = {k: st[k] for k in st if "translated" in k or "flows" in k}
            # A trial the tester could not send on schedule (a busy machine)
            # is run again with the same connections (`retried`): those of
            # the later attempts are cached already and take the fast path
            # both ways (the CI once retried it: 500 frames on the fast path).
            again = len(rep["trials"]) - 1
            assert all(tr.get("retried") for tr in rep["trials"][:-1]), rep["trials"]
            assert st["ebpf_nat64_flows_inserted"] == 500, got
            assert st["ebpf_translated_6to4_packets"] == 500 * again, (again, got)
            assert st["ebpf_translated_4to6_packets"] == 500 * again, (again, got)
            assert st["translated_4to6_packets"] >= 500, got
            # The same 500 connections again: cached, both directions fast.
            out = perf_json(
                "validate", *args, "--connections", "500", "--sports", "10000-10499"
            )
            rep = out["repetitions"][0]
            assert rep["established"] == 500 and rep["validated"] == 500, rep
            st2 = e.x.stats()
            got = {k: st2[k] for k in st2 if "translated" in k or "flows" in k}
            assert st2["ebpf_nat64_flows_inserted"] == 500, got
            assert st2["ebpf_translated_6to4_packets"] >= 500, got
            assert st2["ebpf_translated_4to6_packets"] >= 500, got
            assert st2["translated_6to4_packets"] == st["translated_6to4_packets"]
        # 500 sessions exist; 400 new connections meet max-sessions = 600.
        out = perf_json(
            "validate", *args, "--connections", "400", "--sports", "20000-20399"
        )
        rep = out["repetitions"][0]
        # The 100 that were made carry their replies back (RFC 9693 validation).
        assert rep["established"] == 100 and rep["validated"] == 100, rep
        assert rep["all_validated"] is False
        assert e.x.stats()["nat64_session_limit"] >= 300
    finally:
        e.close()


def sessions_of(e) -> list[list[str]]:
    return [
        ln.split()
        for ln in e.x.cli("session", "show").stdout.splitlines()
        if ln.strip()
    ]
