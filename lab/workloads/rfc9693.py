"""RFC 9693 stateful benchmarks with xlat-perf's own subcommands (docs/xlat-perf.md,
"Stateful tests"): ``cer`` (maximum connection establishment rate), ``validate``
(validation of connection establishment), ``state-throughput`` (throughput with
the state table filled) and ``capacity`` (connection tracking table capacity).

The Initiator is the flow's sender (private side), the Responder its receiver
(public side); ``--dst`` is the Responder as the Initiator reaches it (its NAT64
form through a NAT64, its address through a NAT44). Between trials
``--between-cmd`` empties the DUT's table when the adapter can
(``adapter.flush_cmd()``: conntrack for nft NAT44 and TAYGA + NAT44, `xlat bib
flush` for the xlat NAT64); otherwise every trial still uses 4-tuples new to the
DUT (xlat-perf takes each trial's tuples from a fresh part of the tuple space),
but the sessions of earlier trials stay in the table until they expire: the
report says so (``table_flushed``).

The endpoints drop the test ports in their input hook, so the kernel's ICMP
port-unreachable answers do not cross the DUT (the AF_PACKET receivers see the
frames before that hook).
"""

from __future__ import annotations

import json

from lab.netns import ns_exec
from lab.workloads.common import log, perf_bin

TESTS = ("cer", "validate", "state-throughput", "capacity")
SPORTS = "1024-65535"
DPORTS = "7000-7099"
_TABLE = "xlabrfc9693"


def command(sub: str, flow, p: dict, between: str | None) -> list[str]:
    """The ``xlat-perf SUB`` command line for the parameters ``p`` of a trial."""
    if sub not in TESTS:
        raise ValueError(f"rfc9693: unknown test {sub!r} (one of {', '.join(TESTS)})")
    cmd = [
        perf_bin(),
        sub,
        "--initiator-netns",
        flow.src_ns,
        "--responder-netns",
        flow.dst_ns,
        "--initiator",
        flow.src_addr,
        "--dst",
        flow.dst_addr,
        "--responder",
        flow.dst_local or flow.dst_addr,
        "--sports",
        p.get("sports", SPORTS),
        "--dports",
        p.get("dports", DPORTS),
        "--wait",
        str(p.get("wait", 0.5)),
        "--retries",
        str(p.get("retries", 2)),
    ]
    if between:
        cmd += ["--between-cmd", between]
    n = str(p["connections"])
    if sub == "cer":
        cmd += ["--connections", n, "--max-rate", str(p["max_rate"])]
        cmd += ["--error", str(p.get("error", 0.05))]
    elif sub == "validate":
        cmd += ["--connections", n, "--prelim-rate", str(p["prelim_rate"])]
    elif sub == "state-throughput":
        cmd += ["--connections", n, "--prelim-rate", str(p["prelim_rate"])]
        cmd += ["--max-rate", str(p["max_rate"]), "--duration", str(p["duration"])]
        cmd += ["--direction", p.get("direction", "reverse")]
        cmd += ["--error", str(p.get("error", 0.05))]
    else:  # capacity
        cmd += ["--c0", n, "--max-rate", str(p["max_rate"])]
        cmd += ["--max-connections", str(p["max_connections"])]
        cmd += ["--error", str(p.get("error", 0.2))]
        cmd += ["--capacity-error", str(p.get("capacity_error", 1000))]
    return [*cmd, "--json"]


def _median(vals: list[float]):
    v = sorted(x for x in vals if x is not None)
    return v[len(v) // 2] if v else None


def parse(sub: str, j: dict) -> dict:
    """The lab's result of one RFC 9693 test from ``xlat-perf SUB --json``: the
    result (median over ``--repeat``), the trials, the Responder's view of the
    DUT's public side (``recorded_sample``)."""
    reps = j.get("repetitions") or []
    if not reps:
        raise RuntimeError(f"no repetitions in xlat-perf {sub} output: {str(j)[:300]}")
    params = j.get("parameters", {})
    trials = [t for r in reps for t in r.get("trials", [])]
    sample = next(
        (t["recorded_sample"] for t in reversed(trials) if t.get("recorded_sample")),
        [],
    )
    out: dict = {
        "test": sub,
        "connections": params.get("c0" if sub == "capacity" else "connections"),
        "trials": len(trials),
        "failed_trials": sum(1 for t in trials if t.get("result") != "pass"),
        "recorded_sample": sample[:3],
    }
    if sub == "cer":
        out["cer_fps"] = _median([r["connection_establishment_rate"] for r in reps])
    elif sub == "validate":
        r = reps[0]
        out |= {
            "established": r["established"],
            "validated": r["validated"],
            "all_validated": all(x["all_validated"] for x in reps),
        }
    elif sub == "state-throughput":
        out["throughput_fps"] = _median([r["throughput_fps"] for r in reps])
        out["upper_bound_fps"] = _median([r.get("upper_bound_fps") for r in reps])
        out["direction"] = params.get("direction")
    elif sub == "capacity":
        r = reps[0]
        out |= {
            "capacity": r["capacity"],
            "capacity_upper_bound": r.get("capacity_upper_bound"),
            "rate_at_capacity": r.get("rate_at_capacity"),
            "reached_max_connections": r.get("reached_max_connections"),
            "steps": [
                {k: s.get(k) for k in ("stage", "connections", "rate")}
                for s in r.get("steps", [])
            ],
        }
    else:
        raise ValueError(f"rfc9693: unknown test {sub!r}")
    return out


def _drop_rules(lab, ns: str) -> None:
    # Both the Responder's ports (7000-7099) and the Initiator's (1024-65535).
    lab.exec(
        ns,
        ["nft", "-f", "-"],
        input=f"table inet {_TABLE} {{\n chain in {{\n"
        "  type filter hook input priority 0; policy accept;\n"
        "  udp dport 1024-65535 drop\n }\n}\n",
    )


def run(adapter, topo, flow, sub: str, p: dict) -> dict:
    """Run one RFC 9693 test across ``flow`` through ``adapter``."""
    between = adapter.flush_cmd() if hasattr(adapter, "flush_cmd") else None
    for ns in (flow.src_ns, flow.dst_ns):
        _drop_rules(topo.lab, ns)
    try:
        before = adapter.sessions()
        cmd = command(sub, flow, p, between)
        cp = ns_exec(None, cmd, check=False, timeout=p.get("timeout", 300))
        if cp.returncode != 0:
            raise RuntimeError(
                f"xlat-perf {sub} exited {cp.returncode}: {cp.stderr.strip()[-400:]}"
            )
        raw = json.loads(cp.stdout)
        res = parse(sub, raw)
        res["table_flushed"] = between is not None
        res["sessions_before"] = before
        res["sessions_after"] = adapter.sessions()
        log(f"    rfc9693 {sub}: {_brief(res)}")
        return {"result": res, "raw": raw}
    finally:
        for ns in (flow.src_ns, flow.dst_ns):
            ns_exec(ns, ["nft", "delete", "table", "inet", _TABLE], check=False)


def _brief(r: dict) -> str:
    t = r["test"]
    if t == "cer":
        return f"CER {r['cer_fps']:,} conn/s at {r['connections']:,} connections"
    if t == "validate":
        return f"{r['validated']:,} of {r['established']:,} validated"
    if t == "state-throughput":
        return f"{r['throughput_fps']:,} fps ({r['direction']}) with {r['connections']:,} connections"
    return (
        f"capacity {r['capacity']:,}"
        f"{' (max tried)' if r['reached_max_connections'] else ''} at {r['rate_at_capacity']} conn/s"
    )


brief = _brief
