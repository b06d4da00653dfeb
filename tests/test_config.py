"""Bad configuration files: one case per validation rule of the daemon contract.

`xlat check -c FILE` exits 2 with `error: <key>: <value>: <reason>` naming the
key; `xlat run -c FILE` refuses to start (non-zero) and touches nothing: no TUN
device, no control socket.
"""

from __future__ import annotations

import re

import pytest
from conftest import need_xlat

from lab.netns import Lab, run

POOL6 = 'pool6 = "2001:db8:64::/96"\n'

# (id, config text, key that must be named). RFC sections where a rule comes from one.
BAD = [
    ("syntax", "pool6 = \n", None),
    ("mode_unknown", 'mode = "bridge"\n' + POOL6, "mode"),
    ("mode_nat64_needs_pool4_rfc6146_3_5", 'mode = "nat64"\n' + POOL6, "nat64.pool4"),
    ("pool6_not_prefix", 'pool6 = "not-a-prefix"\n', "pool6"),
    ("pool6_length_rfc6052_2_2", 'pool6 = "2001:db8:64::/33"\n', "pool6"),
    ("pool6_u_octet_rfc6052_2_2", 'pool6 = "2001:db8:64:0:ff00::/96"\n', "pool6"),
    ("pool6_is_v4", 'pool6 = "192.0.2.0/24"\n', "pool6"),
    (
        "lowest_ipv6_mtu_rfc8200_5",
        POOL6 + "lowest-ipv6-mtu = 1000\n",
        "lowest-ipv6-mtu",
    ),
    ("lowest_ipv6_mtu_type", POOL6 + 'lowest-ipv6-mtu = "big"\n', "lowest-ipv6-mtu"),
    ("mtu_plateaus_empty", POOL6 + "mtu-plateaus = []\n", "mtu-plateaus"),
    ("mtu_plateaus_value", POOL6 + "mtu-plateaus = [1500, 20]\n", "mtu-plateaus[1]"),
    (
        "amend_not_bool",
        POOL6 + 'amend-udp-checksum-zero = "yes"\n',
        "amend-udp-checksum-zero",
    ),
    (
        "zeroize_not_bool",
        POOL6 + "zeroize-traffic-class = 1\n",
        "zeroize-traffic-class",
    ),
    ("override_tos_not_bool", POOL6 + 'override-tos = "no"\n', "override-tos"),
    (
        "allow_wkp_not_bool",
        POOL6 + "allow-wkp-non-global = 0\n",
        "allow-wkp-non-global",
    ),
    ("tos_range", POOL6 + "tos = 300\n", "tos"),
    ("hairpin_mode", POOL6 + 'eam-hairpin-mode = "sometimes"\n', "eam-hairpin-mode"),
    ("denylist4_bad", POOL6 + 'denylist4 = ["10.0.0.0/33"]\n', "denylist4[0]"),
    ("denylist4_not_list", POOL6 + 'denylist4 = "10.0.0.0/8"\n', "denylist4"),
    ("rfc6791v4_bad", POOL6 + 'rfc6791v4 = ["2001:db8::/64"]\n', "rfc6791v4[0]"),
    ("rfc6791v6_bad", POOL6 + 'rfc6791v6 = ["192.0.2.0/24"]\n', "rfc6791v6[0]"),
    ("icmp_source_v4", POOL6 + 'icmp-source-v4 = "2001:db8::1"\n', "icmp-source-v4"),
    ("icmp_source_v6", POOL6 + 'icmp-source-v6 = "192.0.2.1"\n', "icmp-source-v6"),
    (
        "eam_ipv6_suffix_too_short_rfc7757_3_2",
        POOL6 + '[[eamt]]\nipv4 = "192.0.2.0/24"\nipv6 = "2001:db8:6::/121"\n',
        "eamt[0]",
    ),
    ("eam_missing_ipv6", POOL6 + '[[eamt]]\nipv4 = "192.0.2.0/24"\n', "eamt[0].ipv6"),
    (
        "eam_bad_ipv4",
        POOL6 + '[[eamt]]\nipv4 = "192.0.2.0/40"\nipv6 = "2001:db8:6::/120"\n',
        "eamt[0].ipv4",
    ),
    (
        "eam_same_ipv4_prefix_twice",
        POOL6 + '[[eamt]]\nipv4 = "192.0.2.0/24"\nipv6 = "2001:db8:6::/120"\n'
        '[[eamt]]\nipv4 = "192.0.2.0/24"\nipv6 = "2001:db8:7::/120"\n',
        "eamt[1]",
    ),
    (
        "eam_unknown_key",
        POOL6
        + '[[eamt]]\nipv4 = "192.0.2.0/24"\nipv6 = "2001:db8:6::/120"\nmask = 1\n',
        "eamt[0].mask",
    ),
    (
        "clat_in_siit",
        POOL6 + '[clat]\nipv4 = "192.0.2.0/28"\nipv6 = "2001:db8:aaaa::/124"\n',
        "clat",
    ),
    ("clat_missing", 'mode = "clat"\n' + POOL6, "clat"),
    (
        "clat_suffix_rfc6877",
        'mode = "clat"\n'
        + POOL6
        + '[clat]\nipv4 = "192.0.2.1/32"\nipv6 = "2001:db8:aaaa::/64"\n',
        "clat",
    ),
    ("siit_nothing_to_translate", "[log]\nlevel = 'info'\n", "pool6"),
    ("tun_name_long", POOL6 + '[tun]\nname = "a-very-long-tun-name0"\n', "tun.name"),
    ("tun_name_slash", POOL6 + '[tun]\nname = "x/y"\n', "tun.name"),
    ("tun_name_empty", POOL6 + '[tun]\nname = ""\n', "tun.name"),
    ("tun_mtu_rfc8200_5", POOL6 + "[tun]\nmtu = 1000\n", "tun.mtu"),
    ("tun_queues", POOL6 + "[tun]\nqueues = 1000\n", "tun.queues"),
    ("tun_offload", POOL6 + '[tun]\noffload = "on"\n', "tun.offload"),
    ("tun_routes", POOL6 + "[tun]\nroutes = 2\n", "tun.routes"),
    ("tun_keep", POOL6 + '[tun]\nkeep-on-exit = "yes"\n', "tun.keep-on-exit"),
    (
        "tun_ipv4_routes",
        POOL6 + '[tun]\nipv4-routes = ["2001:db8::/32"]\n',
        "tun.ipv4-routes[0]",
    ),
    (
        "tun_ipv6_routes",
        POOL6 + '[tun]\nipv6-routes = ["10.0.0.0/8"]\n',
        "tun.ipv6-routes[0]",
    ),
    ("tun_unknown", POOL6 + "[tun]\ncolour = 1\n", "tun.colour"),
    ("tun_not_table", POOL6 + 'tun = "xlat0"\n', "tun"),
    (
        "control_socket_relative",
        POOL6 + '[control]\nsocket = "x.sock"\n',
        "control.socket",
    ),
    (
        "control_socket_long",
        POOL6 + f'[control]\nsocket = "/{"s" * 120}"\n',
        "control.socket",
    ),
    ("metrics_listen", POOL6 + '[metrics]\nlisten = "localhost"\n', "metrics.listen"),
    ("log_level", POOL6 + '[log]\nlevel = "verbose"\n', "log.level"),
    ("unknown_top_key", POOL6 + "frobnicate = 1\n", "frobnicate"),
    ("privileges_user_type", POOL6 + "[privileges]\nuser = 0\n", "privileges.user"),
]


def _write(tmp_path, text: str):
    p = tmp_path / "xlat.toml"
    p.write_text(text)
    return p


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("text", "key"), [(t, k) for _, t, k in BAD], ids=[i for i, _, _ in BAD]
)
def test_check_rejects(tmp_path, text, key):
    xlat = need_xlat()
    conf = _write(tmp_path, text)
    cp = run([xlat, "check", "-c", conf], check=False)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 2, out
    errors = [ln for ln in out.splitlines() if ln.startswith("error: ")]
    assert errors, out
    if key is not None:
        assert any(ln.startswith(f"error: {key}: ") for ln in errors), out


@pytest.mark.timeout(20)
def test_check_reports_every_problem(tmp_path):
    xlat = need_xlat()
    conf = _write(tmp_path, POOL6 + "tos = 300\n[log]\nlevel = 'x'\n[tun]\nmtu = 5\n")
    cp = run([xlat, "check", "-c", conf], check=False)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 2
    for key in ("tos", "log.level", "tun.mtu"):
        assert re.search(rf"^error: {re.escape(key)}: ", out, re.MULTILINE), out


@pytest.mark.timeout(20)
def test_check_names_a_missing_or_empty_value_without_an_empty_field(tmp_path):
    """A missing pool6 or an empty TUN name has no value to show: the line is
    `error: KEY: REASON` (it was `error: pool6: : siit needs ...`)."""
    xlat = need_xlat()
    conf = _write(tmp_path, 'mode = "siit"\n[tun]\nname = ""\n')
    cp = run([xlat, "check", "-c", conf], check=False)
    assert cp.returncode == 2, cp
    assert cp.stdout.splitlines() == [
        "error: pool6: siit needs pool6 or at least one [[eamt]] entry to translate anything",
        "error: tun.name: must not be empty",
    ], cp


@pytest.mark.timeout(20)
def test_check_accepts_good_config(tmp_path):
    xlat = need_xlat()
    conf = _write(
        tmp_path,
        POOL6 + '[[eamt]]\nipv4 = "192.0.2.0/28"\nipv6 = "2001:db8:6::/124"\n'
        '[tun]\nname = "xlat0"\n[metrics]\nlisten = "[::1]:9464"\n',
    )
    cp = run([xlat, "check", "-c", conf], check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert len(cp.stdout.strip().splitlines()) == 1, cp.stdout


@pytest.mark.timeout(20)
def test_check_summary_of_a_clat_that_discovers_pool6(tmp_path):
    """docs/clat.md: a CLAT without pool6 discovers it, PREF64 from Router
    Advertisements first (RFC 8781 section 5.1), then RFC 7050; the summary
    says both (it said rfc7050 alone)."""
    xlat = need_xlat()
    conf = _write(
        tmp_path,
        'mode = "clat"\n[clat]\nipv4 = "192.0.2.0/24"\n'
        'ipv6 = "2001:db8:aaaa::/120"\n[tun]\nname = "xlat0"\n',
    )
    cp = run([xlat, "check", "-c", conf], check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert " mode=clat pool6=discovered(rfc8781,rfc7050) " in cp.stdout, cp.stdout


@pytest.mark.timeout(20)
def test_check_notes_a_missing_interface(tmp_path):
    """A [datapath] interface that does not exist (yet) is valid, but `xlat check`
    says that `xlat run` will need it (it passed silently, then run failed)."""
    xlat = need_xlat()
    conf = _write(tmp_path, POOL6 + '[datapath]\ninterfaces = ["xlnosuch0"]\n')
    cp = run([xlat, "check", "-c", conf], check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "note: datapath.interfaces: xlnosuch0: no such interface" in cp.stderr
    conf = _write(
        tmp_path,
        'mode = "clat"\n[clat]\nipv4 = "192.0.2.0/24"\n'
        'ipv6 = "2001:db8:aaaa::/120"\nra-interfaces = ["lo", "xlnosuch1"]\n',
    )
    cp = run([xlat, "check", "-c", conf], check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "note: clat.ra-interfaces: xlnosuch1: no such interface" in cp.stderr
    assert "ra-interfaces: lo" not in cp.stderr


@pytest.mark.timeout(20)
def test_check_missing_file(tmp_path):
    xlat = need_xlat()
    cp = run([xlat, "check", "-c", tmp_path / "nope.toml"], check=False)
    assert cp.returncode == 2
    assert "error: " in cp.stdout + cp.stderr


@pytest.fixture(scope="module")
def empty_ns():
    with Lab() as lab:
        yield lab, lab.add_ns("cfg")


RUN_BAD = [
    *BAD,
    (
        "privileges_no_such_user",
        POOL6 + '[privileges]\nuser = "xlt-no-such-user"\n',
        None,
    ),
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "text", [t for _, t, _ in RUN_BAD], ids=[i for i, _, _ in RUN_BAD]
)
def test_run_refuses_bad_config(empty_ns, tmp_path, text):
    lab, ns = empty_ns
    xlat = need_xlat()
    sock = tmp_path / "x.sock"
    if "[control]" not in text:
        text += f'\n[control]\nsocket = "{sock}"\n'
    conf = _write(tmp_path, text)
    cp = lab.exec(ns, [str(xlat), "run", "-c", str(conf)], check=False, timeout=10)
    assert cp.returncode != 0, cp.stderr
    assert cp.returncode == 2, (
        f"bad config should exit 2, got {cp.returncode}: {cp.stderr}"
    )
    assert "error" in cp.stderr.lower(), cp.stderr
    assert lab.links(ns) == ["lo"], "xlat run with a bad config created a device"
    assert not sock.exists()
