"""Scenarios: which DUTs, on which topologies, under which workloads, in what time.

A scenario is a list of *parts*; each part compares a set of DUTs (translators
and the baselines measured in the same run) with the same workloads. Workload
parameters:

==============  ===============================================================
throughput      ``frame_sizes`` (sender side, 0 = family minimum), ``trial`` s,
                ``max_trials`` per search, ``repeat`` searches (default 1; the
                median is reported, RFC 2544 section 24)
flr             ``trial`` s per rate, ``steps`` (10 = 10 %..100 %)
latency, pdv    ``duration`` s, ``warmup`` s (latency), ``rate_fraction`` of the
                DUT's measured throughput at the minimum frame size
tcp             ``streams`` list, ``directions`` (``fwd``, ``rev``), ``seconds``
ping            ``count`` (at 10 ms), ``beside``: a baseline DUT pinged at
                the same time in its own topology (the RTT ratios to it),
                ``warm_count``: pings 1 ms apart after them (CPUs kept warm)
http            ``profiles`` (small, large), ``concurrency`` list, ``seconds``
tcp_cps         ``concurrency`` list, ``seconds``: short TCP connections/s with
                ``ab`` (a C client; lab/workloads/http.py)
conn_rate       ``trial``, ``max_trials``, ``start_rate``, ``max_rate`` (stateful DUTs)
scale           ``sessions`` list, ``trial``, ``max_trials``, ``est_max_rate``
rfc9693         ``{test: params}`` for the tests ``cer``, ``validate``,
                ``state-throughput``, ``capacity`` (xlat-perf's RFC 9693
                subcommands, lab/workloads/rfc9693.py; one trial each)
==============  ===============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

HTTP_CONC = [1, 2, 5, 10, 20, 50, 100]


@dataclass
class Part:
    title: str
    duts: list[str]
    workloads: dict[str, dict]
    # The DUT the summary's ratios are taken to (default: the part's baselines).
    reference: str | None = None


@dataclass
class Scenario:
    name: str
    description: str
    parts: list[Part]
    budget_min: float
    headline: list[str] = field(default_factory=list)  # DUTs of the printed table


def _siit_full(trial=2.0, tcp_s=10, http_s=3.0) -> dict:
    return {
        "throughput": {
            "frame_sizes": [0, 128, 256, 512, 1024, 1280, 1518],
            "trial": trial,
            "max_trials": 6,
        },
        "flr": {"trial": trial, "steps": 10},
        "latency": {"duration": 10, "warmup": 2, "rate_fraction": 0.5},
        "pdv": {"duration": 10, "rate_fraction": 0.5},
        "tcp": {"streams": [1, 4], "directions": ["fwd", "rev"], "seconds": tcp_s},
        "ping": {"count": 500, "beside": "kernel-v6", "warm_count": 2000},
        "http": {
            "profiles": ["small", "large"],
            "concurrency": HTTP_CONC,
            "seconds": http_s,
        },
    }


SCENARIOS: dict[str, Scenario] = {}


def _add(s: Scenario) -> None:
    SCENARIOS[s.name] = s


_add(
    Scenario(
        "demo",
        "SIIT single DUT: xlat (TUN and eBPF datapaths) vs TAYGA vs kernel forwarding"
        " (throughput, TCP, RTT, HTTP); < 5 min",
        [
            Part(
                "SIIT, single DUT (RFC 8219)",
                ["kernel-v6", "tayga", "xlat", "xlat-ebpf"],
                {
                    "throughput": {"frame_sizes": [0], "trial": 2.0, "max_trials": 6},
                    "tcp": {"streams": [1, 4], "directions": ["fwd"], "seconds": 4},
                    "ping": {"count": 200, "beside": "kernel-v6", "warm_count": 1000},
                    "http": {
                        "profiles": ["small"],
                        "concurrency": [1, 10, 50],
                        "seconds": 2.0,
                    },
                },
            )
        ],
        budget_min=4.0,
        headline=["kernel-v6", "tayga", "xlat", "xlat-ebpf"],
    )
)

_add(
    Scenario(
        "smoke",
        "every workload for about a second (the test suite's check that the lab works)",
        [
            Part(
                "SIIT, single DUT",
                ["kernel-v6", "xlat"],
                {
                    "throughput": {"frame_sizes": [0], "trial": 0.3, "max_trials": 2},
                    "flr": {"trial": 0.3, "steps": 2},
                    "latency": {
                        "duration": 1,
                        "warmup": 0.3,
                        "rate_fraction": 0.3,
                        "tagged": 50,
                    },
                    "pdv": {"duration": 1, "rate_fraction": 0.3},
                    "tcp": {"streams": [1], "directions": ["fwd", "rev"], "seconds": 1},
                    "ping": {
                        "count": 20,
                        "segments": True,
                        "beside": "kernel-v6",
                        "warm_count": 50,
                    },
                    "http": {
                        "profiles": ["small", "large"],
                        "concurrency": [1, 5],
                        "seconds": 0.5,
                    },
                    "tcp_cps": {"concurrency": [8], "seconds": 1},
                },
            ),
            Part(
                "Stateful NAT64",
                ["xlat-nat64"],
                {
                    "conn_rate": {
                        "trial": 0.3,
                        "max_trials": 2,
                        "start_rate": 5000,
                        "max_rate": 10000,
                    },
                    "scale": {
                        "sessions": [2000],
                        "trial": 0.3,
                        "max_trials": 1,
                        "est_max_rate": 5000,
                    },
                    "rfc9693": {"validate": {"connections": 500, "prelim_rate": 5000}},
                },
            ),
        ],
        budget_min=3.0,
        headline=["kernel-v6", "xlat"],
    )
)

_add(
    Scenario(
        "datapaths",
        "xlat's datapaths: TUN vs eBPF fast path vs kernel forwarding (docs/datapaths.md)",
        [
            Part(
                "SIIT, single DUT: datapaths",
                ["kernel-v6", "xlat", "xlat-ebpf"],
                {
                    # Three searches, the median: one search's zero-loss rate
                    # varies by about 10 % between runs on a shared machine.
                    "throughput": {
                        "frame_sizes": [0, 1518],
                        "trial": 2.0,
                        "max_trials": 6,
                        "repeat": 3,
                    },
                    "latency": {"duration": 5, "warmup": 1, "rate_fraction": 0.5},
                    "tcp": {
                        "streams": [1, 4],
                        "directions": ["fwd", "rev"],
                        "seconds": 4,
                    },
                    "ping": {
                        "count": 200,
                        "segments": True,
                        "beside": "kernel-v6",
                        "warm_count": 1000,
                    },
                    "http": {
                        "profiles": ["small"],
                        "concurrency": [1, 10, 50],
                        "seconds": 2.0,
                    },
                },
            )
        ],
        budget_min=10.0,
        headline=["kernel-v6", "xlat", "xlat-ebpf"],
    )
)

_SIIT = Part(
    "SIIT, single DUT (RFC 8219)",
    ["kernel-v6", "kernel-v4", "tayga", "xlat", "xlat-ebpf"],
    _siit_full(),
)
_DUAL = Part(
    "Dual DUT: NAT46 then NAT64 back (RFC 8219 section 4.2)",
    ["kernel2-v4", "tayga-dual", "xlat-dual"],
    {
        "throughput": {"frame_sizes": [0, 512, 1518], "trial": 2.0, "max_trials": 6},
        "tcp": {"streams": [1, 4], "directions": ["fwd"], "seconds": 10},
        "ping": {"count": 500, "beside": "kernel2-v4", "warm_count": 2000},
        "http": {"profiles": ["small"], "concurrency": HTTP_CONC, "seconds": 2.0},
    },
)
_464 = Part(
    "464XLAT with DNS64 (unbound)",
    ["kernel2-v4", "xlat-464"],
    {
        "tcp": {"streams": [1, 4], "directions": ["fwd", "rev"], "seconds": 10},
        "ping": {"count": 500, "beside": "kernel2-v4", "warm_count": 2000},
        "http": {
            "profiles": ["small", "large"],
            "concurrency": HTTP_CONC,
            "seconds": 2.0,
        },
    },
)
# RFC 9693 (xlat-perf cer / validate / state-throughput / capacity). The
# preliminary phase of state-throughput must pass (all N frames arrive): its rate
# stays well under the CER.
RFC9693_FULL = {
    "cer": {"connections": 50000, "max_rate": 1000000, "error": 0.02},
    "validate": {"connections": 50000, "prelim_rate": 10000},
    "state-throughput": {
        "connections": 20000,
        "prelim_rate": 10000,
        "max_rate": 1000000,
        "duration": 1,
        "error": 0.02,
    },
    # Capped at 160k: a bound on the run's time (xlat's max-sessions is 2M).
    "capacity": {
        "connections": 10000,
        "max_rate": 500000,
        "max_connections": 160000,
        "capacity_error": 10000,
        "timeout": 900,
    },
}
RFC9693_QUICK = {
    "cer": {"connections": 10000, "max_rate": 500000},
    "validate": {"connections": 10000, "prelim_rate": 10000},
    "state-throughput": {
        "connections": 10000,
        "prelim_rate": 10000,
        "max_rate": 500000,
        "duration": 1,
    },
    "capacity": {
        "connections": 5000,
        "max_rate": 200000,
        "max_connections": 80000,
        "capacity_error": 5000,
        "timeout": 600,
    },
}
_NAT = Part(
    "Stateful NAT64 / NAT44 (RFC 9693)",
    ["nft-nat44", "tayga-nat44", "xlat-nat64"],
    {
        "tcp": {"streams": [1, 4], "directions": ["fwd"], "seconds": 10},
        "ping": {"count": 500, "beside": "nft-nat44", "warm_count": 2000},
        "http": {"profiles": ["small"], "concurrency": HTTP_CONC, "seconds": 2.0},
        "tcp_cps": {"concurrency": [32], "seconds": 3},
        "conn_rate": {
            "trial": 2.0,
            "max_trials": 7,
            "start_rate": 20000,
            "max_rate": 1000000,
        },
        "scale": {
            "sessions": [10000, 100000, 1000000],
            "trial": 2.0,
            "max_trials": 7,
            "est_max_rate": 400000,
        },
        "rfc9693": RFC9693_FULL,
    },
)


def _nat_datapaths(nat: Part) -> Part:
    """xlat's NAT64 on the TUN datapath vs with the eBPF fast path (issue 7: the
    new-flow rate no worse than TUN's, established flows faster), same run. The
    workloads are ``nat``'s own, so ``xlat-nat64`` runs them once for both parts."""
    return Part(
        "Stateful NAT64: TUN datapath vs eBPF fast path",
        ["xlat-nat64", "xlat-nat64-ebpf"],
        {k: nat.workloads[k] for k in ("tcp", "tcp_cps", "conn_rate", "scale")},
        reference="xlat-nat64",
    )


_add(
    Scenario(
        "siit",
        "SIIT single DUT, every workload",
        [_SIIT],
        30.0,
        ["kernel-v6", "tayga", "xlat"],
    )
)
_add(
    Scenario(
        "dual-dut", "dual DUT (NAT46 + NAT64) vs two-hop IPv4 forwarding", [_DUAL], 15.0
    )
)
_add(
    Scenario(
        "464xlat",
        "464XLAT (CLAT + PLAT, DNS64) vs two-hop IPv4 forwarding",
        [_464],
        10.0,
    )
)
_add(
    Scenario(
        "nat64",
        "stateful NAT64 vs TAYGA + NAT44 vs NAT44; xlat's NAT64 on TUN vs eBPF",
        [_NAT, _nat_datapaths(_NAT)],
        45.0,
    )
)
_add(
    Scenario(
        "nat64-datapaths",
        "xlat's NAT64: TUN datapath vs eBPF fast path (new flows, established flows)",
        [
            _nat_datapaths(
                Part(
                    "",
                    [],
                    {
                        "tcp": {"streams": [1], "directions": ["fwd"], "seconds": 4},
                        "tcp_cps": {"concurrency": [32], "seconds": 3},
                        "conn_rate": {
                            "trial": 1.0,
                            "max_trials": 6,
                            "start_rate": 20000,
                            "max_rate": 1000000,
                        },
                        "scale": {
                            "sessions": [10000, 100000],
                            "trial": 1.0,
                            "max_trials": 5,
                            "est_max_rate": 400000,
                        },
                    },
                )
            )
        ],
        8.0,
    )
)
_add(
    Scenario(
        "bench",
        "the full comparison: every topology, DUT and workload (make bench)",
        # The RFC 9693 tests at the quick sizes: the full ones take ~5 min per DUT.
        [
            _SIIT,
            _DUAL,
            _464,
            Part(_NAT.title, _NAT.duts, {**_NAT.workloads, "rfc9693": RFC9693_QUICK}),
            _nat_datapaths(_NAT),
        ],
        budget_min=54.0,
        headline=["kernel-v6", "tayga", "xlat"],
    )
)

_QC = [1, 10, 100]
_NAT_QUICK = Part(
    _NAT.title,
    _NAT.duts,
    {
        "tcp": {"streams": [1], "directions": ["fwd"], "seconds": 3},
        "ping": {"count": 100, "beside": "nft-nat44", "warm_count": 1000},
        "http": {"profiles": ["small"], "concurrency": _QC, "seconds": 1.5},
        "tcp_cps": {"concurrency": [32], "seconds": 2},
        "conn_rate": {
            "trial": 1.0,
            "max_trials": 5,
            "start_rate": 20000,
            "max_rate": 1000000,
        },
        "scale": {
            "sessions": [10000, 100000],
            "trial": 1.0,
            "max_trials": 5,
            "est_max_rate": 400000,
        },
        "rfc9693": RFC9693_QUICK,
    },
)

_add(
    Scenario(
        "bench-quick",
        "the full comparison with short trials and fewer points (BENCH_QUICK=1 make bench)",
        [
            Part(
                _SIIT.title,
                _SIIT.duts,
                {
                    "throughput": {
                        "frame_sizes": [0, 512, 1518],
                        "trial": 1.0,
                        "max_trials": 5,
                    },
                    "flr": {"trial": 1.0, "steps": 5},
                    "latency": {"duration": 3, "warmup": 1, "rate_fraction": 0.5},
                    "pdv": {"duration": 3, "rate_fraction": 0.5},
                    "tcp": {
                        "streams": [1, 4],
                        "directions": ["fwd", "rev"],
                        "seconds": 3,
                    },
                    "ping": {"count": 200, "beside": "kernel-v6", "warm_count": 1000},
                    "http": {
                        "profiles": ["small", "large"],
                        "concurrency": _QC,
                        "seconds": 1.5,
                    },
                },
            ),
            Part(
                _DUAL.title,
                _DUAL.duts,
                {
                    "throughput": {"frame_sizes": [0], "trial": 1.0, "max_trials": 5},
                    "tcp": {"streams": [1], "directions": ["fwd"], "seconds": 3},
                    "ping": {"count": 100, "beside": "kernel2-v4", "warm_count": 1000},
                    "http": {"profiles": ["small"], "concurrency": _QC, "seconds": 1.5},
                },
            ),
            Part(
                _464.title,
                _464.duts,
                {
                    "tcp": {"streams": [1], "directions": ["fwd", "rev"], "seconds": 3},
                    "ping": {"count": 100, "beside": "kernel2-v4", "warm_count": 1000},
                    "http": {"profiles": ["small"], "concurrency": _QC, "seconds": 1.5},
                },
            ),
            _NAT_QUICK,
            _nat_datapaths(_NAT_QUICK),
        ],
        budget_min=22.0,
        headline=["kernel-v6", "tayga", "xlat"],
    )
)
