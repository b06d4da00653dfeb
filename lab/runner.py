"""Run a scenario: one results directory per run, one JSON file per trial.

Layout of ``results/<scenario>-<YYYYmmdd-HHMMSS>/``::

    meta.json               scenario, settings, host (CPU, kernel, clocksource,
                            versions), start/end times, budget
    duts/<dut>.json         description, topology, skipped/failed reason, DUT stats
                            (``stats``: the last instance's; ``instances``:
                            every instance's, with its namespaces and trials)
    trials/<dut>/<key>.json one trial: params, status, result, cpu, raw output
    report.md, plots/*.png  written by :mod:`lab.report`

A rerun with the same directory (``lab run SCENARIO --out DIR``) skips every
trial whose file says ``"status": "ok"`` (or "unsupported"), so an interrupted run
resumes where it stopped. The run keeps to its time budget: a trial is not
started after the deadline (it stays pending, to be resumed). A trial of the
plan with no file is *pending* (:func:`pending`): the budget ran out, the run was
interrupted (``meta["interrupted"]``) or killed before it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from lab import hostinfo, netns
from lab.adapters import ADAPTERS, Unsupported, make_adapter, repo_root
from lab.cleanup import claim, dead_runs, other_runs
from lab.netns import random_prefix
from lab.scenarios import SCENARIOS, Scenario
from lab.topologies import TOPOLOGIES
from lab.workloads import http as w_http
from lab.workloads import nat64 as w_nat64
from lab.workloads import ping as w_ping
from lab.workloads import rfc9693 as w_rfc9693
from lab.workloads import tcp as w_tcp
from lab.workloads import xlatperf as w_perf
from lab.workloads.common import log, wait_reachable
from lab.workloads.cpu import CpuSampler

LAB_PREFIX = "xlab"  # namespaces: xlab<4 hex>-<role>; `lab cleanup` removes xlab*
STATEFUL = ("conn_rate", "scale", "rfc9693")
DONE = ("ok", "unsupported")


@dataclass
class Trial:
    dut: str
    workload: str
    key: str  # e.g. "tcp/x4-rev"
    params: dict

    @property
    def file(self) -> str:
        return _trial_file(self.key)


def _trial_file(key: str) -> str:
    """The file of trial ``key`` under ``trials/<dut>/``."""
    return key.replace("/", "__") + ".json"


def _read_trial(out: Path, dut: str, key: str) -> dict | None:
    """The record of a trial of run directory ``out``, None if there is none
    (or only a broken one)."""
    try:
        return json.loads((out / "trials" / dut / _trial_file(key)).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def expand(workload: str, p: dict) -> list[tuple[str, dict]]:
    """A workload's parameters -> ``(key, params)`` per trial."""
    if workload == "throughput":
        return [
            (f"throughput/{'min' if s == 0 else s}", {**p, "frame_size": s})
            for s in p["frame_sizes"]
        ]
    if workload == "tcp":
        return [
            (
                f"tcp/x{n}-{d}",
                {"streams": n, "reverse": d == "rev", "seconds": p["seconds"]},
            )
            for n in p["streams"]
            for d in p["directions"]
        ]
    if workload == "http":
        return [
            (
                f"http/{prof}-c{c}",
                {"profile": prof, "concurrency": c, "seconds": p["seconds"]},
            )
            for prof in p["profiles"]
            for c in p["concurrency"]
        ]
    if workload == "tcp_cps":
        return [
            (f"tcp_cps/c{c}", {"concurrency": c, "seconds": p["seconds"]})
            for c in p["concurrency"]
        ]
    if workload == "rfc9693":
        # One trial (and a fresh topology) per RFC 9693 test: {"cer": {...}, ...}.
        return [(f"rfc9693/{sub}", {"test": sub, **q}) for sub, q in p.items()]
    return [(workload, dict(p))]


def plan(
    scenario: Scenario, only: list[str] | None = None
) -> list[tuple[str, list[Trial]]]:
    """``[(dut, [Trial...])]`` in run order (stateful workloads last per DUT)."""
    return plan_parts([(p.duts, p.workloads) for p in scenario.parts], only)


def plan_parts(
    parts: list[tuple[list[str], dict]], only: list[str] | None = None
) -> list[tuple[str, list[Trial]]]:
    """:func:`plan` of ``(duts, workloads)`` pairs (a scenario's parts, or those
    recorded in a run's meta.json)."""
    out: dict[str, list[Trial]] = {}
    for duts, workloads in parts:
        for dut in duts:
            if only and dut not in only:
                continue
            stateful = getattr(ADAPTERS.get(dut), "stateful", False)
            lst = out.setdefault(dut, [])
            for w, p in workloads.items():
                if w in STATEFUL and not stateful:
                    continue
                for key, params in expand(w, p):
                    if not any(t.key == key for t in lst):
                        lst.append(Trial(dut, w, key, params))
            lst.sort(key=lambda t: t.workload in STATEFUL)
    return list(out.items())


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str) + "\n")
    os.replace(tmp, path)  # a crash never leaves half a trial


def trial_status(out: Path, t: Trial) -> str | None:
    r = _read_trial(out, t.dut, t.key)
    return None if r is None else r.get("status")


def pending(meta: dict, duts: dict, trials: dict) -> list[tuple[str, list[Trial]]]:
    """The trials of a run's plan (``meta``'s parts, limited to the DUTs it was
    run with) that have no record, per DUT (``duts``: the DUT records, a skipped
    DUT has no trials to run; ``trials``: ``{dut: {key: record}}``). A run of an
    older version, which did not record its ``--duts``, counts only the DUTs it
    reached."""
    parts = meta.get("parts") or []
    if "only" in meta:
        only = meta["only"]
    else:
        only = sorted(set(duts) | set(trials)) or ["-"]
    out = []
    for dut, ts in plan_parts([(p["duts"], p["workloads"]) for p in parts], only):
        if "skipped" in duts.get(dut, {}):
            continue
        have = trials.get(dut, {})
        left = [t for t in ts if t.key not in have]
        if left:
            out.append((dut, left))
    return out


class DutStartError(RuntimeError):
    """The DUT did not start: its other trials of this invocation are not tried."""


class Run:
    def __init__(
        self,
        scenario: Scenario,
        out: Path,
        only: list[str] | None = None,
        budget_min: float | None = None,
    ):
        self.scenario = scenario
        self.out = out
        self.only = only
        self.budget_min = budget_min or scenario.budget_min
        self.plan = plan(scenario, only)
        self.deadline = 0.0
        self.started = 0.0
        self.done_count = 0
        self.total = 0
        # DUT -> why it did not start (its remaining trials are failed with it).
        self.start_failed: dict[str, str] = {}

    # -- helpers ------------------------------------------------------------------
    def progress(self, msg: str) -> None:
        el = time.monotonic() - self.started
        left = max(0.0, self.deadline - time.monotonic())
        log(
            f"[{self.done_count}/{self.total} | {el / 60:4.1f} min, budget left "
            f"{left / 60:4.1f} min] {msg}"
        )

    def _meta(self) -> dict:
        f = self.out / "meta.json"
        host = hostinfo.host()
        if f.exists():
            # (Of this scenario: run_scenario checked it, run_problem.) The
            # first invocation's host conditions stay the run's; each
            # resume's are kept beside them.
            meta = json.loads(f.read_text())
            # How the invocation before ended goes with this resume (it was
            # dropped: the report lost an interruption; found by a probe).
            before = {k: meta.pop(k) for k in ("finished", "interrupted") if k in meta}
            meta.setdefault("resumed", []).append(
                {"started": _now(), "host": host, **before}
            )
            # The DUTs of every invocation (None: all of the scenario's).
            if "only" in meta:
                was = meta["only"]
                meta["only"] = (
                    None
                    if was is None or self.only is None
                    else sorted(set(was) | set(self.only))
                )
        else:
            meta = {
                "scenario": self.scenario.name,
                "description": self.scenario.description,
                "parts": [
                    {
                        "title": p.title,
                        "duts": p.duts,
                        "workloads": p.workloads,
                        "reference": p.reference,
                    }
                    for p in self.scenario.parts
                ],
                "headline": self.scenario.headline,
                "started": _now(),
                "only": sorted(self.only) if self.only else None,
                "host": host,
            }
        meta.setdefault("host", host)
        meta["budget_min"] = self.budget_min
        return meta

    # -- the run ------------------------------------------------------------------
    def run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        todo = [
            (dut, [t for t in trials if trial_status(self.out, t) not in DONE])
            for dut, trials in self.plan
        ]
        done = _finished_meta(self.out)
        if done is not None and not any(ts for _, ts in todo):
            # A finished run with nothing left: recording a resume would
            # replace its end time and end load (what tells whether its
            # figures can be quoted) with an idle moment's (found by a probe).
            log(
                f"scenario {self.scenario.name}: every trial is done already, in {self.out}"
            )
            return done
        meta = self._meta()
        _write(self.out / "meta.json", meta)
        self.started = time.monotonic()
        self.deadline = self.started + self.budget_min * 60
        self.total = sum(len(ts) for _, ts in todo)
        skipped_done = sum(len(ts) for _, ts in self.plan) - self.total
        log(
            f"scenario {self.scenario.name}: {self.total} trial(s) to run"
            + (f", {skipped_done} already done (resumed)" if skipped_done else "")
            + f", budget {self.budget_min:g} min, results in {self.out}"
        )
        # A killed run's DUTs and servers go on running in its namespaces
        # and share the CPUs (a rerun after kill -9 said nothing; found by a
        # probe).
        if left := dead_runs():
            log(
                f"warning: leftovers of a lab run that was killed ({', '.join(left)}): "
                "its DUTs and servers may still be running and disturb this run's figures; "
                "`python -m lab cleanup` removes them"
            )
        elapsed0 = meta.get("elapsed_s", 0)
        try:
            for dut, trials in todo:
                if trials:
                    self.run_dut(dut, trials)
        except (KeyboardInterrupt, SystemExit) as e:
            # Ctrl-C, SIGTERM, SIGHUP: the topology is down (context managers);
            # the run says it was interrupted, and by what.
            meta["interrupted"] = {
                "at": _now(),
                "by": netns.stopped_by
                or ("SIGINT" if isinstance(e, KeyboardInterrupt) else "exit"),
            }
            raise
        else:
            meta["finished"] = _now()
        finally:
            # Summed over the invocations of a resumed run, interrupted ones too.
            meta["elapsed_s"] = round(elapsed0 + time.monotonic() - self.started, 1)
            meta["loadavg_end"] = os.getloadavg()
            meta["unfinished_trials"] = self.pending_count()
            _write(self.out / "meta.json", meta)
        return meta

    def pending_count(self) -> int:
        """How many trials of this invocation's plan have no record."""
        skipped = set()
        for f in (self.out / "duts").glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                if "skipped" in json.loads(f.read_text()):
                    skipped.add(f.stem)
        return sum(
            1
            for dut, ts in self.plan
            if dut not in skipped
            for t in ts
            if trial_status(self.out, t) is None
        )

    def run_dut(self, dut: str, trials: list[Trial]) -> int:
        """Run ``trials`` of one DUT; returns how many stay unfinished."""
        a = make_adapter(dut)
        rec_path = self.out / "duts" / f"{dut}.json"
        rec = {
            "name": dut,
            "description": a.description,
            "topology": a.topology,
            "role": a.role,
        }
        if rec_path.exists():  # a resume: keep what earlier invocations found
            with contextlib.suppress(OSError, ValueError):
                old = json.loads(rec_path.read_text())
                for k in ("prefixes", "flow", "stats", "instances"):
                    if k in old:
                        rec[k] = old[k]
        if not a.supports():
            self.progress(f"{dut}: SKIPPED: {a.why}")
            rec["skipped"] = a.why
            _write(rec_path, rec)
            self.done_count += len(trials)
            return 0
        self.progress(f"== {dut}: {a.description} (topology {a.topology})")
        left = list(trials)
        # Trials of a batch the time budget stopped: pending like `left`.
        unrun = 0
        while left:
            if time.monotonic() > self.deadline:
                self.progress(
                    f"{dut}: time budget spent, {len(left)} trial(s) left pending"
                )
                return unrun + len(left)
            if dut in self.start_failed:
                # It did not start for an earlier batch: not again (each try
                # costs a topology and the same error), its trials fail with it.
                self._fail(left, f"the DUT failed: {self.start_failed[dut]}")
                break
            # Stateful workloads each get a fresh topology and DUT (no state carried over).
            if left[0].workload in STATEFUL:
                batch = [left.pop(0)]
            else:  # every stateless trial of the DUT on one topology
                batch = []
                while left and left[0].workload not in STATEFUL:
                    batch.append(left.pop(0))
            # The DUT's record as soon as it runs (a kill -9 skips the finally).
            _write(rec_path, rec)
            try:
                unrun += self.run_batch(a, batch, rec, rec_path)
            except Unsupported as e:
                self.progress(f"{dut}: SKIPPED: {e}")
                rec["skipped"] = str(e)
                for t in [*batch, *left]:
                    _write(
                        self.out / "trials" / dut / t.file,
                        {**_trial_head(t), "status": "unsupported", "error": str(e)},
                    )
                left = []
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as e:  # noqa: BLE001 - the DUT failed: record, go on
                start = isinstance(e, DutStartError)
                self.progress(f"{dut}: FAILED{' to start' if start else ''}: {e}")
                rec["error"] = str(e)
                if start:
                    self.start_failed[dut] = str(e)
                # Its trials that did not run failed with it: recorded as
                # errors (the run fails, the report lists them, a resume
                # retries them), not left out.
                self._fail(
                    [t for t in batch if trial_status(self.out, t) is None],
                    f"the DUT failed: {e}",
                )
            finally:
                _write(rec_path, rec)
        return unrun

    def _fail(self, trials: list[Trial], error: str) -> None:
        for t in trials:
            self.done_count += 1
            _write(
                self.out / "trials" / t.dut / t.file,
                {**_trial_head(t), "status": "error", "error": error},
            )

    def run_batch(self, a, batch: list[Trial], rec: dict, rec_path: Path) -> int:
        """Runs ``batch`` on one topology; returns how many of its trials the
        time budget left pending. Raises :class:`DutStartError` if the DUT did
        not start (stopped all the same: what it started is undone)."""
        build = TOPOLOGIES[a.topology]
        prefix = random_prefix(LAB_PREFIX)
        rec.setdefault("prefixes", []).append(prefix)
        _write(rec_path, rec)
        # The workloads' servers of this topology (nginx), started at the first
        # trial that needs one: a server that does not start fails those
        # trials, not the DUT.
        servers: dict = {}
        with claim(prefix), build(prefix) as topo:
            try:
                try:
                    a.start(topo)
                except (Unsupported, KeyboardInterrupt, SystemExit):
                    raise
                except Exception as e:
                    raise DutStartError(str(e)) from e
                flow = a.flow(topo)
                rec["flow"] = {
                    "direction": flow.direction,
                    "src": flow.src_addr,
                    "dst": flow.dst_addr,
                }
                _write(rec_path, rec)
                if not wait_reachable(flow):
                    raise RuntimeError(
                        f"{flow.dst_addr} not reachable from {flow.src_ns}"
                    )
                for i, t in enumerate(batch):
                    if time.monotonic() > self.deadline:
                        self.progress(
                            f"{t.dut}: time budget spent, {len(batch) - i} trial(s) left pending"
                        )
                        if i:  # the counters of the trials run, before stop()
                            _record_stats(rec, prefix, batch[:i], a.stats())
                        return len(batch) - i
                    self.run_trial(a, topo, flow, t, servers)
                _record_stats(rec, prefix, batch, a.stats())
            except Exception:
                # The DUT's log before stop() removes it (the error is the
                # caller's to record).
                if tail := a.log_tail():
                    rec["log_tail"] = tail
                raise
            finally:
                if (server := servers.get("http")) is not None:
                    server.stop()
                a.stop()
        return 0

    def _nginx(self, topo, flow, servers: dict):
        """The topology's nginx (started by the first HTTP trial); a start that
        failed is not retried: the later HTTP trials fail with its error."""
        if "http_error" in servers:
            raise RuntimeError(servers["http_error"])
        if servers.get("http") is None:
            servers["http"] = w_http.Nginx(
                topo.lab, flow.dst_ns, flow.dst_local or flow.sink_bind
            )
            try:
                servers["http"].start()
            except Exception as e:
                servers["http_error"] = str(e)
                raise
        return servers["http"]

    def run_trial(self, a, topo, flow, t: Trial, servers: dict) -> None:
        self.done_count += 1
        self.progress(f"{t.dut} {t.key}")
        head = _trial_head(t)
        head["direction"] = flow.direction
        t0 = time.monotonic()
        # Another lab run measuring at the same time shares the CPUs: its
        # trials and this one's disturb each other, which nothing in the
        # figures shows (two runs at once were not told; found by a probe).
        others = set(other_runs())
        try:
            with CpuSampler(a.cpu_pids()) as cpu:
                out = self.call(a, topo, flow, t, servers)
            rec = {**head, "status": "ok", **out, "cpu": cpu.result()}
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # noqa: BLE001 - one failed trial does not stop the run
            self.progress(f"{t.dut} {t.key}: FAILED: {e}")
            rec = {
                **head,
                "status": "error",
                "error": str(e),
                "traceback": traceback.format_exc()[-2000:],
            }
        rec["elapsed_s"] = round(time.monotonic() - t0, 2)
        rec["finished"] = _now()
        others |= set(other_runs())
        if others:
            rec["concurrent_lab_runs"] = sorted(others)
            self.progress(
                f"{t.dut} {t.key}: another lab run (pid {', '.join(map(str, sorted(others)))}) "
                "was measuring at the same time: this trial's figures are disturbed"
            )
        _write(self.out / "trials" / t.dut / t.file, rec)
        if rec["status"] == "ok":
            self.progress(f"{t.dut} {t.key}: {_brief(rec)}")

    def _ping_beside(self, flow, topo, other: str, p: dict) -> dict:
        """The ping workload with DUT ``other`` in its own topology pinged at
        the same time (lab/workloads/ping.py). If ``other`` cannot run, the
        DUT is pinged alone and the result says why (``beside_error``)."""

        def alone(why: str) -> dict:
            out = self.call_ping(flow, topo, p)
            out["result"]["beside_error"] = f"{other}: {why}"
            return out

        b = make_adapter(other)
        if not b.supports():
            return alone(b.why)
        prefix = random_prefix(LAB_PREFIX)
        with claim(prefix), TOPOLOGIES[b.topology](prefix) as btopo:
            try:
                try:
                    b.start(btopo)
                    bflow = b.flow(btopo)
                    if not wait_reachable(bflow):
                        raise RuntimeError(
                            f"{bflow.dst_addr} not reachable from {bflow.src_ns}"
                        )
                except (KeyboardInterrupt, SystemExit):
                    raise
                except Exception as e:  # noqa: BLE001 - the DUT's own figure still counts
                    self.progress(f"ping beside {other}: it did not start: {e}")
                    return alone(str(e))
                out = self.call_ping(flow, topo, p, beside=(other, bflow))
                out["result"]["beside"]["prefix"] = prefix
                return out
            finally:
                b.stop()

    def call_ping(self, flow, topo, p: dict, beside=None) -> dict:
        return w_ping.ping(
            flow,
            count=p["count"],
            namespaces=topo.ns if p.get("segments") else None,
            beside=beside,
            warm_count=p.get("warm_count", 0),
        )

    def prior(self, dut: str, key: str) -> dict | None:
        r = _read_trial(self.out, dut, key)
        return r.get("result") if r is not None and r.get("status") == "ok" else None

    def _rate(self, a, flow, p: dict) -> int:
        """Latency/PDV rate: a fraction of this DUT's measured throughput (or of a probe)."""
        thr = self.prior(a.name, "throughput/min")
        base = (
            thr["fps"]
            if thr and thr.get("fps")
            else w_perf.probe(flow, flow.frame_size)
        )
        return max(100, int(base * p.get("rate_fraction", 0.5)))

    def call(self, a, topo, flow, t: Trial, servers: dict) -> dict:
        p = t.params
        w = t.workload
        if w == "throughput":
            return w_perf.throughput(
                flow,
                p["frame_size"],
                trial=p["trial"],
                max_trials=p["max_trials"],
                repeat=p.get("repeat", 1),
            )
        if w == "flr":
            return w_perf.frame_loss(flow, trial=p["trial"], steps=p.get("steps", 10))
        if w == "latency":
            return w_perf.latency(
                flow,
                rate=self._rate(a, flow, p),
                duration=p["duration"],
                warmup=p["warmup"],
                tagged=p.get("tagged", 500),
            )
        if w == "pdv":
            return w_perf.pdv(flow, rate=self._rate(a, flow, p), duration=p["duration"])
        if w == "tcp":
            return w_tcp.tcp(
                flow, streams=p["streams"], seconds=p["seconds"], reverse=p["reverse"]
            )
        if w == "ping":
            # The baseline too is pinged beside a second lab of its own:
            # pinged alone, with half the wake-ups, its echoes met colder
            # CPUs and its own row read 1.2-2.5x its figure beside the
            # DUTs (found by a probe). Its ratio to itself is then the
            # noise of the moment.
            if other := p.get("beside"):
                return self._ping_beside(flow, topo, other, p)
            return self.call_ping(flow, topo, p)
        if w == "http":
            return w_http.http(
                flow,
                topo,
                profile=p["profile"],
                concurrency=p["concurrency"],
                seconds=p["seconds"],
                server=self._nginx(topo, flow, servers),
            )
        if w == "tcp_cps":
            return w_http.tcp_cps(
                flow,
                concurrency=p["concurrency"],
                seconds=p["seconds"],
                server=self._nginx(topo, flow, servers),
            )
        if w == "conn_rate":
            return w_nat64.conn_rate(
                a,
                topo,
                flow,
                trial=p["trial"],
                max_trials=p["max_trials"],
                start_rate=p["start_rate"],
                max_rate=p["max_rate"],
                deadline=self.deadline,
            )
        if w == "scale":
            return w_nat64.scale(
                a,
                topo,
                flow,
                sessions=p["sessions"],
                trial=p["trial"],
                max_trials=p["max_trials"],
                est_max_rate=p["est_max_rate"],
                deadline=self.deadline,
            )
        if w == "rfc9693":
            return w_rfc9693.run(a, topo, flow, p["test"], p)
        raise ValueError(f"unknown workload {w}")


def _finished_meta(out: Path) -> dict | None:
    """The meta.json of run directory ``out`` if its last invocation
    finished (not interrupted), else None."""
    try:
        meta = json.loads((out / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if "finished" in meta and "interrupted" not in meta else None


def _trial_head(t: Trial) -> dict:
    return {"dut": t.dut, "workload": t.workload, "key": t.key, "params": t.params}


def _brief(rec: dict) -> str:
    r = rec.get("result", {})
    w = rec["workload"]
    cpu = rec.get("cpu", {})
    c = f", DUT CPU {cpu['process_pct']}%" if cpu.get("process_pct") is not None else ""
    if w == "throughput":
        from lab.report import no_valid_trial

        if no_valid_trial(r):  # its 0 is no measurement
            return (
                f"no valid trial ({r['invalid_trials']} of {r['trials']} invalid: "
                f"the tester fell behind) at {r['frame_size']} B{c}"
            )
        return f"{r['fps']:,.0f} fps at {r['frame_size']} B{c}"
    if w == "tcp":
        return f"{r['gbps']:.2f} Gbit/s{c}"
    if w == "ping":
        seg = r.get("segments")
        where = ""
        if seg:
            hops = ", ".join(
                f"{h['ns']} {h['request_us']}+{h['reply_us']}" for h in seg["hops"]
            )
            where = f"; captured: wire {seg['wire_rtt_us']} us = {hops}, far host {seg['far_host_us']} us"
        return f"RTT median {r['rtt_ms']['median']:.3f} ms{where}"
    if w == "http":
        return f"{r['requests']} requests, median RTT {r['rtt_ms'].get('median', 0):.2f} ms, {r['errors']} errors{c}"
    if w == "tcp_cps":
        return f"{r['cps']:,.0f} TCP connections/s, {r['failed']} failed{c}"
    if w == "latency":
        return f"typical {r['typical_us']} us, worst {r['worst_us']} us"
    if w == "pdv":
        return f"PDV {r['pdv_us']} us"
    if w == "conn_rate":
        from lab.report import no_valid_conn_rate

        if no_valid_conn_rate(r):
            n = len(r["trials"])
            return f"no valid trial ({n} of {n} invalid)"
        return f"{r['flows_per_s']:,} new flows/s"
    if w == "rfc9693":
        return w_rfc9693.brief(r)
    if w == "scale":
        return ", ".join(
            f"{p['target_sessions']}: {p['zero_loss_fps']:,.0f} fps"
            for p in r["points"]
        )
    return "done"


def _record_stats(rec: dict, prefix: str, trials: list[Trial], stats) -> None:
    """A DUT instance's counters into its record: ``stats`` (the last
    instance's) and, per instance, ``instances`` (a stateful workload gets a
    fresh DUT per trial, whose counters the next one's replaced)."""
    if stats is None:
        return
    rec["stats"] = stats
    rec.setdefault("instances", []).append(
        {"prefix": prefix, "trials": [t.key for t in trials], "stats": stats}
    )


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def default_out(name: str) -> Path:
    base = Path(os.environ.get("LAB_RESULTS", str(repo_root() / "results")))
    return base / f"{name}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


# The results directories this process writes, each held by a lock on its
# `.lock` file for the life of the process.
_HELD: dict[Path, object] = {}
# The directory the last lock_out took (it may differ from the one asked).
last_out: Path | None = None


def lock_out(out: Path, fresh: bool) -> Path:
    """Takes ``out`` for this run: an exclusive lock on ``out/.lock`` (holding
    this process's pid), kept until the process ends. Two runs into one
    directory overwrote each other's trials and measured at the same time
    (found by a probe): a directory another run holds is refused, or, for a
    ``fresh`` default directory (the same scenario started in the same
    second), the next free name ``NAME-2``, ``NAME-3``, ... is taken."""
    import fcntl

    base, n = out, 2
    while True:
        out.mkdir(parents=True, exist_ok=True)
        f = open(out / ".lock", "a+")  # noqa: SIM115 (held open: the lock)
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            pid = f.read().strip() or "?"
            f.close()
            if not fresh:
                raise SystemExit(
                    f"lab: --out {out}: another lab run (pid {pid}) is writing there; "
                    "wait for it to end or use another --out"
                ) from None
            out = base.with_name(f"{base.name}-{n}")
            n += 1
            continue
        if fresh and (out / "meta.json").exists():
            # A run of the same second that has already ended: not ours to resume.
            f.close()
            out = base.with_name(f"{base.name}-{n}")
            n += 1
            continue
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        _HELD[out] = f
        global last_out
        last_out = out
        return out


def say(msg: str) -> None:
    """One line to stderr; nothing if the terminal is gone (SIGHUP)."""
    with contextlib.suppress(OSError, ValueError):
        print(msg, file=sys.stderr, flush=True)


def interrupted(e: BaseException, out: Path | None, who: str = "lab") -> int:
    """The one-line message of a run stopped by Ctrl-C, SIGTERM or SIGHUP (no
    traceback), and its exit status (130 for Ctrl-C, 128 + the signal)."""
    msg = f"{who}: interrupted"
    if out is not None and (out / "meta.json").exists():
        msg += (
            f"; the trials are saved in {out}, `python -m lab report {out}` "
            "writes the report"
        )
    say(msg)
    if isinstance(e, SystemExit) and isinstance(e.code, int):
        return e.code
    return 130


def signalled(e: BaseException) -> bool:
    """Ctrl-C, or the SystemExit of SIGTERM / SIGHUP (not a plain exit)."""
    return isinstance(e, KeyboardInterrupt) or netns.stopped_by is not None


def run_problem(
    name: str, out: Path, only: list[str] | None, budget_min: float | None
) -> str | None:
    """Why scenario ``name`` cannot run into ``out`` with these options (checked
    before anything is created), or None."""
    sc = SCENARIOS.get(name)
    if sc is None:
        return f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}"
    duts = sorted({d for p in sc.parts for d in p.duts})
    bad = [d for d in only or [] if d not in duts]
    if bad:
        return f"--duts {','.join(bad)}: not in scenario {name} (its DUTs: {', '.join(duts)})"
    if budget_min is not None and not 0 < budget_min < float("inf"):
        return f"--budget-min {budget_min:g}: must be more than 0 minutes (and finite)"
    if out.exists() and not out.is_dir():
        return f"--out {out}: not a directory"
    meta = out / "meta.json"
    if (
        out.is_dir()
        and not meta.exists()
        and any(f.name != ".lock" for f in out.iterdir())  # (lock_out's own)
    ):
        # Not a run of the lab: its files would be mixed with the results
        # (found by a probe: meta.json, duts/ and plots/ beside a notes file).
        return f"--out {out}: an existing directory that is not a lab run (no meta.json): give a new or empty one"
    if meta.exists():
        try:
            held = json.loads(meta.read_text()).get("scenario")
        except (OSError, ValueError) as e:
            return f"--out {out}: unreadable meta.json ({e})"
        if held != name:
            return (
                f"--out {out} holds scenario {held!r}, not {name!r}: use another --out"
            )
    return None


def run_scenario(
    name: str,
    out: Path | None = None,
    only: list[str] | None = None,
    budget_min: float | None = None,
    fresh: bool | None = None,
) -> tuple[Path, dict]:
    """Runs scenario ``name`` into ``out`` (default: a new directory named
    after it and the time; ``fresh``, default: whether ``out`` was None, lets
    it move to the next free name)."""
    if fresh is None:
        fresh = out is None
    out = out or default_out(name)
    if why := run_problem(name, out, only, budget_min):
        raise SystemExit(f"lab: {why}")
    if os.geteuid() != 0:
        raise SystemExit("lab: must run as root (network namespaces)")
    try:
        out = lock_out(out, fresh)
    except OSError as e:
        raise SystemExit(f"lab: --out {out}: {e.strerror or e}") from None
    # SIGTERM -> SystemExit, so every topology's cleanup runs (as on Ctrl-C);
    # a second signal does not interrupt it.
    netns.stop_on_first_signal()
    meta = Run(SCENARIOS[name], out, only, budget_min).run()
    return out, meta
