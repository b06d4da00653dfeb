"""The control socket, the metrics endpoint and signals of a running xlat."""

from __future__ import annotations

import re
import signal
import time
import tomllib
from pathlib import Path

import pytest
from conftest import (
    DATAPATHS,
    ROOT,
    XLAT,
    close_siit,
    first_packet,
    first_packet_line,
    ingress_progs,
    make_siit,
    need_tool,
    ping,
)


def _drop_reason_names() -> list[str]:
    """Every DropReason name() from crates/xlat-core/src/counters.rs."""
    src = (ROOT / "crates/xlat-core/src/counters.rs").read_text()
    body = src.split("reasons! {", 1)[1].split("\n}\n", 1)[0]
    return re.findall(r'^\s*[A-Z]\w* = "([a-z0-9_]+)",', body, re.MULTILINE)


@pytest.mark.timeout(30)
def test_stats_lists_every_counter(siit_mod):
    _t, x = siit_mod
    names = _drop_reason_names()
    assert len(names) > 30
    text = x.cli("stats").stdout
    lines = dict(ln.split()[:2] for ln in text.splitlines() if ln.strip())
    for n in [
        "translated_4to6_packets",
        "translated_4to6_bytes",
        "translated_6to4_packets",
        "translated_6to4_bytes",
        "icmp_errors_sent",
        "fragments_emitted",
        "tun_read_errors",
        *names,
    ]:
        assert n in lines, f"{n} missing from `xlat stats`"
        assert lines[n].isdigit()
    js = x.stats()
    for n in names:
        assert n in js, f"{n} missing from `xlat stats --json`"


@pytest.mark.timeout(30)
def test_stats_via_config_file(siit_mod):
    """Client commands accept -c FILE instead of -s SOCKET."""
    _t, x = siit_mod
    cp = x.cli("stats", "-c", x.conf, sock=False)
    assert "translated_6to4_packets" in cp.stdout


@pytest.mark.timeout(30)
def test_show_config_fills_defaults(siit_mod):
    t, x = siit_mod
    cfg = tomllib.loads(x.cli("show", "config").stdout)
    assert cfg["mode"] == "siit"
    assert cfg["pool6"] == t.pool6
    assert [(e["ipv4"], e["ipv6"]) for e in cfg["eamt"]] == t.eamt
    assert cfg["lowest-ipv6-mtu"] == 1280
    assert cfg["amend-udp-checksum-zero"] is False
    assert cfg["mtu-plateaus"][0] == 65535
    assert cfg["tun"]["name"] == "xlat0"
    assert cfg["tun"]["mtu"] == 1500
    assert cfg["tun"]["ipv4-routes"] == t.ipv4_routes
    assert cfg["control"]["socket"] == x.sock
    assert cfg["log"]["level"] == "info"


def _ping_from_spare(t, count=2):
    return t.lab.exec(
        t.h6,
        [
            "ping",
            "-n",
            "-c",
            str(count),
            "-i",
            "0.05",
            "-W",
            "1",
            "-I",
            t.h6_spare,
            t.h4_v6,
        ],
        check=False,
        timeout=15,
    )


@pytest.mark.timeout(40)
def test_eamt_add_list_remove(siit_fn):
    """RFC 7757 section 3: EAM entries added/removed at run time change translation."""
    t, x = siit_fn
    v4, v6 = t.spare_eam
    before = x.stats()["src6_unmappable"]
    assert _ping_from_spare(t).returncode != 0
    assert x.stats()["src6_unmappable"] >= before + 2
    x.cli("eamt", "add", v4, v6)
    listed = x.cli("eamt", "list").stdout
    assert v4 in listed and v6 in listed, listed
    cp = _ping_from_spare(t)
    assert cp.returncode == 0, cp.stdout + x.log()
    # And from the IPv4 side to the newly mapped address.
    assert ping(t.lab, t.h4, t.h6_spare_v4, count=2).returncode == 0
    x.cli("eamt", "remove", v4)
    assert v4 not in x.cli("eamt", "list").stdout
    assert _ping_from_spare(t).returncode != 0
    # The configured entry is untouched.
    assert ping(t.lab, t.h6, t.h4_v6, count=1).returncode == 0


def _source_seen_by_h4(t, x) -> str:
    """The IPv4 source of h6's echo request as h4 receives it."""
    cap = first_packet(t.lab, t.h4, "icmp and icmp[icmptype] == 8")
    ping(t.lab, t.h6, t.h4_v6, count=1)
    line = first_packet_line(t.lab, cap)
    m = re.search(r"IP (\S+) > ", line)
    assert m, (line, x.stats())
    return m.group(1)


@pytest.mark.timeout(40)
def test_rfc7757_nested_eam_entries_longest_prefix_wins(siit_fn):
    """RFC 7757 sections 3.2 / 3.3: entries may nest; the longest prefix of the
    address's own family matches. h6 (2001:db8:6::2) is 192.0.2.2 through the
    configured 192.0.2.0/28 <-> 2001:db8:6::/124; a /128 inside it maps h6 to
    192.0.2.99 alone, both ways, on both datapaths, until it is removed (nested
    entries were refused as overlaps)."""
    t, x = siit_fn
    assert _source_seen_by_h4(t, x) == t.h6_v4
    x.cli("eamt", "add", "192.0.2.99/32", f"{t.h6_addr}/128")
    assert _source_seen_by_h4(t, x) == "192.0.2.99"
    cp = ping(t.lab, t.h4, "192.0.2.99", count=2)
    assert cp.returncode == 0, cp.stdout + x.log()
    # The outer entry still maps the rest of its /28 (4->6 by the /28).
    assert ping(t.lab, t.h4, t.h6_v4, count=1).returncode == 0
    x.cli("eamt", "remove", "192.0.2.99/32")
    assert _source_seen_by_h4(t, x) == t.h6_v4
    assert ping(t.lab, t.h4, "192.0.2.99", count=1).returncode != 0


@pytest.mark.timeout(30)
def test_eam_entry_routed_into_the_tun_on_both_sides_is_noted(siit_fn, tmp_path):
    """An EAM entry for servers behind the IPv4 default route (RFC 7757, SIIT-DC
    style) with no route of its own for either side: xlat routes both sides into
    the TUN, and every packet to it loops until its TTL runs out. `xlat check`
    said "ok", the log and `eamt add` said nothing (found by a probe); each now
    says so. With a route for the IPv4 side (where its hosts are) it is fine."""
    t, x = siit_fn
    cp = x.cli("eamt", "add", "203.0.113.0/28", "2001:db8:99::/124")
    assert (
        "note: both sides of the EAM entry 203.0.113.0/28 2001:db8:99::/124 are "
        "routed into the TUN" in cp.stdout
    ), cp.stdout
    t.lab.exec(t.router, ["ip", "route", "add", "203.0.113.16/28", "via", t.h4_addr])
    cp = x.cli("eamt", "add", "203.0.113.16/28", "2001:db8:99::10/124")
    assert "note:" not in cp.stdout, cp.stdout
    # A /0 side is not routed at all (it would replace the default route):
    # `eamt add` says so as `xlat check` does (it said nothing; a probe).
    cp = x.cli("eamt", "add", "192.0.2.200/32", "::/0", check=False)
    assert "its side ::/0 is not routed into the TUN" in cp.stdout, cp
    x.cli("eamt", "remove", "192.0.2.200/32")
    # `xlat check` in the router's namespace, on a file with both entries.
    conf = tmp_path / "loop.toml"
    conf.write_text(
        x.conf.read_text()
        + '\n[[eamt]]\nipv4 = "203.0.113.0/28"\nipv6 = "2001:db8:99::/124"\n'
        + '\n[[eamt]]\nipv4 = "203.0.113.16/28"\nipv6 = "2001:db8:99::10/124"\n'
    )
    cp = t.lab.exec(t.router, [str(XLAT), "check", "-c", str(conf)], check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    n = len(t.eamt)
    assert (
        f"note: eamt[{n}]: both sides of the EAM entry 203.0.113.0/28" in cp.stderr
    ), cp.stderr
    assert f"eamt[{n + 1}]" not in cp.stderr, cp.stderr
    # A reload with that file: the log warns (as at start).
    before = x.log().count("configuration reloaded")
    x.write_config(conf.read_text())
    x.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while x.log().count("configuration reloaded") == before:
        assert time.monotonic() < deadline, x.log()[-2000:]
        time.sleep(0.05)
    log = x.log()
    assert "EAM entry routed into the tun on both sides" in log, log[-2000:]
    warned = [ln for ln in log.splitlines() if "a routing loop" in ln]
    assert all("ipv4=203.0.113.0/28 " in ln for ln in warned), warned


@pytest.mark.timeout(30)
def test_eamt_add_rejects_bad_entry(siit_fn):
    t, x = siit_fn
    cp = x.cli("eamt", "add", "192.0.2.16/28", "2001:db8:6::10/120", check=False)
    assert cp.returncode != 0
    cp = x.cli("eamt", "add", t.eamt[0][0], "2001:db8:7::/124", check=False)
    assert cp.returncode != 0, "a second mapping of the same IPv4 prefix accepted"
    # Only the IPv4 side is the configured entry's: ambiguous, not a duplicate.
    assert "IPv4 prefix is already mapped by the entry" in cp.stderr, cp.stderr
    # An IPv6 prefix that cannot hold the IPv4 suffix (RFC 7757 section 3.2).
    cp = x.cli("eamt", "add", "10.5.0.0/16", "2001:db8:5::/120", check=False)
    assert cp.returncode == 1 and "cannot hold the IPv4 suffix" in cp.stderr
    # A side no host can be in (it routed ff02::/112 or 127.0.0.0/24 into the TUN).
    for v4, v6 in (
        ("10.6.0.0/16", "ff02::/112"),
        ("127.0.0.0/24", "2001:db8:99::/120"),
    ):
        cp = x.cli("eamt", "add", v4, v6, check=False)
        assert cp.returncode == 1 and "no host there" in cp.stderr, cp.stderr
    routes = t.lab.exec(t.router, ["ip", "-6", "route"]).stdout
    assert "ff02::/112" not in routes, routes
    # An IPv4 side the (default) denylist drops would translate one way only.
    cp = x.cli("eamt", "add", "169.254.3.0/24", "2001:db8:e023::/120", check=False)
    assert cp.returncode == 1, cp
    assert "lies inside the denylist4 entry 169.254.0.0/16" in cp.stderr, cp.stderr
    assert "169.254.3.0/24" not in x.cli("eamt", "list").stdout
    # The sides swapped, and a prefix with host bits: each error says what is wrong.
    cp = x.cli("eamt", "add", "2001:db8:6::20/124", "192.0.2.32/28", check=False)
    assert "the IPv4 prefix comes first" in cp.stderr, cp.stderr
    cp = x.cli("eamt", "remove", "192.0.2.1/28", check=False)
    assert cp.returncode != 0 and "beyond the prefix length" in cp.stderr, cp.stderr
    assert x.alive()
    # A static BIB command outside NAT64 mode is refused, and leaves the
    # daemon's state unlocked (the next request is answered).
    for args in (
        ("add", "tcp", "2001:db8:6::2#80", "192.0.2.1#80"),
        ("remove", "tcp", "192.0.2.1#80"),
    ):
        cp = x.cli("bib", *args, check=False)
        assert cp.returncode == 1, cp
        assert 'bib and session commands need mode = "nat64"' in cp.stderr, cp.stderr
    assert t.eamt[0][0] in x.cli("eamt", "list").stdout


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_metrics_endpoint(datapath):
    """[metrics] listen: Prometheus text with the counters that moved (the TUN
    datapath's series, or with the eBPF fast path its own, docs/datapaths.md)."""
    need_tool("curl")
    before_start = time.time()
    t, x = make_siit(extra='[metrics]\nlisten = "[::1]:9464"\n', datapath=datapath)
    after_start = time.time()
    try:
        assert ping(t.lab, t.h6, t.h4_v6, count=4).returncode == 0
        deadline = time.monotonic() + 5
        while True:
            cp = t.lab.exec(
                t.router,
                ["curl", "-sS", "--max-time", "3", "http://[::1]:9464/metrics"],
                check=False,
            )
            if cp.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert cp.returncode == 0, cp.stderr
        series = (
            "xlat_ebpf_packets_total" if datapath == "ebpf" else "xlat_packets_total"
        )
        for d, size in (("6to4", 84), ("4to6", 104)):
            m = re.search(
                rf'^{series}\{{direction="{d}"\}} (\d+)$', cp.stdout, re.MULTILINE
            )
            assert m and int(m.group(1)) >= 4, cp.stdout[:3000]
            # Bytes of the translated IP packets, on either datapath (the
            # fast path had no byte count): 56-byte echoes are 84-byte IPv4
            # and 104-byte IPv6 packets.
            b = re.search(
                rf'^{series.replace("packets", "bytes")}\{{direction="{d}"\}} (\d+)$',
                cp.stdout,
                re.MULTILINE,
            )
            assert b and int(b.group(1)) == size * int(m.group(1)), cp.stdout[:3000]
        if datapath == "ebpf":
            assert 'xlat_ebpf_passed_total{reason="ttl"}' in cp.stdout
            assert "xlat_ebpf_dropped_total 0" in cp.stdout
        for n in _drop_reason_names():
            assert f'xlat_drops_total{{reason="{n}"}}' in cp.stdout, n
        # When the daemon started (a scraper tells a restart from a reset).
        m = re.search(r"^xlat_start_time_seconds (\S+)$", cp.stdout, re.MULTILINE)
        assert m and before_start <= float(m.group(1)) <= after_start, cp.stdout[:500]
        assert "# TYPE xlat_start_time_seconds gauge" in cp.stdout
        # The endpoint listens only inside the router namespace.
        other = t.lab.exec(
            t.h6,
            ["curl", "-sS", "--max-time", "1", "http://[::1]:9464/metrics"],
            check=False,
        )
        assert other.returncode != 0
    finally:
        close_siit(t, x)


@pytest.mark.timeout(40)
def test_sighup_invalid_config_keeps_running(siit_fn):
    t, x = siit_fn
    old = x.cli("show", "config").stdout
    x.write_config("mode = 'bridge'\npool6 = 'nope'\n")
    x.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while x.stats().get("config_reload_failures", 0) < 1:
        assert time.monotonic() < deadline, "reload failure not counted:\n" + x.log()
        time.sleep(0.05)
    assert x.alive()
    assert x.cli("show", "config").stdout == old
    assert ping(t.lab, t.h6, t.h4_v6, count=2).returncode == 0


@pytest.mark.timeout(40)
def test_sighup_with_another_mode_is_refused_whole(siit_fn):
    """A file for another mode has nothing the running mode can use: the
    reload is refused and nothing of it applies (it used to empty the EAMT
    and show a [clat] section under mode = "siit")."""
    t, x = siit_fn
    old = x.cli("show", "config").stdout
    v4, v6 = t.spare_eam
    text = x.conf.read_text().replace('mode = "siit"', 'mode = "clat"', 1)
    assert text != x.conf.read_text(), text
    text = text.replace("[tun]", f'[clat]\nipv4 = "{v4}"\nipv6 = "{v6}"\n\n[tun]', 1)
    x.write_config(text)
    x.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while x.stats().get("config_reload_failures", 0) < 1:
        assert time.monotonic() < deadline, "reload failure not counted:\n" + x.log()
        time.sleep(0.05)
    assert "key=mode" in x.log(), x.log()
    assert x.alive()
    assert x.cli("show", "config").stdout == old
    assert ping(t.lab, t.h6, t.h4_v6, count=2).returncode == 0


@pytest.mark.timeout(40)
def test_sighup_with_another_mode_and_errors_names_the_mode_first(siit_fn):
    """docs/configuration.md: a file with another mode is refused whole,
    logged with key=mode. A NAT64 file that is also invalid for NAT64 (the
    SIIT EAMT kept, no pool4) used to be logged with its other errors only."""
    t, x = siit_fn
    old = x.cli("show", "config").stdout
    text = x.conf.read_text().replace('mode = "siit"', 'mode = "nat64"', 1)
    assert text != x.conf.read_text(), text
    x.write_config(text)
    x.signal(signal.SIGHUP)
    x.wait_log("reloading configuration")
    deadline = time.monotonic() + 5
    while x.stats().get("config_reload_failures", 0) < 1:
        assert time.monotonic() < deadline, "reload failure not counted:\n" + x.log()
        time.sleep(0.05)
    log = x.log().split("reloading configuration", 1)[1]
    rejected = [ln for ln in log.splitlines() if "reload rejected" in ln]
    assert len(rejected) >= 2, log
    assert "key=mode value=nat64" in rejected[0], log
    assert "the running mode is siit" in rejected[0], log
    assert x.alive()
    assert x.cli("show", "config").stdout == old
    assert ping(t.lab, t.h6, t.h4_v6, count=2).returncode == 0


@pytest.mark.timeout(40)
def test_sigusr1_and_sigusr2_are_logged_and_ignored(siit_fn):
    """SIGUSR1/SIGUSR2 (sent by log rotation to many daemons) used to end xlat at once,
    unlogged and without clean-up. They are logged and ignored; it keeps translating."""
    t, x = siit_fn
    for sig, name in ((signal.SIGUSR1, "SIGUSR1"), (signal.SIGUSR2, "SIGUSR2")):
        x.signal(sig)
        x.wait_log(f'msg="signal ignored" signal={name}')
    assert x.alive(), x.log()
    assert ping(t.lab, t.h6, t.h4_v6, count=2).returncode == 0
    pre = "ebpf_" if x.datapath == "ebpf" else ""
    assert x.stats()[f"{pre}translated_6to4_packets"] >= 2


@pytest.mark.timeout(40)
def test_sighup_valid_config_reloads(siit_fn):
    """Reload applies a changed EAMT without restarting."""
    t, x = siit_fn
    v4, v6 = t.spare_eam
    assert _ping_from_spare(t, count=1).returncode != 0
    text = x.conf.read_text().replace(
        "[tun]", f'[[eamt]]\nipv4 = "{v4}"\nipv6 = "{v6}"\n\n[tun]', 1
    )
    x.write_config(text)
    x.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while x.stats().get("config_reloads", 0) < 1:
        assert time.monotonic() < deadline, "reload not counted:\n" + x.log()
        time.sleep(0.05)
    assert x.alive()
    cp = _ping_from_spare(t)
    assert cp.returncode == 0, cp.stdout + x.log()


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_sigterm_removes_device_routes_and_socket(datapath):
    t, x = make_siit(datapath=datapath)
    try:
        assert "xlat0" in t.lab.links(t.router)

        def tc_filters() -> str:
            return "".join(
                "".join(ingress_progs(t.lab, t.router, dev)) for dev in (t.dev4, t.dev6)
            )

        assert ("xlat_ingress" in tc_filters()) == (datapath == "ebpf")
        x.signal(signal.SIGTERM)
        rc = x.proc.wait(timeout=10)
        assert rc == 0, x.log()
        # The fast path's programs are detached too (docs/datapaths.md).
        assert "xlat_ingress" not in tc_filters()
        assert "xlat0" not in t.lab.links(t.router)
        routes = (
            t.lab.ip(t.router, "-6", "route").stdout
            + t.lab.ip(t.router, "route").stdout
        )
        assert "xlat0" not in routes
        assert t.pool6 not in routes

        assert not Path(x.sock).exists()
    finally:
        close_siit(t, x)
