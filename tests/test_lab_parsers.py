"""The lab's parsers on recorded output (tests/data/lab/): iperf3 -J, iputils ping,
xlat-perf --json (throughput, frame-loss, latency, pdv), the HTTP client, /proc/stat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.workloads.common import describe, percentile
from lab.workloads.cpu import read_stat
from lab.workloads.http import parse_client
from lab.workloads.ping import parse_ping
from lab.workloads.tcp import parse_iperf
from lab.workloads.xlatperf import (
    parse_frame_loss,
    parse_latency,
    parse_pdv,
    parse_throughput,
)

DATA = Path(__file__).resolve().parent / "data" / "lab"


def _json(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_iperf3_reverse_two_streams():
    r = parse_iperf(_json("iperf3-x2-rev.json"))
    assert r["streams"] == 2 and r["reverse"] is True and r["seconds"] == 2
    # Receiver-side total, as iperf3 prints it at the end.
    assert r["gbps"] == pytest.approx(17.393720286370407, rel=1e-9)
    assert r["retransmits"] == 0
    # One point per 1-second interval, summed over the streams.
    assert r["series_gbps"] == [16.7113, 18.0774]


def test_iperf3_error_is_reported():
    with pytest.raises(ValueError, match="unable to connect"):
        parse_iperf({"error": "unable to connect to server: Connection refused"})


def test_ping_statistics():
    text = (DATA / "ping.txt").read_text()
    r = parse_ping(text)
    assert r["sent"] == 10 and r["received"] == 10 and r["loss_percent"] == 0
    s = r["rtt_ms"]
    assert s["n"] == 10
    assert s["min"] == 0.042 and s["max"] == 0.238
    assert s["median"] == pytest.approx((0.056 + 0.057) / 2)
    assert s["p95"] == 0.238  # nearest rank: ceil(0.95 * 10) = 10th value
    # ping's own summary line agrees (avg 0.071 ms, rounded by ping).
    assert s["avg"] == pytest.approx(0.071, abs=0.0005)


def test_ping_with_loss():
    lines = [
        f"64 bytes from 192.0.2.1: icmp_seq={i} ttl=64 time=0.{i}00 ms"
        for i in (1, 2, 4)
    ]
    text = "\n".join(
        [*lines, "4 packets transmitted, 3 received, 25% packet loss, time 3004ms"]
    )
    r = parse_ping(text)
    assert r["loss_percent"] == 25 and r["rtt_ms"]["median"] == 0.2


def test_ping_without_replies_is_an_error():
    with pytest.raises(ValueError, match="no replies"):
        parse_ping("3 packets transmitted, 0 received, 100% packet loss, time 2003ms\n")


def test_percentile_is_nearest_rank():
    v = [float(i) for i in range(1, 101)]
    assert (
        percentile(v, 95) == 95.0
        and percentile(v, 100) == 100.0
        and percentile(v, 1) == 1.0
    )
    assert describe([]) == {}
    assert describe([2.0, 4.0])["stddev"] == 1.0


def test_xlat_perf_throughput():
    r = parse_throughput(_json("xlat-perf-throughput.json"))
    assert r["fps"] == 60000 and r["upper_bound_fps"] == 60001
    assert r["invalid_trials"] == 0 and r["near_tester_ceiling"] is False
    assert r["frame_size"] == 84


def test_xlat_perf_frame_loss():
    pts = parse_frame_loss(_json("xlat-perf-frame-loss.json"))
    assert [p["rate"] for p in pts] == [20000, 40000]  # sorted by rate
    assert all(p["flr_percent"] == 0 and p["valid"] for p in pts)


def test_xlat_perf_latency_and_pdv():
    lat = parse_latency(_json("xlat-perf-latency.json"))
    assert lat["typical_us"] == pytest.approx(444.12) and lat[
        "worst_us"
    ] == pytest.approx(735.768)
    assert lat["tagged"] == 50 and lat["tagged_lost"] == 0
    pdv = parse_pdv(_json("xlat-perf-pdv.json"))
    assert pdv["pdv_us"] == pytest.approx(555.105) and pdv["d_min_us"] == pytest.approx(
        68.692
    )


def test_xlat_perf_latency_infinite_worst_case():
    j = _json("xlat-perf-latency.json")
    j["repetitions"][0]["trial"]["worst_case_latency_ns"] = None  # > 0.1 % tagged lost
    assert parse_latency(j)["worst_us"] is None


def test_xlat_perf_without_repetitions_is_an_error():
    with pytest.raises(ValueError, match="no repetitions"):
        parse_throughput({"repetitions": []})


def test_http_client_output():
    j = _json("httpclient.json")  # 5 workers x 4 requests of /small
    r = parse_client(j)
    assert r["concurrency"] == 5 and r["requests"] == 20
    assert r["errors"] == 0 and r["non_200"] == 0
    assert r["rps"] == pytest.approx(20 / j["wall_s"])
    assert r["rtt_ms"]["min"] == min(j["rtt_ms"]) and r["rtt_ms"]["max"] == max(
        j["rtt_ms"]
    )
    assert r["mbps"] == pytest.approx(2560 * 8 / j["wall_s"] / 1e6)


def test_http_client_errors_and_statuses():
    j = {
        "rtt_ms": [1.0, 3.0],
        "errors": {"ConnectionResetError": 2, "TimeoutError": 1},
        "status": {"200": 1, "503": 1},
        "bytes": 10,
        "wall_s": 1.0,
        "concurrency": 2,
    }
    r = parse_client(j)
    assert r["errors"] == 3 and r["non_200"] == 1 and r["rtt_ms"]["median"] == 2.0


def test_proc_stat():
    s = read_stat((DATA / "proc-stat.txt").read_text())
    assert s["softirq"] == 10010 and s["idle"] == 95281
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    assert s["total"] == 58982 + 3104 + 24892 + 95281 + 633 + 0 + 10010 + 44
