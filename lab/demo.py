"""``make demo``: xlat translating real traffic between an IPv6-only client and an
IPv4-only server, in network namespaces that are removed afterwards.

Steps: build the ``siit_single`` topology, start ``xlat run`` in the router
namespace, start a web server (nginx, or Python's http.server if nginx is not
installed) on the IPv4-only host, then from the IPv6-only host: ping the
server's pool6 address, fetch a page with curl, run a 10-second iperf3, and
print ``xlat stats``. Builds nothing itself (``make demo`` builds first).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.adapters import Xlat
from lab.netns import ns_exec, random_prefix
from lab.topology import siit_single

HTTP_PORT = 80
PAGE = "hello from the IPv4-only server 198.51.100.2\n"


def step(title: str) -> None:
    print(f"\n\033[1m=== {title}\033[0m", flush=True)


def show(cp: subprocess.CompletedProcess) -> None:
    out = (cp.stdout or "") + (cp.stderr or "")
    print(out.rstrip(), flush=True)


def start_web(topo, tmp: Path) -> subprocess.Popen:
    """nginx (Debian nginx-light) in the foreground, everything in ``tmp``."""
    www = tmp / "www"
    www.mkdir()
    (www / "index.html").write_text(PAGE)
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if nginx:
        conf = tmp / "nginx.conf"
        conf.write_text(
            f"""daemon off;
master_process off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen {topo.h4_addr}:{HTTP_PORT};
        root {www};
    }}
}}
"""
        )
        cmd = [nginx, "-p", str(tmp), "-c", str(conf), "-e", f"{tmp}/error.log"]
        what = "nginx"
    else:
        cmd = [
            sys.executable,
            "-m",
            "http.server",
            str(HTTP_PORT),
            "--bind",
            topo.h4_addr,
            "--directory",
            str(www),
        ]
        what = "python http.server"
    proc = topo.lab.spawn(topo.h4, cmd)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        ss = ns_exec(topo.h4, ["ss", "-Hltn", f"sport = :{HTTP_PORT}"], check=False)
        if ss.stdout.strip():
            print(f"{what} listening on {topo.h4_addr}:{HTTP_PORT} (IPv4-only host)")
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not start")


def demo() -> int:
    xlat = Xlat()
    if not xlat.available():
        print(f"demo: {xlat.why}", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    step("topology siit_single")
    with (
        siit_single(random_prefix("xld")) as topo,
        tempfile.TemporaryDirectory() as tmpd,
    ):
        tmp = Path(tmpd)
        print(
            f"IPv6-only client {topo.h6} {topo.h6_addr}  --  router/DUT {topo.router}"
            f"  --  IPv4-only server {topo.h4} {topo.h4_addr}\n"
            f"pool6 {topo.pool6}: the server is {topo.h4_v6} seen from IPv6; "
            f"EAM {topo.eamt[0][0]} <-> {topo.eamt[0][1]}: the client is {topo.h6_v4} "
            "seen from IPv4"
        )
        step(f"xlat run -c xlat.toml  (in {topo.router})")
        xlat.start(topo)
        try:
            print(xlat.config_path.read_text().rstrip())
            print("xlat: ready")
            start_web(topo, tmp)

            step(f"ping -6 {topo.h4_v6}  (from the IPv6-only client)")
            cp = ns_exec(
                topo.h6,
                [
                    "ping",
                    "-n",
                    "-c",
                    "5",
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

            url = f"http://[{topo.h4_v6}]:{HTTP_PORT}/"
            step(f"curl {url}")
            cp = ns_exec(
                topo.h6,
                ["curl", "-sS", "-m", "10", "-i", "--interface", topo.h6_addr, url],
                check=False,
                timeout=20,
            )
            show(cp)
            if cp.returncode != 0 or PAGE.strip() not in cp.stdout:
                raise RuntimeError("HTTP fetch through xlat failed")

            step(f"iperf3 -c {topo.h4_v6} -t 10  (TCP, IPv6 client -> IPv4 server)")
            server = topo.lab.spawn(topo.h4, ["iperf3", "-s", "-1", "-B", topo.h4_addr])
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                ss = ns_exec(topo.h4, ["ss", "-Hltn", "sport = :5201"], check=False)
                if ss.stdout.strip():
                    break
                time.sleep(0.05)
            cp = ns_exec(
                topo.h6,
                ["iperf3", "-c", topo.h4_v6, "-B", topo.h6_addr, "-t", "10", "-f", "m"],
                check=False,
                timeout=40,
            )
            show(cp)
            topo.lab.stop(server)
            if cp.returncode != 0:
                raise RuntimeError("iperf3 through xlat failed")

            step("xlat stats  (via the control socket)")
            print((xlat.stats() or "(no stats)").rstrip())
        except Exception:
            tail = xlat.log_tail()
            if tail:
                print(f"\n--- xlat log (tail) ---\n{tail}", file=sys.stderr)
            raise
        finally:
            xlat.stop()
    step(f"topology removed; demo took {time.monotonic() - t0:.0f} s")
    return 0


def main() -> int:
    import os

    if os.geteuid() != 0:
        print("demo: must run as root (network namespaces)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return demo()
    except Exception as e:  # noqa: BLE001 - one clear line, topology already removed
        print(f"\ndemo: FAILED: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
