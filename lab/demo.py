"""``make demo``: xlat translating real traffic, then xlat vs TAYGA vs the kernel.

1. **Show** (about 15 s): the ``siit_single`` topology (IPv6-only client --
   router -- IPv4-only server), ``xlat run`` in the router with its config
   printed, then from the IPv6-only client a ping of the server's pool6
   address, an HTTP fetch (curl) from the nginx on the IPv4-only server, and
   ``xlat stats``: real packets, translated.
2. **Compare** (about 3 minutes): the ``demo`` scenario (:mod:`lab.scenarios`):
   kernel IPv6 forwarding, TAYGA and xlat on the same machine in the same run:
   zero-loss throughput (RFC 8219), iperf3 TCP with 1 and 4 streams, ping RTT,
   HTTP transactions at 1, 10 and 50 concurrent connections; then the report
   (Markdown + plots, in ``results/demo-<time>/``) and the table printed.

Namespaces (prefix ``xlab``) are removed on exit, Ctrl-C and SIGTERM. Builds
nothing itself (``make demo`` builds first).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from lab import netns, report
from lab.adapters import make_adapter
from lab.cleanup import claim
from lab.netns import ns_exec, random_prefix
from lab.runner import LAB_PREFIX, default_out, interrupted, run_scenario, signalled
from lab.topologies import siit_single
from lab.workloads.http import Nginx


def step(title: str) -> None:
    bold, end = ("\033[1m", "\033[0m") if sys.stdout.isatty() else ("", "")
    print(f"\n{bold}=== {title}{end}", flush=True)


def show(cp: subprocess.CompletedProcess) -> None:
    print(((cp.stdout or "") + (cp.stderr or "")).rstrip(), flush=True)


def walkthrough() -> None:
    xlat = make_adapter("xlat")
    if not xlat.supports():
        raise RuntimeError(xlat.why)
    step("topology siit_single")
    prefix = random_prefix(LAB_PREFIX)
    with claim(prefix), siit_single(prefix) as topo:
        print(
            f"IPv6-only client {topo.h6} {topo.h6_addr}  --  router/DUT {topo.router}"
            f"  --  IPv4-only server {topo.h4} {topo.h4_addr}\n"
            f"pool6 {topo.pool6}: the server is {topo.h4_v6} seen from IPv6; "
            f"EAM {topo.eamt[0][0]} <-> {topo.eamt[0][1]}: the client is {topo.h6_v4} "
            "seen from IPv4"
        )
        step(f"xlat run -c xlat.toml  (in {topo.router})")
        xlat.start(topo)
        web = None
        try:
            print(xlat.config_path.read_text().rstrip())
            print("xlat: ready")
            web = Nginx(topo.lab, topo.h4, topo.h4_addr, port=80)
            web.start()
            print(f"nginx listening on {topo.h4_addr}:80 (IPv4-only host)")
            step(f"ping -6 {topo.h4_v6}  (from the IPv6-only client)")
            cp = ns_exec(
                topo.h6,
                [
                    "ping",
                    "-n",
                    "-c",
                    "3",
                    "-i",
                    "0.2",
                    "-W",
                    "2",
                    "-I",
                    topo.h6_addr,
                    topo.h4_v6,
                ],
                check=False,
                timeout=20,
            )
            show(cp)
            if cp.returncode != 0:
                raise RuntimeError("ping through xlat failed")
            url = f"http://[{topo.h4_v6}]/small"
            step(f"curl {url}")
            cp = ns_exec(
                topo.h6,
                [
                    "curl",
                    "-sS",
                    "-m",
                    "10",
                    "-o",
                    "/dev/null",
                    "-D",
                    "-",
                    "-w",
                    "%{size_download} bytes from %{remote_ip} in %{time_total} s\n",
                    "--interface",
                    topo.h6_addr,
                    url,
                ],
                check=False,
                timeout=20,
            )
            show(cp)
            if cp.returncode != 0 or " 200 " not in cp.stdout:
                raise RuntimeError("HTTP fetch through xlat failed")
            step("xlat stats  (via the control socket)")
            print((xlat.stats() or "(no stats)").rstrip())
        except Exception:
            tail = xlat.log_tail()
            if tail:
                print(f"\n--- xlat log (tail) ---\n{tail}", file=sys.stderr)
            raise
        finally:
            if web is not None:
                web.stop()
            xlat.stop()


def demo(out: Path | None = None) -> int:
    t0 = time.monotonic()
    walkthrough()
    step(
        "xlat (TUN and eBPF datapaths) vs TAYGA vs kernel forwarding"
        "  (scenario demo, same machine, same run)"
    )
    out, _meta = run_scenario("demo", out)
    md = report.write(out)
    run = report.load(out)
    step("results")
    print(report.console_table(run))
    print(f"full report with plots: {md}")
    step(f"namespaces removed; demo took {time.monotonic() - t0:.0f} s")
    return demo_status(run)


def demo_status(run: dict) -> int:
    """The demo's point: xlat translated the scenario's traffic, on each of its
    datapaths. A trial of an xlat DUT that failed (an error, not a measured low
    figure) fails the demo, as does an xlat DUT with no trial at all; the
    baselines' and TAYGA's failures are in the report."""
    xlats = sorted(
        {d for p in run["meta"]["parts"] for d in p["duts"] if d.startswith("xlat")}
    )
    bad = []
    for d in xlats:
        trials = run["trials"].get(d, {})
        if not trials:
            bad.append(f"{d}: all")
        bad += [
            f"{d} {k}"
            for k, t in sorted(trials.items())
            if t.get("status") not in ("ok", "unsupported")
        ]
    if bad:
        print(f"xlat trials that did not finish: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    if os.geteuid() != 0:
        print("demo: must run as root (network namespaces)", file=sys.stderr)
        return 2
    netns.stop_on_first_signal()
    out = default_out("demo")
    try:
        return demo(out)
    except (KeyboardInterrupt, SystemExit) as e:
        # Ctrl-C, SIGTERM, SIGHUP: one line, no traceback (the topology is
        # already removed); the trials measured so far are in `out`.
        if not signalled(e):
            raise
        return interrupted(e, out, "demo")
    except Exception as e:  # noqa: BLE001 - one clear line, topology already removed
        print(f"\ndemo: FAILED: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
