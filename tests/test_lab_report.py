"""The report (lab/report.py) on fake runs: result dicts and run directories
built by hand, nothing measured."""

from __future__ import annotations

import pytest

from lab import report


def _ok(result):
    return {"status": "ok", "result": result}


def _err(msg):
    return {"status": "error", "error": msg}


def test_summary_says_failed_for_a_dut_that_did_not_start():
    """A DUT that failed to start has an error record for each of its trials:
    the summary gave it a row of "–" (or, with no figure in the part, a row with
    no cell under a blank header) instead of `FAILED: <error>`."""
    start = "the DUT failed: xlat exited at start (1)\nlog"
    run = {
        "duts": {
            "kernel-v6": {"role": "baseline"},
            "xlat-464": {"error": "xlat exited at start (1)\nlog"},
            "xlat-dual": {},  # no DUT-level error: the trials' errors say it
        },
        "trials": {
            "kernel-v6": {"ping": _ok({"rtt_ms": {"median": 0.05, "p95": 0.07}})},
            "xlat-464": {"ping": _err(start), "tcp/x1-fwd": _err(start)},
            "xlat-dual": {"ping": _err(start)},
        },
    }
    t = report.summary_table(run, {"duts": ["kernel-v6", "xlat-464", "xlat-dual"]})
    assert "| xlat-464 | FAILED: xlat exited at start (1) |" in t, t
    assert "| xlat-dual | FAILED: the DUT failed: xlat exited at start (1) |" in t
    assert "| kernel-v6 | 0.0500 |" in t, t
    # Every row has the header's columns.
    lines = [ln for ln in t.splitlines() if ln.startswith("|")]
    assert len({ln.count(" |") for ln in [lines[0], *lines[2:5]]}) == 1, t

    # No DUT of the part measured anything: one column, named and filled on
    # every row.
    t = report.summary_table(run, {"duts": ["xlat-464", "xlat-dual"]})
    assert t.splitlines()[0] == "| DUT | result |", t
    assert "| xlat-dual | FAILED: the DUT failed: xlat exited at start (1) |" in t
    assert "| xlat-464 | FAILED: xlat exited at start (1) |" in t, t


def test_no_empty_plot_or_table_when_every_trial_failed(tmp_path):
    """plot_http drew (and the report embedded) axes with no data when all the
    HTTP trials had failed, and the TCP section was a table header with no
    rows."""
    boom = _err("nginx (1): no such directive")
    run = {
        "duts": {"kernel-v6": {"role": "baseline"}, "xlat": {}},
        "trials": {
            "kernel-v6": {
                "http/small-c1": boom,
                "http/small-c10": boom,
                "tcp/x1-fwd": _err("iperf3: error"),
            },
            "xlat": {"http/small-c1": boom, "tcp/x1-fwd": _err("iperf3: error")},
        },
    }
    duts = ["kernel-v6", "xlat"]
    png = tmp_path / "http.png"
    assert report.plot_http(run, duts, png) is False and not png.exists()
    assert report._tcp_table(run, duts) == ""
    assert report._http_table(run, duts) == ""

    # One HTTP and one TCP result: a plot and tables again.
    run["trials"]["xlat"]["http/small-c1"] = _ok(
        {
            "samples_ms": [0.2, 0.3, 0.4],
            "rtt_ms": {"median": 0.3, "p95": 0.4},
            "rps": 1000,
            "errors": 0,
        }
    )
    run["trials"]["xlat"]["tcp/x1-fwd"] = _ok(
        {"gbps": 1.5, "retransmits": 0, "series_gbps": [1.5]}
    )
    assert report.plot_http(run, duts, png) is True and png.exists()
    assert "| xlat | 1.50 (0 retr) |" in report._tcp_table(run, duts)
    assert "0.300 / 0.400 ms" in report._http_table(run, duts)


def test_each_part_shows_only_the_trials_of_its_plan():
    """kernel2-v4 is in two parts of bench with different workloads: each
    part's section showed all its trials, with columns and tables of the other
    part's workloads ("–" for the part's other DUTs)."""
    rtt = {"min": 0.04, "avg": 0.05, "median": 0.05, "max": 0.09, "stddev": 0.01}
    ping = _ok({"rtt_ms": {**rtt, "p95": 0.07}, "sent": 5, "received": 5})
    tcp = _ok({"gbps": 9.0, "retransmits": 0, "series_gbps": [9.0]})
    run = {
        "meta": {
            "scenario": "s",
            "description": "fake",
            "started": "t0",
            "finished": "t1",
            "budget_min": 5,
            "only": None,
            "host": {
                "cpu_model": "cpu",
                "cpus": 2,
                "kernel": "k",
                "clocksource": "tsc",
                "loadavg": [0.0, 0, 0],
                "versions": {},
            },
            "parts": [
                {
                    "title": "dual",
                    "duts": ["kernel2-v4", "xlat-dual"],
                    "workloads": {"ping": {"count": 5}},
                },
                {
                    "title": "464",
                    "duts": ["kernel2-v4", "xlat-464"],
                    "workloads": {
                        "tcp": {"streams": [1], "directions": ["fwd"], "seconds": 1}
                    },
                },
            ],
        },
        "duts": {
            "kernel2-v4": {"role": "baseline"},
            "xlat-dual": {"role": "translator"},
            "xlat-464": {"role": "translator"},
        },
        "trials": {
            "kernel2-v4": {"ping": ping, "tcp/x1-fwd": tcp},
            "xlat-dual": {"ping": ping},
            "xlat-464": {"tcp/x1-fwd": tcp},
        },
    }
    md = report.markdown(run)
    dual, p464 = md.split("## dual")[1].split("## 464")
    assert "TCP x1" not in dual and "### TCP" not in dual, dual
    assert "RTT median" not in p464 and "### RTT (ping" not in p464, p464
    assert "| kernel2-v4 | 0.0500 | 0.0700 |" in dual, dual
    assert "| kernel2-v4 | 9.00 (0 retr) |" in p464, p464
    assert "pending" not in md, md
    con = report.console_table(run)
    assert "TCP x1" not in con.split("## 464")[0], con


def test_invalid_delay_trials_are_no_result_and_each_has_its_rate():
    """The Latency/PDV table printed the figures of trials the tester declared
    invalid (sender behind), with no mark, and one rate column for two trials
    run at different rates (found by a probe): an invalid trial's figures are
    not shown, and each test has its own rate."""
    lat = {"rate": 50702, "typical_us": 49.4, "worst_us": 2106.1, "tagged_lost": 0}
    pdv = {"rate": 52805, "pdv_us": 9539.8, "d_min_us": 5.3, "lost": 0}
    run = {
        "duts": {"xlat": {}, "kernel-v6": {}},
        "trials": {
            "xlat": {
                "latency": _ok({**lat, "valid": False}),
                "pdv": _ok({**pdv, "valid": False}),
            },
            "kernel-v6": {
                "latency": _ok({**lat, "valid": True}),
                "pdv": _ok({**pdv, "valid": True}),
            },
        },
    }
    t = report._delay_table(run, ["xlat", "kernel-v6"])
    assert "| xlat | 50,702 (invalid) | – | – | – | 52,805 (invalid) | – | – |" in t, t
    assert "| kernel-v6 | 50,702 | 49.4 | 2106.1 | 0 | 52,805 | 9539.8 | 5.3 |" in t
    assert "9539.8" not in t.split("| kernel-v6")[0], t
    assert "(invalid): the trial was invalid" in t, t


def test_short_tcp_connections_have_a_table_and_cpu_column():
    """tcp_cps showed only its rate in the summary: its failures and non-2xx
    answers appeared nowhere and its CPU use was missing from "DUT CPU use"
    (found by a probe)."""
    cpu = {"process_pct": 55.1, "softirq_pct": 20.0}
    r = {"concurrency": 32, "cps": 9000.0, "failed": 7, "non_2xx": 3, "mean_ms": 3.5}
    run = {
        "duts": {"xlat": {}},
        "trials": {
            "xlat": {
                "tcp_cps/c32": {**_ok(r), "workload": "tcp_cps", "cpu": cpu},
            }
        },
    }
    t = report._tcp_cps_table(run, ["xlat"])
    assert "| xlat | 32 | 9,000 | 7 | 3 | 3.500 |" in t, t
    c = report._cpu_table(run, ["xlat"])
    assert "| DUT | tcp_cps |" in c and "| xlat | 55% / 20% |" in c, c


def test_new_flow_rate_detail_keeps_the_marks_and_names_an_invalid_bound():
    """The stateful detail table showed `5,000` where the summary said
    `5,000 †`, and an upper bound that was an invalid trial's rate as if the
    DUT had failed there (found by a probe)."""
    r = {
        "flows_per_s": 5000,
        "sessions_per_s": 4000,
        "new_fraction": 0.8,
        "upper_bound": 10000,
        "trials": [
            {"rate": 5000, "invalid": False},
            {"rate": 10000, "invalid": True},
        ],
    }
    run = {"duts": {"xlat": {}}, "trials": {"xlat": {"conn_rate": _ok(r)}}}
    t = report._nat_tables(run, ["xlat"])
    assert "| xlat | 5,000 † | 4,000 † | 80% | 10,000 (invalid trial) |" in t, t
    # The summary's rate is the sessions made, not the frames sent: a trial
    # stretched to its 0.5 s minimum repeats flows, and the frame rate read
    # up to twice the sessions (found by a probe).
    assert report.metrics(run, "xlat")[report.NEW_SESSIONS] == (4000, True)
    assert report._mark(run, "xlat", report.NEW_SESSIONS) == " †"


def test_warnings_of_the_stateful_searches_reach_the_report():
    """The stateful workloads keep one xlat-perf output per run of their
    search (a list): its warnings never reached the report's header (found
    by a probe)."""
    run = {
        "duts": {"xlat": {}},
        "trials": {
            "xlat": {
                "conn_rate": {
                    **_ok({"flows_per_s": 5000}),
                    "raw": [{"warnings": ["w1"]}, {"warnings": ["w1", "w2"]}],
                },
                "throughput/min": {**_ok({"fps": 1}), "raw": {"warnings": ["w1"]}},
            }
        },
    }
    assert report.tester_warnings(run) == [
        ("w1", ["xlat conn_rate", "xlat throughput/min"]),
        ("w2", ["xlat conn_rate"]),
    ]


def _run_dir(d, scenario, trials):
    import json

    (d / "duts").mkdir(parents=True)
    host = {"loadavg": [0.5, 0, 0]}
    meta = {"scenario": scenario, "started": "t0", "finished": "t1", "host": host}
    meta["parts"] = []
    (d / "meta.json").write_text(json.dumps(meta))
    for key, result in trials.items():
        t = d / "trials" / "xlat"
        t.mkdir(parents=True, exist_ok=True)
        rec = {"dut": "xlat", "key": key, **_ok(result)}
        (t / f"{key.replace('/', '__')}.json").write_text(json.dumps(rec))
    return d


def test_compare_shows_the_metrics_of_both_runs_and_says_when_they_differ(tmp_path):
    """`lab compare` walked A's metrics only (B's own rows vanished, and swapping
    the arguments changed the table) and compared runs of different scenarios,
    or an interrupted one, without a word (found by a probe)."""
    from lab.compare import compare

    ping = {"rtt_ms": {"median": 0.05, "p95": 0.07}}
    a = _run_dir(tmp_path / "a", "smoke", {"ping": ping})
    b = _run_dir(tmp_path / "b", "demo", {"ping": ping, "tcp/x1-fwd": {"gbps": 9.0}})
    for x, y in ((a, b), (b, a)):
        out = compare(x, y)
        assert "| xlat | TCP x1 (Gbit/s) |" in out, out
        assert "| xlat | RTT median (ms) | 0.0500 | 0.0500 | 1.00 |" in out, out
        assert "Different scenarios" in out, out
    import json

    m = json.loads((b / "meta.json").read_text())
    m["interrupted"] = "SIGINT"
    (b / "meta.json").write_text(json.dumps(m))
    assert "B is interrupted" in compare(a, b)
    assert "Different scenarios" not in compare(a, a)


def test_compare_ratio_keeps_the_marks_of_both_runs(tmp_path):
    """`lab compare` gave a ratio A's mark or else B's: a figure at the top of
    its range (≥) in A over one bounded by an invalid trial (†) in B lost the
    † (the twin of the summary's defect fixed before)."""
    from lab.compare import compare

    top = {"fps": 100_000, "invalid_trials": 0, "trials": 3, "all_passed": True}
    bounded = {"fps": 150_000, "invalid_trials": 1, "trials": 4}
    a = _run_dir(tmp_path / "a", "smoke", {"throughput/min": top})
    b = _run_dir(tmp_path / "b", "smoke", {"throughput/min": bounded})
    out = compare(a, b)
    row = next(x for x in out.splitlines() if x.startswith("| xlat | throughput"))
    # B / A over A's lower bound: at most 1.50 (it read "1.50 ≥").
    assert row.endswith("| 1.50 ≤ † |"), out
    out = compare(b, a)
    row = next(x for x in out.splitlines() if x.startswith("| xlat | throughput"))
    assert row.endswith("| 0.67 ≥ † |"), out
    same = compare(a, a)
    row = next(x for x in same.splitlines() if x.startswith("| xlat | throughput"))
    assert row.endswith("| 1.00 ≶ |"), same


def test_broken_result_files_are_named_not_tracebacks(tmp_path, capsys):
    """`lab report` on a run with a truncated trial file raised a bare
    JSONDecodeError, and on a meta.json without `parts` a KeyError, leaving an
    empty plots/ behind; `lab cleanup --prefix 'xlab*'` a ValueError (found by a
    probe). Each is now one line naming the file or the option, exit 2."""
    import json

    from lab.__main__ import main

    ping = {"rtt_ms": {"median": 0.05, "p95": 0.07}}
    d = _run_dir(tmp_path / "r", "smoke", {"ping": ping})
    (d / "trials" / "xlat" / "ping.json").write_text('{"dut": "xlat", "ke')
    assert main(["report", str(d)]) == 2
    err = capsys.readouterr().err
    assert "ping.json: not a result file of the lab" in err, err
    assert not (d / "plots").exists()
    (d / "trials" / "xlat" / "ping.json").unlink()
    (d / "meta.json").write_text(json.dumps({"scenario": "nosuch"}))
    assert main(["report", str(d)]) == 2
    err = capsys.readouterr().err
    assert "meta.json: not a result file of the lab (missing: parts)" in err, err
    assert main(["compare", str(d), str(d)]) == 2
    with pytest.raises(SystemExit, match="not a pattern"):
        main(["cleanup", "--prefix", "xlab*"])


def test_rtt_ratio_is_to_the_baseline_pinged_at_the_same_time():
    """A DUT whose pings ran beside the baseline (the ping workload's
    ``beside``) gets its RTT ratios to the baseline's pings of the same
    moments, not to the baseline's own row measured at another time: on a
    shared host the two rows drew moments whose RTTs differ by up to 3x."""
    run = {
        "duts": {"kernel-v6": {"role": "baseline"}, "xlat": {}, "tayga": {}},
        "trials": {
            # Alone, at a busy moment.
            "kernel-v6": {
                "ping": _ok(
                    {
                        "received": 200,
                        "sent": 200,
                        "rtt_ms": {
                            **dict.fromkeys(("min", "avg", "max", "stddev"), 0.01),
                            "median": 0.040,
                            "p95": 0.080,
                        },
                    }
                )
            },
            "xlat": {
                "ping": _ok(
                    {
                        "received": 200,
                        "sent": 200,
                        "rtt_ms": {
                            **dict.fromkeys(("min", "avg", "max", "stddev"), 0.01),
                            "median": 0.015,
                            "p95": 0.030,
                        },
                        "beside": {
                            "dut": "kernel-v6",
                            "rtt_ms": {"median": 0.012, "p95": 0.024},
                        },
                        "warm": {
                            "interval_ms": 1.0,
                            "received": 1000,
                            "sent": 1000,
                            "rtt_ms": {
                                **dict.fromkeys(("min", "avg", "max", "stddev"), 0.01),
                                "median": 0.009,
                                "p95": 0.012,
                            },
                            "beside": {
                                "dut": "kernel-v6",
                                "rtt_ms": {"median": 0.008, "p95": 0.011},
                            },
                        },
                    }
                )
            },
            # No beside: the ratio stays to the baseline's own row.
            "tayga": {"ping": _ok({"rtt_ms": {"median": 0.080, "p95": 0.160}})},
        },
    }
    assert report.beside_value(run, "xlat", "kernel-v6", "RTT median (ms)") == 0.012
    assert report.beside_value(run, "xlat", "tayga", "RTT median (ms)") is None
    assert report.beside_value(run, "tayga", "kernel-v6", "RTT median (ms)") is None
    assert report.beside_value(run, "xlat", "kernel-v6", "TCP x1 (Gbit/s)") is None
    assert report.beside_value(run, "xlat", "kernel-v6", report.WARM_RTT) == 0.008
    t = report.summary_table(run, {"duts": ["kernel-v6", "xlat", "tayga"]})
    ratios = t.split("Ratios to")[1]
    # To kernel-v6 (pinged beside): 0.015 / 0.012 and 0.030 / 0.024; to
    # TAYGA's own row (not beside): 0.015 / 0.080.
    # The warm series (1 ms apart): 0.009 / 0.008, TAYGA has none.
    assert "| xlat | 1.25 / 0.19 | 1.25 / 0.19 | 1.12 / – |" in ratios, t
    assert "| tayga | 2.00 / 1.00 | 2.00 / 1.00 |" in ratios, t  # 0.080 / 0.040
    # Which ratios are paired, and which are not.
    assert "The RTT ratios to `kernel-v6` are to its pings sent at the same" in t, t
    assert "those to `tayga` divide medians measured minutes apart" in t, t
    rtt = report._rtt_table(run, ["kernel-v6", "xlat"])
    # Both figures the summary's paired ratios use: the median and the p95.
    assert "| xlat | 200/200 |" in rtt, rtt
    assert "| `kernel-v6` | 0.0120 | 0.0240 | 1.25 |" in rtt, rtt
    assert rtt.splitlines()[2].endswith("| – | – | – | – |"), rtt  # kernel-v6: alone
    assert "| xlat, 1 ms apart | 1000/1000 |" in rtt, rtt
    assert "| `kernel-v6` | 0.0080 | 0.0110 | 1.12 |" in rtt, rtt


def test_an_invalid_flr_trial_is_drawn_at_the_rate_sent():
    """A frame-loss trial whose sender fell behind (sent 348,762 frames in
    1 s of an offered 544,710/s, all received) was drawn at 544.7 kframes/s
    with 0 % loss: a rate the DUT never saw (found by a probe)."""
    pts = [
        {
            "rate": 300000,
            "flr_percent": 0.0,
            "sent": 300000,
            "received": 300000,
            "valid": True,
        },
        {
            "rate": 544710,
            "flr_percent": 35.97,
            "sent": 348762,
            "received": 348762,
            "valid": False,
        },
        {
            "rate": 600000,
            "flr_percent": 50.0,
            "sent": 400000,
            "received": 300000,
            "valid": False,
        },
    ]
    run = {
        "duts": {"kernel-v6": {}},
        "trials": {
            "kernel-v6": {
                "flr": {**_ok({"points": pts}), "params": {"trial": 2.0, "steps": 5}}
            }
        },
    }
    got = report.flr_invalid_points(run, "kernel-v6")
    assert got == [(174.381, 0.0), (200.0, 25.0)], got


def test_an_rfc9693_figure_bounded_by_an_invalid_trial_is_marked():
    """xlat-perf's CER search whose upper bound was an invalid trial's rate
    (the tester fell behind there) showed a clean figure, where the lab's
    own searches get a † (found by a probe)."""
    cer = {
        "cer_fps": 156250,
        "connections": 10000,
        "table_flushed": True,
        "recorded_sample": ["a"],
    }
    run = {
        "duts": {"nat": {}, "ok": {}},
        "trials": {
            d: {
                "rfc9693/cer": {
                    **_ok(cer),
                    "raw": {"repetitions": [{"upper_bound_invalid": bad}]},
                }
            }
            for d, bad in (("nat", True), ("ok", False))
        },
    }
    t = report._rfc9693_table(run, ["nat", "ok"])
    assert "| nat | 156,250 † (10,000 conn.) |" in t, t
    assert "| ok | 156,250 (10,000 conn.) |" in t, t
    assert "† the search" in t, t


def test_a_ratio_keeps_the_marks_of_both_figures():
    """A ratio showed the DUT's mark or else the baseline's: a DUT figure
    at the top of its range (≥) over a baseline bounded by an invalid trial
    (†) lost the † (found by a probe)."""
    run = {
        "duts": {"kernel-v6": {"role": "baseline"}, "xlat": {}},
        "trials": {
            "kernel-v6": {
                "throughput/min": _ok(
                    {"fps": 200_000, "invalid_trials": 1, "trials": 4}
                )
            },
            "xlat": {
                "throughput/min": _ok(
                    {
                        "fps": 100_000,
                        "invalid_trials": 0,
                        "trials": 3,
                        "all_passed": True,
                    }
                )
            },
        },
    }
    t = report.summary_table(run, {"duts": ["kernel-v6", "xlat"]})
    ratios = t.split("Ratios to")[1]
    assert "| xlat | 0.50 ≥ † |" in ratios, t
    # The baseline's own ratio is 1 exactly: no marks.
    assert "| kernel-v6 | 1.00 |" in ratios, t


def test_a_ratio_over_a_lower_bound_is_at_most_that():
    """The baseline at the top of its range (≥, a lower bound): the DUT's
    ratio to it is at most the figure shown. It read "0.26 ≥" (found by a
    probe); both lower bounds bound the ratio neither way."""
    top = {"fps": 400_000, "invalid_trials": 0, "trials": 3, "all_passed": True}
    run = {
        "duts": {"kernel-v6": {"role": "baseline"}, "xlat": {}, "xlat-ebpf": {}},
        "trials": {
            "kernel-v6": {"throughput/min": _ok(top)},
            "xlat": {
                "throughput/min": _ok(
                    {"fps": 100_000, "invalid_trials": 0, "trials": 4}
                )
            },
            "xlat-ebpf": {"throughput/min": _ok({**top, "fps": 380_000})},
        },
    }
    t = report.summary_table(run, {"duts": ["kernel-v6", "xlat", "xlat-ebpf"]})
    ratios = t.split("Ratios to")[1]
    assert "| xlat | 0.25 ≤ |" in ratios, t
    assert "| xlat-ebpf | 0.95 ≶ |" in ratios, t
    assert "with ≤, over such a figure, at most that" in t, t


def test_compare_says_what_a_run_left_out(tmp_path, monkeypatch):
    """`lab compare` said nothing of a run cut by its time budget (it counts
    as finished) or limited with --duts (found by a probe)."""
    import json

    import lab.compare
    from lab.compare import compare

    ping = {"rtt_ms": {"median": 0.05, "p95": 0.07}}
    a = _run_dir(tmp_path / "a", "smoke", {"ping": ping})
    b = _run_dir(tmp_path / "b", "smoke", {"ping": ping})
    m = json.loads((b / "meta.json").read_text())
    m["only"] = ["xlat"]
    (b / "meta.json").write_text(json.dumps(m))
    out = compare(a, b)
    assert "B measured only xlat (--duts)." in out, out
    assert "A measured only" not in out and "not run" not in out, out
    monkeypatch.setattr(
        lab.compare,
        "pending_trials",
        lambda r: {"xlat": [1, 2, 3]} if r["meta"].get("only") else {},
    )
    out = compare(a, b)
    assert "B left 3 trial(s) not run (the time budget ran out)" in out, out
    assert "A left" not in out, out
