"""The report (lab/report.py) on fake runs: result dicts and run directories
built by hand, nothing measured."""

from __future__ import annotations

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
    assert "| kernel-v6 | 0.050 |" in t, t
    # Every row has the header's columns.
    lines = [ln for ln in t.splitlines() if ln.startswith("|")]
    assert len({ln.count(" |") for ln in [lines[0], *lines[2:5]]}) == 1, t

    # No DUT of the part measured anything: one column, filled on every row.
    t = report.summary_table(run, {"duts": ["xlat-464", "xlat-dual"]})
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
    assert "0.30 / 0.40 ms" in report._http_table(run, duts)


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
    assert "| kernel2-v4 | 0.050 | 0.070 |" in dual, dual
    assert "| kernel2-v4 | 9.00 (0 retr) |" in p464, p464
    assert "pending" not in md, md
    con = report.console_table(run)
    assert "TCP x1" not in con.split("## 464")[0], con
