"""HTTP transactions through the DUT: nginx on the receiver side, the lab's own
client (:mod:`lab.workloads.httpclient`) on the sender side, per-request RTT.

Profiles (request / response size):

* ``small``: ``GET /small`` (about 100-byte request, 128-byte body);
* ``large``: ``POST /large`` with a 16 KiB body, 128 KiB response body;

each at the scenario's concurrencies (1, 2, 5, 10, 20, 50, 100 in the full
bench), a new TCP connection per transaction (so a stateful DUT sees a new
flow each time).

``tcp_cps``: the rate of short TCP connections (connect, ``GET /small`` over
HTTP/1.0, close) that ApacheBench (``ab``, Debian package apache2-utils), a C
client, completes at a given concurrency. The lab's own client is Python and
needs about one CPU for 8-10 k connections/s: on a 2-CPU lab it is the limit,
and a DUT whose work runs inline in the client's own system calls (kernel
forwarding, the eBPF fast path on veth) looks slower than one that runs on a
thread of its own (the TUN datapath), though it costs the machine less.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from lab.adapters.base import repo_root
from lab.cleanup import lab_tmpdir
from lab.netns import ns_exec
from lab.workloads.common import describe, wait_listen

HTTP_PORT = 8080
PROFILES = {
    "small": {"path": "/small", "body": 0, "response": 128},
    "large": {"path": "/large", "body": 16 * 1024, "response": 128 * 1024},
}


def nginx_bin() -> str | None:
    return shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )


class Nginx:
    """nginx in the foreground in ``ns``, everything (its stderr too) in the lab's
    marked temp dir (``lab cleanup`` removes it after a crash); stopped by PID."""

    def __init__(self, lab, ns: str, listen: str, port: int = HTTP_PORT):
        self.lab, self.ns, self.listen, self.port = lab, ns, listen, port
        self.tmp = lab_tmpdir("nginx")
        self.proc = None

    def start(self, timeout: float = 5.0) -> None:
        nginx = nginx_bin()
        if nginx is None:
            raise FileNotFoundError("nginx not found (Debian package nginx-light)")
        d = Path(self.tmp.name)
        www = d / "www"
        www.mkdir()
        for p in PROFILES.values():
            (www / p["path"].lstrip("/")).write_bytes(b"x" * p["response"])
        listen = f"[{self.listen}]" if ":" in self.listen else self.listen
        (d / "nginx.conf").write_text(
            f"""daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    default_type application/octet-stream;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    client_max_body_size 1m;
    client_body_buffer_size 1m;
    keepalive_requests 100000;
    server {{
        listen {listen}:{self.port} backlog=4096 reuseport;
        root {www};
        # Static files for POST too: nginx answers 405, redirected to a GET of the file.
        error_page 405 =200 $uri;
    }}
}}
"""
        )
        with open(d / "stderr.log", "w") as err:
            self.proc = self.lab.spawn(
                self.ns,
                [
                    nginx,
                    *("-p", str(d), "-c", str(d / "nginx.conf")),
                    *("-e", f"{d}/error.log"),
                ],
                stdout=err,
                stderr=err,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nginx ({nginx}) exited at start ({self.proc.returncode}): "
                    f"{self.log_tail() or '(no output)'}"
                )
            if wait_listen(self.ns, self.port, timeout=0.1):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"nginx ({nginx}) did not listen on port {self.port} in "
                    f"{timeout:g} s: {self.log_tail() or '(no output)'}"
                )

    def log_tail(self) -> str:
        """The end of nginx's stderr and of its error log."""
        out = []
        for f in ("stderr.log", "error.log"):
            try:
                text = (Path(self.tmp.name) / f).read_text(errors="replace").strip()
            except OSError:
                continue
            if text:
                out.append(text[-500:])
        return "\n".join(out)

    def stop(self) -> None:
        if self.proc is not None:
            self.lab.stop(self.proc)
            self.proc = None
        self.tmp.cleanup()


def parse_client(j: dict) -> dict:
    """The client's JSON -> RTT statistics (ms), request rate, errors."""
    rtts = j["rtt_ms"]
    wall = j.get("wall_s") or 0
    return {
        "concurrency": j["concurrency"],
        "requests": len(rtts),
        "errors": sum(j["errors"].values()),
        "error_kinds": j["errors"],
        "non_200": sum(v for k, v in j["status"].items() if k != "200"),
        "rps": len(rtts) / wall if wall else None,
        "mbps": j["bytes"] * 8 / wall / 1e6 if wall else None,
        "rtt_ms": describe(rtts),
        "samples_ms": rtts,
    }


def http(
    flow, topo, *, profile: str, concurrency: int, seconds: float, server=None
) -> dict:
    """One HTTP trial; ``server`` is a running :class:`Nginx` (started if None)."""
    own = server is None
    if own:
        server = Nginx(topo.lab, flow.dst_ns, flow.dst_local or flow.sink_bind)
        server.start()
    try:
        p = PROFILES[profile]
        env = dict(os.environ, PYTHONPATH=str(repo_root()))
        cmd = [
            "env",
            f"PYTHONPATH={env['PYTHONPATH']}",
            sys.executable,
            "-m",
            "lab.workloads.httpclient",
            "--host",
            flow.dst_addr,
            "--port",
            str(server.port),
            "--path",
            p["path"],
            "--body",
            str(p["body"]),
            "--local",
            flow.src_addr,
            "--concurrency",
            str(concurrency),
            "--duration",
            f"{seconds:g}",
        ]
        cp = ns_exec(flow.src_ns, cmd, check=False, timeout=seconds + 30)
        if cp.returncode != 0:
            raise RuntimeError(f"http client failed: {cp.stderr.strip()[-400:]}")
        res = parse_client(json.loads(cp.stdout))
        res["profile"] = profile
        res["request_bytes"] = p["body"]
        res["response_bytes"] = p["response"]
        if res["requests"] == 0:
            raise RuntimeError(
                f"no HTTP transaction completed: {res['error_kinds']} {server.log_tail()}"
            )
        return {"result": res}
    finally:
        if own:
            server.stop()


def ab_bin() -> str | None:
    return shutil.which("ab")


def parse_ab(out: str) -> dict:
    """ApacheBench's report -> completed connections, failed ones (ab's
    "Failed requests": connect, receive, length and exceptions), non-2xx
    responses, the rate of good connections and the mean time per connection.

    ab's own "Requests per second" is its "Complete requests" over the time,
    and with ``-r`` a connection whose response failed (receive or length) is
    complete too: ``cps`` counts only the connections that got a whole 2xx
    response (``cps_ab`` keeps ab's figure, ``ok`` their number)."""

    def num(label: str):
        m = re.search(rf"^{label}:\s+([\d.]+)", out, re.MULTILINE)
        if m is None:
            raise ValueError(f"ab: no {label!r} in its output: {out.strip()[-300:]!r}")
        return float(m.group(1))

    non2xx = re.search(r"^Non-2xx responses:\s+(\d+)", out, re.MULTILINE)
    why = re.search(r"\(Connect: \d+, Receive: (\d+), Length: (\d+),", out)
    done = int(num("Complete requests"))
    bad_done = int(why.group(1)) + int(why.group(2)) if why else 0
    n2xx = int(non2xx.group(1)) if non2xx else 0
    ok = max(0, done - bad_done - n2xx)
    rate = num("Requests per second")
    return {
        "connections": done,
        "failed": int(num("Failed requests")),
        "non_2xx": n2xx,
        "ok": ok,
        "cps": rate * ok / done if done else 0.0,
        "cps_ab": rate,
        # The first "Time per request" is the mean per connection.
        "mean_ms": num("Time per request"),
    }


def tcp_cps(flow, *, concurrency: int, seconds: float, server) -> dict:
    """Short TCP connections per second through the DUT (see the module's
    docstring): ``ab`` in the sender's namespace, bound to the flow's source
    address, against ``server`` (a running :class:`Nginx`) for ``seconds``."""
    ab = ab_bin()
    if ab is None:
        raise FileNotFoundError("ab not found (Debian package apache2-utils)")
    host = f"[{flow.dst_addr}]" if ":" in flow.dst_addr else flow.dst_addr
    # -n bounds ab's table of per-connection times (it sizes it up front);
    # -t ends the trial first at any rate this lab reaches.
    n = max(50_000, int(40_000 * seconds))
    cmd = [ab, "-q", "-r", "-s", "5", "-B", flow.src_addr, "-c", str(concurrency)]
    cmd += ["-t", f"{max(1, round(seconds))}", "-n", str(n)]
    cmd += [f"http://{host}:{server.port}{PROFILES['small']['path']}"]
    cp = ns_exec(flow.src_ns, cmd, check=False, timeout=seconds + 30)
    if cp.returncode != 0:
        raise RuntimeError(
            f"ab failed ({cp.returncode}): {(cp.stderr or cp.stdout).strip()[-400:]}"
        )
    res = parse_ab(cp.stdout)
    if res["connections"] == 0:
        raise RuntimeError(f"ab completed no connection: {cp.stdout.strip()[-400:]}")
    return {
        "result": {"concurrency": concurrency, "client": "ab", **res},
        "raw": cp.stdout,
    }
