"""The lab's parsers on recorded output (tests/data/lab/): iperf3 -J, iputils ping,
xlat-perf --json (throughput, frame-loss, latency, pdv), the HTTP client, ApacheBench,
/proc/stat."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab.workloads import ping as w_ping
from lab.workloads import rfc9693
from lab.workloads.common import describe, percentile
from lab.workloads.cpu import read_stat
from lab.workloads.http import parse_ab, parse_client
from lab.workloads.ping import parse_capture, parse_ping, split_rtt
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


def _capture(name: str) -> str:
    return (DATA / f"ping-capture-{name}.txt").read_text()


def test_rtt_split_through_the_ebpf_datapath():
    # tcpdump -i any in the sender (h6), the DUT (rt) and the IPv4 host (h4)
    # during 5 pings through xlat-ebpf. Medians checked by hand: sender
    # request Out -> reply In 55.3, 65.7, 67.8, 68.2, 69.8 us; h4 request
    # In -> reply Out 20.5, 24.8, 25.2, 25.6, 27.1 us.
    s = split_rtt(
        {r: _capture(f"ebpf-{r}") for r in ("h6", "rt", "h4")}, src="h6", dst="h4"
    )
    assert s["echoes"] == 5
    assert s["wire_rtt_us"] == 67.8
    assert s["far_host_us"] == 25.2
    assert [h["ns"] for h in s["hops"]] == ["rt"]
    rt = s["hops"][0]
    assert rt["n"] == 5 and 0 < rt["reply_us"] < rt["request_us"] < 30
    assert s["rest_us"] == pytest.approx(
        67.8 - 25.2 - rt["request_us"] - rt["reply_us"], abs=0.05
    )


def test_rtt_split_counts_a_tun_datapath_from_first_arrival_to_last_departure():
    # xlat on its TUN: each echo is seen on eth6, xlat0 (twice) and eth4.
    # Request residence eth6 In -> eth4 Out: 131.0, 75.2, 73.7 us; reply
    # eth4 In -> eth6 Out: 21.8, 13.8, 14.1 us (integer nanoseconds: a float
    # of the epoch timestamps would be off by up to 0.2 us).
    text = _capture("tun-rt")
    ev = parse_capture(text)
    assert sorted(ev) == [1, 2, 3]
    assert ev[2]["request Out"] - ev[2]["request In"] == 75_242
    s = split_rtt({"h6": "", "rt": text, "h4": ""}, src="h6", dst="h4")
    assert s["hops"] == [{"ns": "rt", "request_us": 75.2, "reply_us": 14.1, "n": 3}]
    assert s["wire_rtt_us"] is None and s["far_host_us"] is None
    assert "rest_us" not in s
    # Lines that are not echoes (neighbour discovery, errors) are ignored.
    assert (
        parse_capture(
            "1795434981.222958745 eth6  M   IP6 2001:db8:6::2 > ff02::1:ff00:1: ICMP6,"
            " neighbor solicitation, who has 2001:db8:6::1, length 32\n"
        )
        == {}
    )


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


def test_xlat_perf_throughput_passed_at_max_rate_has_no_upper_bound():
    """xlat-perf reports `upper_bound_fps: null` when the top of the search passed
    (nothing above it was tried): parsed as None, not an error."""
    j = _json("xlat-perf-throughput.json")
    for rep in j["repetitions"]:
        rep["upper_bound_fps"] = None
    r = parse_throughput(j)
    assert r["fps"] == 60000 and r["upper_bound_fps"] is None


def test_xlat_perf_frame_loss():
    j = _json("xlat-perf-frame-loss.json")
    pts = parse_frame_loss(j)
    assert [p["rate"] for p in pts] == [20000, 40000]  # sorted by rate
    assert all(p["flr_percent"] == 0 and p["valid"] for p in pts)
    # An invalid attempt that was run again is listed before its retry
    # ("retried": true); only the retry is the result at that rate.
    trials = j["repetitions"][0]["trials"]
    spoiled = dict(trials[0], retried=True, valid=False, received=0)
    trials.insert(0, spoiled)
    pts = parse_frame_loss(j)
    assert [p["rate"] for p in pts] == [20000, 40000]
    assert all(p["valid"] for p in pts)


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


def test_ab_output():
    # ab -c 32 -t 3 through xlat's NAT64 (lab tcp_cps trial).
    r = parse_ab((DATA / "ab.txt").read_text())
    assert r == {
        "connections": 38859,
        "failed": 0,
        "non_2xx": 0,
        "ok": 38859,
        "cps": 12951.76,
        "cps_ab": 12951.76,
        "mean_ms": 2.471,  # the first "Time per request": per connection
    }


def test_ab_failures_and_missing_fields():
    out = (DATA / "ab.txt").read_text()
    out = out.replace(
        "Failed requests:        0\n",
        "Failed requests:        7\n   (Connect: 0, Receive: 5, Length: 2, Exceptions: 0)\n"
        "Non-2xx responses:      3\n",
    )
    r = parse_ab(out)
    assert (r["failed"], r["non_2xx"]) == (7, 3)
    # ab counts a connection whose response failed (receive, length) as
    # complete, and in its rate: cps counts only whole 2xx responses (it was
    # ab's rate; found by a probe). Connect failures are not complete.
    assert r["ok"] == 38859 - 5 - 2 - 3
    assert r["cps"] == pytest.approx(12951.76 * r["ok"] / 38859)
    assert r["cps_ab"] == 12951.76
    with pytest.raises(ValueError, match="'Requests per second'"):
        parse_ab(out.replace("Requests per second", "Rate"))


def test_proc_stat():
    s = read_stat((DATA / "proc-stat.txt").read_text())
    assert s["softirq"] == 10010 and s["idle"] == 95281
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    assert s["total"] == 58982 + 3104 + 24892 + 95281 + 633 + 0 + 10010 + 44


# -- RFC 9693 (xlat-perf cer / validate / state-throughput / capacity) -------------
# Recorded through the lab's xlat-nat64 DUT (nat_stateful topology), small sizes.


def test_rfc9693_validate():
    r = rfc9693.parse("validate", _json("xlat-perf-rfc9693-validate.json"))
    assert r["connections"] == 2000
    assert r["established"] == r["validated"] == 2000 and r["all_validated"] is True
    assert r["failed_trials"] == 0
    # The Responder saw the NAT64's pool4 (203.0.113.0/27) as the source.
    assert r["recorded_sample"][0].startswith("203.0.113.")


def test_rfc9693_cer():
    r = rfc9693.parse("cer", _json("xlat-perf-rfc9693-cer.json"))
    assert r["cer_fps"] == 81250 and r["connections"] == 5000
    # Binary search: the trials above the CER failed or were invalid.
    assert r["trials"] == 17 and r["failed_trials"] == 14


def test_rfc9693_state_throughput():
    r = rfc9693.parse(
        "state-throughput", _json("xlat-perf-rfc9693-state-throughput.json")
    )
    assert r["throughput_fps"] == 109375 and r["upper_bound_fps"] == 112500
    assert r["direction"] == "reverse" and r["connections"] == 2000


def test_rfc9693_capacity():
    r = rfc9693.parse("capacity", _json("xlat-perf-rfc9693-capacity.json"))
    assert r["connections"] == 2000  # C0
    assert r["capacity"] == 16000
    # Stopped at --max-connections: the table's upper bound is not known.
    assert r["capacity_upper_bound"] is None
    assert r["reached_max_connections"] is True and r["rate_at_capacity"] == 65625
    assert [s["connections"] for s in r["steps"]] == [2000, 4000, 8000, 16000]
    assert r["steps"][0]["stage"] == "R0"


def test_rfc9693_bad_input():
    with pytest.raises(RuntimeError, match="no repetitions"):
        rfc9693.parse("cer", {"parameters": {}})
    with pytest.raises(ValueError, match="unknown test 'tput'"):
        rfc9693.command("tput", None, {}, None)


def test_rfc9693_command_and_plan():
    from lab.adapters.base import Flow
    from lab.runner import expand

    f = Flow(
        "c1",
        "2001:db8:6::2",
        "h4",
        "64:ff9b::c633:6402",
        "0.0.0.0",
        84,
        "6->4",
        "198.51.100.2",
    )
    cmd = rfc9693.command(
        "capacity",
        f,
        {"connections": 1000, "max_rate": 5000, "max_connections": 8000},
        "true",
    )
    assert cmd[1] == "capacity" and cmd[-1] == "--json"
    pairs = dict(zip(cmd[2:-1:2], cmd[3:-1:2], strict=False))
    assert pairs["--initiator-netns"] == "c1" and pairs["--responder-netns"] == "h4"
    assert (
        pairs["--dst"] == "64:ff9b::c633:6402"
        and pairs["--responder"] == "198.51.100.2"
    )
    assert pairs["--c0"] == "1000" and pairs["--max-connections"] == "8000"
    assert pairs["--between-cmd"] == "true"
    keys = [
        k for k, _ in expand("rfc9693", {"cer": {"connections": 1}, "validate": {}})
    ]
    assert keys == ["rfc9693/cer", "rfc9693/validate"]


def test_rfc9693_report_row():
    from lab.report import rfc9693_rows

    ok = lambda sub: {
        "status": "ok",
        "result": {
            **rfc9693.parse(sub, _json(f"xlat-perf-rfc9693-{sub}.json")),
            "table_flushed": False,
        },
    }
    run = {"trials": {"xlat-nat64": {f"rfc9693/{s}": ok(s) for s in rfc9693.TESTS}}}
    (row,) = rfc9693_rows(run, ["xlat-nat64", "nft-nat44"])
    assert row[:6] == [
        "xlat-nat64",
        "81,250 (5,000 conn.)",
        "2,000 of 2,000",
        "109,375 (reverse, 2,000 conn.)",
        ">= 16,000 at 65,625 conn/s",
        "no (fresh 4-tuples only)",
    ]


def test_report_lists_the_testers_warnings():
    """The saved xlat-perf outputs' warnings (e.g. a trial shorter than RFC 8219's
    60 s) are listed once each under the report's header with the trials they
    concern; they used to stay in the raw JSON only."""
    from lab import report

    short = "--duration 2: shorter than the 60 s of RFC 8219 section 7.1"
    wait = "--wait 0.5: frames later than this are lost"

    def trial(*warnings):
        return {"status": "ok", "result": {}, "raw": {"warnings": list(warnings)}}

    run = {
        "meta": {
            "scenario": "demo",
            "description": "d",
            "started": "s",
            "budget_min": 4,
            "host": {
                "cpu_model": "c",
                "cpus": 2,
                "kernel": "k",
                "clocksource": "tsc",
                "loadavg": [0.5],
            },
        },
        "trials": {
            "kernel-v6": {
                "throughput/min": trial(short, wait),
                "ping": {"status": "ok"},
            },
            "xlat": {"throughput/min": trial(short), "flr": trial()},
        },
    }
    assert report.tester_warnings(run) == [
        (short, ["kernel-v6 throughput/min", "xlat throughput/min"]),
        (wait, ["kernel-v6 throughput/min"]),
    ]
    text = "\n".join(report.header(run))
    assert f"- {short} (`kernel-v6 throughput/min`, `xlat throughput/min`)" in text
    del (
        run["trials"]["kernel-v6"]["throughput/min"],
        run["trials"]["xlat"]["throughput/min"],
    )
    assert "warnings" not in "\n".join(report.header(run))


def test_demo_fails_when_any_xlat_datapath_failed():
    """`make demo` exits 1 when a trial of any xlat DUT of the scenario failed or it
    has none (the eBPF datapath's failures passed unnoticed: only "xlat" was
    checked); TAYGA's or a baseline's failure is in the report, not the exit."""
    from lab.demo import demo_status

    ok = {"status": "ok"}
    run = {
        "meta": {"parts": [{"duts": ["kernel-v6", "tayga", "xlat", "xlat-ebpf"]}]},
        "trials": {
            "kernel-v6": {"ping": {"status": "error"}},
            "tayga": {"ping": {"status": "error"}},
            "xlat": {"ping": ok},
            "xlat-ebpf": {"ping": ok, "tcp/x1-fwd": {"status": "unsupported"}},
        },
    }
    assert demo_status(run) == 0
    run["trials"]["xlat-ebpf"]["ping"] = {"status": "error"}
    assert demo_status(run) == 1
    del run["trials"]["xlat-ebpf"]
    assert demo_status(run) == 1


def test_throughput_table_shows_the_range_of_repeated_searches():
    """A scenario that repeats the zero-loss search (datapaths: 3 times) reports the
    median; the table now also shows the lowest and highest of the searches (they
    were computed and saved, not shown). One search: no brackets."""
    from lab import report

    def thr(size, fps, searches, lo, hi):
        r = {"fps": fps, "fps_min": lo, "fps_max": hi, "searches": searches}
        return {
            "status": "ok",
            "result": {**r, "frame_size": size, "invalid_trials": 0},
        }

    run = {
        "trials": {
            "xlat": {
                "throughput/min": thr(84, 300_000, 3, 250_000, 320_000),
                "throughput/1518": thr(1518, 90_000, 1, 90_000, 90_000),
            }
        }
    }
    t = report._throughput_table(run, ["xlat"])
    assert "| 300,000 (250,000–320,000) | 90,000 |" in t, t


def test_summary_marks_tester_limited_throughput():
    """The summary (what `make demo` prints) marks a zero-loss figure whose search had
    invalid trials (the sender fell behind: the tester's limit, not the DUT's), and
    every ratio that uses it, with a footnote; a clean search has no mark."""
    from lab import report

    def thr(fps, invalid):
        return {"status": "ok", "result": {"fps": fps, "invalid_trials": invalid}}

    run = {
        "duts": {"kernel-v6": {"role": "baseline"}, "xlat": {}},
        "trials": {
            "kernel-v6": {"throughput/min": thr(200_000, 3)},
            "xlat": {"throughput/min": thr(100_000, 0)},
        },
    }
    t = report.summary_table(run, {"duts": ["kernel-v6", "xlat"]})
    assert "200,000 †" in t and "100,000 †" not in t, t
    assert "0.50 †" in t, t  # xlat / kernel-v6: the baseline is tester-limited
    assert "the tester's limit" in t, t


def test_summary_says_no_result_and_lists_failed_trials():
    """A zero-loss search none of whose trials was valid is no result (‡, not a
    throughput of 0), a new-flow rate bounded by invalid trials is marked †, one at
    the top of the range tried ≥, and a failed trial is listed with its error
    (it used to vanish from the report)."""
    from lab import report

    def ok(result):
        return {"status": "ok", "result": result}

    run = {
        "duts": {"kernel-v6": {"role": "baseline"}, "xlat": {}, "xlat-nat64": {}},
        "trials": {
            "kernel-v6": {
                "throughput/min": ok(
                    {"fps": 200_000, "invalid_trials": 0, "trials": 9}
                ),
                "ping": {"status": "error", "error": "ping: no reply\nmore"},
            },
            "xlat": {
                "throughput/min": ok({"fps": 0, "invalid_trials": 2, "trials": 2}),
                "conn_rate": ok(
                    {
                        "flows_per_s": 80_000,
                        "sessions_per_s": 40_000,
                        "upper_bound": 100_000,
                        "trials": [
                            {"rate": 80_000, "invalid": False},
                            {"rate": 100_000, "invalid": True},
                        ],
                    }
                ),
            },
            "xlat-nat64": {
                "conn_rate": ok(
                    {
                        "flows_per_s": 10_000,
                        "sessions_per_s": 8_000,
                        "upper_bound": None,
                        "trials": [{"rate": 10_000, "invalid": False}],
                    }
                ),
            },
        },
    }
    t = report.summary_table(run, {"duts": ["kernel-v6", "xlat", "xlat-nat64"]})
    assert "| xlat | – ‡ |" in t.replace("  ", " "), t
    assert "no result" in t, t
    # The sessions made per second, not the frames (docs/lab.md).
    assert "40,000 †" in t and "8,000 ≥" in t, t
    assert "1 trial(s) failed" in t and "`kernel-v6` `ping`: ping: no reply" in t, t
    assert report.no_valid_trial({"fps": 0, "invalid_trials": 2, "trials": 2})
    assert not report.no_valid_trial({"fps": 0, "invalid_trials": 1, "trials": 2})


def test_ratios_include_tayga_beside_two_baselines():
    """docs/lab.md: ratios to the kernel / NAT44 baseline, and TAYGA where
    present. A part with two baselines (siit, bench: kernel-v6 and kernel-v4)
    left TAYGA out."""
    from lab import report

    def thr(fps):
        return {"status": "ok", "result": {"fps": fps, "invalid_trials": 0}}

    duts = ["kernel-v6", "kernel-v4", "tayga", "xlat"]
    run = {
        "duts": {
            "kernel-v6": {"role": "baseline"},
            "kernel-v4": {"role": "baseline"},
            "tayga": {},
            "xlat": {},
        },
        "trials": {
            d: {"throughput/min": thr(f)} for d, f in zip(duts, [400, 500, 100, 200])
        },
    }
    t = report.summary_table(run, {"duts": duts})
    assert "Ratios to `kernel-v6` / `kernel-v4` / `tayga`" in t, t
    # xlat: 200 / 400, 200 / 500, 200 / 100
    assert "0.50 / 0.40 / 2.00" in t, t


def test_summary_marks_overload_probe_and_top_of_range_throughput():
    """The max rate at overload comes from a 1 s probe at 2 Mfps: a probe whose
    sender fell behind measured the tester as much as the DUT (†, it was
    unmarked). A zero-loss search whose every trial passed never found the DUT's
    limit: the figure is the top of the range tried (≥, it was unmarked)."""
    from lab import report

    def thr(**kw):
        r = {"fps": 300_000, "invalid_trials": 0, "max_fps": 266_000, **kw}
        return {"status": "ok", "result": r}

    run = {
        "duts": {"kernel-v6": {"role": "baseline"}, "xlat": {}},
        "trials": {
            "kernel-v6": {"throughput/min": thr(all_passed=True, max_fps_invalid=True)},
            "xlat": {"throughput/min": thr(all_passed=False, max_fps_invalid=False)},
        },
    }
    t = report.summary_table(run, {"duts": ["kernel-v6", "xlat"]})
    row = next(ln for ln in t.splitlines() if ln.startswith("| kernel-v6"))
    assert "300,000 ≥" in row and "266,000 †" in row, t
    row = next(ln for ln in t.splitlines() if ln.startswith("| xlat"))
    assert "≥" not in row and "†" not in row, t
    assert "the top of the range tried" in t and "overload probe" in t, t


def test_parse_throughput_all_passed():
    from lab.workloads.xlatperf import parse_throughput

    def j(outcomes):
        trials = [{"zero_loss": z, "valid": True} for z in outcomes]
        return {
            "repetitions": [
                {"throughput_fps": 10, "upper_bound_fps": 11, "trials": trials}
            ]
        }

    assert parse_throughput(j([True]))["all_passed"] is True
    assert parse_throughput(j([True, False, True]))["all_passed"] is False


def test_sessions_point_with_no_valid_trial_is_no_result():
    """A throughput-with-N-sessions point whose every trial was invalid is no
    result (‡ and no point in the plot; it was shown as a real 0), and one whose
    every trial passed is the top of the range tried (≥; it had no mark), in the
    summary and in the stateful table (found by a probe)."""
    from lab import report

    def scale(points):
        return {"status": "ok", "result": {"points": points}}

    def point(n, fps, invalid, trials, all_passed=False):
        return {
            "target_sessions": n,
            "sessions": n,
            "zero_loss_fps": fps,
            "invalid_trials": invalid,
            "trials": trials,
            "all_passed": all_passed,
            "rss_kib": None,
        }

    run = {
        "duts": {"xlat-nat64": {"role": "baseline"}, "xlat-nat64-ebpf": {}},
        "trials": {
            "xlat-nat64": {"scale": scale([point(10_000, 5_000, 0, 3, True)])},
            "xlat-nat64-ebpf": {"scale": scale([point(10_000, 0, 12, 12)])},
        },
    }
    duts = ["xlat-nat64", "xlat-nat64-ebpf"]
    t = report.summary_table(run, {"duts": duts}).replace("  ", " ")
    assert "| xlat-nat64 | 5,000 ≥ |" in t, t
    assert "| xlat-nat64-ebpf | – ‡ |" in t, t
    assert report.no_valid_point(point(1, 0, 12, 12))
    assert not report.no_valid_point(point(1, 0, 11, 12))
    assert not report.no_valid_point(point(1, 0, 0, 0))


def test_a_column_of_searches_without_valid_trials_stays():
    """When no DUT's zero-loss search had a valid trial, the summary dropped the
    column instead of showing `– ‡` (found by a probe)."""
    from lab import report

    r = {"status": "ok", "result": {"fps": 0, "invalid_trials": 3, "trials": 3}}
    run = {
        "duts": {"kernel-v6": {"role": "baseline"}, "xlat": {}},
        "trials": {"kernel-v6": {"throughput/min": r}, "xlat": {"throughput/min": r}},
    }
    t = report.summary_table(run, {"duts": ["kernel-v6", "xlat"]})
    assert "throughput, min frames" in t, t
    assert "| xlat | – ‡ |" in t.replace("  ", " "), t


def test_no_baseline_says_why_there_are_no_ratios():
    """`--duts xlat,xlat-ebpf` (no baseline, no TAYGA): the summary had no ratio
    table and no word why (found by a probe)."""
    from lab import report

    def thr(fps):
        return {"status": "ok", "result": {"fps": fps, "invalid_trials": 0}}

    run = {
        "duts": {"xlat": {}, "xlat-ebpf": {}},
        "trials": {
            "xlat": {"throughput/min": thr(100)},
            "xlat-ebpf": {"throughput/min": thr(200)},
        },
    }
    t = report.summary_table(run, {"duts": ["xlat", "xlat-ebpf"]})
    assert "Ratios to" not in t and "No ratios: no baseline" in t, t


def test_pings_beside_take_turns_at_being_first(monkeypatch):
    """Pinged beside another DUT, the pings go in rounds and the two series
    take turns at being first (lab/workloads/ping.py: over a long run the
    second echo may find caches the first warmed). Here whichever series is
    second reads half the RTT of the first: taking turns, the two read the
    same, where one run read 2x."""
    orders = []

    def fake(flows, count, interval, size):
        orders.append([f.src_ns for f in flows])
        out = []
        for rtt in ("0.100", "0.050"):
            lines = [
                f"64 bytes from x: icmp_seq={i + 1} ttl=64 time={rtt} ms"
                for i in range(count)
            ]
            lines.append(f"{count} packets transmitted, {count} received, 0% loss")
            out.append("\n".join(lines))
        return out

    monkeypatch.setattr(w_ping, "_pings_together", fake)
    dut, base = SimpleNamespace(src_ns="dut"), SimpleNamespace(src_ns="base")
    r = w_ping._series(dut, 200, 0.01, 56, ("kernel-v6", base))
    assert orders == [["dut", "base"], ["base", "dut"]] * 2
    assert (r["sent"], r["received"]) == (200, 200)
    assert (r["beside"]["sent"], r["beside"]["received"]) == (200, 200)
    assert r["rtt_ms"]["median"] == r["beside"]["rtt_ms"]["median"]
    assert r["rtt_ms"]["median"] == pytest.approx(0.075)
    assert r["rtt_ms"]["n"] == 200
    # 1 ms apart: rounds of 500 pings.
    assert w_ping.rounds_of(1000, 0.001) == [500, 500]
    assert w_ping.rounds_of(5, 0.01) == [5]


def test_ping_outputs_one_after_the_other_count_together():
    text = (DATA / "ping.txt").read_text()
    r = parse_ping(text + "\n" + text)
    assert (r["sent"], r["received"], r["rtt_ms"]["n"]) == (20, 20, 20)
