//! Bodies of the daemon's fuzz targets (crates/xlat/fuzz), kept here so the
//! same checks also run on stable Rust in `cargo test` (tests/fuzz_smoke.rs)
//! over generated inputs. They cover the parsers outside the core: the
//! configuration file, RFC 8781 Router Advertisements, RFC 7050 DNS answers,
//! the ICMP reassembly of the TUN datapath, virtio-net headers, the NAT64
//! control requests, the metrics endpoint's HTTP requests and the rtnetlink
//! route dumps read for the eBPF fast path's route MTUs. Each function must never panic on any input; the
//! `assert!`s state the invariants a fuzzer should find violated.

use std::sync::Arc;

use xlat_core::addr::Ipv6Prefix;
use xlat_core::nat64::Nat64State;

use crate::reasm::{Offer, Reassembler, MAX_ENTRIES};
use crate::vnet::{VnetHdr, VNET_HDR_LEN};
use crate::{config, metrics, nat64d, rfc7050, rfc8781, route_mtu, vnet};

/// RFC 6052 §2.2: the prefix lengths a NAT64 prefix may have.
fn rfc6052_length(p: &Ipv6Prefix) -> bool {
    [32, 40, 48, 56, 64, 96].contains(&p.len())
}

/// The configuration parser on any text. Valid settings are written back as
/// TOML (`xlat show config`), which must parse again to the same settings
/// (the same TOML); problems each name a key and a reason.
pub fn config_any(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match config::parse(text) {
        Ok(s) => {
            let shown = s.to_toml(s.pool6, &s.eamt);
            match config::parse(&shown) {
                Ok(again) => assert_eq!(
                    again.to_toml(again.pool6, &again.eamt),
                    shown,
                    "show-config output must parse back to the same settings"
                ),
                Err(ps) => panic!("show-config output refused: {ps:?}\n{shown}"),
            }
        }
        Err(ps) => {
            assert!(!ps.is_empty(), "a refused file must say why");
            for p in ps {
                assert!(
                    !p.key.is_empty() && !p.reason.is_empty(),
                    "a problem names a key and a reason: {p:?}"
                );
            }
        }
    }
}

/// RFC 8781 §4: PREF64 options of any ICMPv6 message. `data[0]` selects the
/// prefix in use (none or the first option's), the rest is the message.
pub fn ra_any(data: &[u8]) {
    let Some((&sel, msg)) = data.split_first() else {
        return;
    };
    let opts = rfc8781::pref64_options(msg);
    for (p, lifetime) in &opts {
        assert!(rfc6052_length(p), "PREF64 of length {}", p.len());
        // 13 bits of scaled lifetime in units of 8 s.
        assert!(*lifetime <= 8191 * 8 && lifetime % 8 == 0);
        if p.len() == 96 {
            assert_eq!(p.addr().octets()[8], 0, "RFC 6052 §2.2: bits 64-71");
        }
    }
    let current = if sel & 1 == 0 {
        None
    } else {
        opts.first().map(|o| o.0)
    };
    let _ = rfc8781::ra_update(current, &opts);
}

/// RFC 7050 §3: any DNS message as the answer to our query for
/// ipv4only.arpa. `data[0..2]` is the query ID, the rest the message.
pub fn dns64_any(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let id = u16::from_be_bytes([data[0], data[1]]);
    let msg = &data[2..];
    let _ = rfc7050::same_question(&rfc7050::build_query(id), msg);
    if let Ok(answers) = rfc7050::parse_response(msg, id) {
        if let Ok(d) = rfc7050::prefix_from_answers(&answers) {
            assert!(rfc6052_length(&d.prefix));
            assert!(d.others.iter().all(rfc6052_length));
            assert!(!d.others.contains(&d.prefix));
            assert!(answers.iter().any(|(_, t)| *t == d.ttl), "the lowest TTL");
        }
    }
}

/// The TUN datapath's reassembly (ICMP, NAT64's UDP without checksum) on a sequence of packets: `data` is
/// cut into packets, each preceded by a length byte and a clock step byte.
/// The table stays bounded, and a completed datagram is a whole packet (no
/// fragment fields, lengths that match).
pub fn reasm_any(data: &[u8]) {
    let mut r = Reassembler::new();
    let mut buf = vec![0u8; 65_536 + 128];
    let mut now = 0u64;
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(rest[0]) * 8 % 1500 + 20;
        now += u64::from(rest[1]) * 50;
        rest = &rest[2..];
        let take = len.min(rest.len());
        let start = 64;
        buf[start..start + take].copy_from_slice(&rest[..take]);
        // Fragments of one datagram share a header: packets shorter than
        // they claim are padded with zeros, as the fuzzer cannot guess them.
        buf[start + take..start + len].fill(0);
        rest = &rest[take..];
        match r.offer(&mut buf, start, len, now) {
            Offer::Complete { len: n, .. } => {
                let p = &buf[start..start + n];
                if p[0] >> 4 == 4 {
                    assert_eq!(usize::from(u16::from_be_bytes([p[2], p[3]])), n);
                    assert_eq!(u16::from_be_bytes([p[6], p[7]]) & 0x3fff, 0);
                } else {
                    assert_eq!(usize::from(u16::from_be_bytes([p[4], p[5]])) + 40, n);
                    assert_eq!(p[6], 58, "the Fragment Header is gone");
                }
            }
            Offer::NotMine | Offer::Held | Offer::Dropped(_) => {}
        }
        assert!(r.in_progress() <= MAX_ENTRIES);
    }
}

/// virtio-net header handling on any header and packet: the first
/// [`VNET_HDR_LEN`] bytes are the header, the rest the packet.
pub fn vnet_any(data: &[u8]) {
    if data.len() < VNET_HDR_LEN {
        return;
    }
    let h = VnetHdr::parse(&data[..VNET_HDR_LEN]);
    let mut pkt = data[VNET_HDR_LEN..].to_vec();
    let mut written = [0u8; VNET_HDR_LEN];
    h.write(&mut written);
    assert_eq!(VnetHdr::parse(&written), h, "write then parse");
    let Some(l4) = vnet::l4_offset(&pkt) else {
        return;
    };
    for out_v6 in [false, true] {
        let _ = vnet::translate_hdr(&h, l4, l4 ^ 20, out_v6);
    }
    let before = pkt.clone();
    if vnet::gso_v4_segment_df(&h, &mut pkt, l4, 0x1234) {
        assert_eq!(pkt.len(), before.len());
        assert_eq!(
            u16::from_be_bytes([pkt[6], pkt[7]]) & 0x4000,
            0,
            "DF cleared"
        );
    } else {
        assert_eq!(pkt, before, "unchanged when it says so");
    }
}

/// A NAT64 state with a small pool4 for [`nat64_control_any`].
pub fn nat64_state() -> Arc<Nat64State> {
    let s = config::parse(
        "mode = \"nat64\"\npool6 = \"64:ff9b::/96\"\n[nat64]\nmax-sessions = 64\n\
         [[nat64.pool4]]\nprefix = \"203.0.113.0/30\"\nports = \"1000-1015\"\n\
         [[nat64.bib]]\nprotocol = \"tcp\"\nipv6 = \"2001:db8::80#80\"\nipv4 = \"203.0.113.1#1000\"\n",
    )
    .expect("fuzz NAT64 configuration");
    nat64d::build_state(&s.nat64).expect("fuzz NAT64 state")
}

/// The NAT64 control requests (`xlat bib ...`, `xlat session show`) with any
/// arguments: `data` is text, one request per line, the first word of each
/// picked from the known commands by its first byte. Requests never panic,
/// and `bib-show` afterwards lists every entry at most once.
pub fn nat64_control_any(st: &Nat64State, data: &[u8]) {
    const CMDS: [&str; 6] = [
        "bib-show",
        "bib-add",
        "bib-remove",
        "bib-flush",
        "session-show",
        "other",
    ];
    let pool6: Option<Ipv6Prefix> = "64:ff9b::/96".parse().ok();
    for line in String::from_utf8_lossy(data).lines() {
        let Some(first) = line.bytes().next() else {
            continue;
        };
        let cmd = CMDS[usize::from(first) % CMDS.len()];
        let args: Vec<&str> = line.split_whitespace().skip(1).collect();
        let _ = nat64d::handle(st, pool6, 1_000, cmd, &args, &|_, _, _| None);
    }
    if let Some(Ok(shown)) = nat64d::handle(st, pool6, 1_000, "bib-show", &[], &|_, _, _| None) {
        let lines: Vec<&str> = shown.lines().collect();
        let mut unique = lines.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), lines.len(), "duplicate BIB entries:\n{shown}");
    }
}

/// The metrics endpoint on any request head: always one HTTP/1.0 response
/// whose Content-Length is the length of the content (none for HEAD).
pub fn metrics_request_any(data: &[u8]) {
    let head = String::from_utf8_lossy(data);
    let r = metrics::answer(&head, || "xlat_up 1\n".to_string());
    assert!(r.starts_with("HTTP/1.0 "), "{r}");
    let (h, body) = r.split_once("\r\n\r\n").expect("a header block");
    let len: usize = h
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.parse().ok())
        .expect("a Content-Length");
    assert!(body.is_empty() || body.len() == len, "{r}");
}

/// rtnetlink RTM_GETROUTE dump replies (route_mtu.rs): never a panic; every
/// route returned carries an MTU; the minima are the smallest MTU of their
/// (device, family) and stay within the key limit.
pub fn route_dump_any(data: &[u8]) {
    let mut out = Vec::new();
    let _ = route_mtu::parse(data, &mut out);
    assert!(out.iter().all(|r| r.mtu != 0));
    let m = route_mtu::minima(&out);
    assert!(m.len() <= route_mtu::MAX_KEYS);
    for r in &out {
        let per_dev = m.get(&(r.oif, r.family)).or_else(|| m.get(&(0, r.family)));
        assert!(per_dev.is_some_and(|v| *v <= r.mtu), "{r:?} not covered");
    }
}
