//! RFC 7050: discovering the NAT64 prefix (pool6) of the network by asking
//! the resolver for the AAAA records of `ipv4only.arpa` and finding the
//! well-known IPv4 addresses 192.0.0.170 / 192.0.0.171 inside the answers.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use xlat_core::addr::Ipv6Prefix;

/// RFC 7050 §2.2: the well-known IPv4 addresses.
pub const WKA: [[u8; 4]; 2] = [[192, 0, 0, 170], [192, 0, 0, 171]];

/// The DNS query for `ipv4only.arpa. IN AAAA` with recursion desired.
pub fn build_query(id: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(40);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00]); // RD
    q.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]); // QD=1
    for label in ["ipv4only", "arpa"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&[0, 28, 0, 1]); // AAAA, IN
    q
}

fn skip_name(m: &[u8], mut i: usize) -> Result<usize, String> {
    for _ in 0..128 {
        let l = *m.get(i).ok_or("truncated name")?;
        match l & 0xc0 {
            0x00 if l == 0 => return Ok(i + 1),
            0x00 => i += 1 + usize::from(l),
            0xc0 => return Ok(i + 2),
            _ => return Err("bad label".into()),
        }
    }
    Err("name too long".into())
}

/// The AAAA records of a response to the query with `id`, each with its TTL
/// in seconds (RFC 7050 §3: the prefix is valid for the TTL of the record).
pub fn parse_response(m: &[u8], id: u16) -> Result<Vec<(Ipv6Addr, u32)>, String> {
    if m.len() < 12 {
        return Err("response shorter than a DNS header".into());
    }
    if u16::from_be_bytes([m[0], m[1]]) != id {
        return Err("response ID does not match the query".into());
    }
    if m[2] & 0x80 == 0 {
        return Err("not a response".into());
    }
    if m[2] & 0x02 != 0 {
        return Err("response truncated (TC)".into());
    }
    let rcode = m[3] & 0x0f;
    if rcode != 0 {
        let name = match rcode {
            2 => " (SERVFAIL)",
            3 => " (NXDOMAIN: no DNS64 for ipv4only.arpa?)",
            5 => " (REFUSED)",
            _ => "",
        };
        return Err(format!("resolver answered rcode {rcode}{name}"));
    }
    let qd = u16::from_be_bytes([m[4], m[5]]);
    let an = u16::from_be_bytes([m[6], m[7]]);
    let mut i = 12;
    for _ in 0..qd {
        i = skip_name(m, i)? + 4;
    }
    let mut out = vec![];
    for _ in 0..an {
        i = skip_name(m, i)?;
        let h = m.get(i..i + 10).ok_or("truncated answer")?;
        let typ = u16::from_be_bytes([h[0], h[1]]);
        let class = u16::from_be_bytes([h[2], h[3]]);
        // RFC 2181 §8: a TTL with the top bit set is treated as zero.
        let ttl = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
        let ttl = if ttl > i32::MAX as u32 { 0 } else { ttl };
        let rdlen = usize::from(u16::from_be_bytes([h[8], h[9]]));
        i += 10;
        let rd = m.get(i..i + rdlen).ok_or("truncated rdata")?;
        if typ == 28 && class == 1 && rdlen == 16 {
            let mut a = [0u8; 16];
            a.copy_from_slice(rd);
            out.push((Ipv6Addr::from(a), ttl));
        }
        i += rdlen;
    }
    Ok(out)
}

/// RFC 6052 §2.2: the prefix lengths and, for each, the byte positions of
/// the 4 IPv4 octets (byte 8, bits 64-71, is the u-octet and is skipped).
const LAYOUTS: [(u8, [usize; 4]); 6] = [
    (96, [12, 13, 14, 15]),
    (64, [9, 10, 11, 12]),
    (56, [7, 9, 10, 11]),
    (48, [6, 7, 9, 10]),
    (40, [5, 6, 7, 9]),
    (32, [4, 5, 6, 7]),
];

/// RFC 7050 §3 with the RFC 6052 §2.2 layout: every (prefix, well-known
/// address index) such that a well-known IPv4 address sits at the place of
/// that prefix length in `a`. Positions whose u-octet (bits 64-71) is not
/// zero are not RFC 6052 addresses and give nothing (for a /96 the u-octet
/// is part of the prefix, which RFC 6052 §2.2 requires to be zero there).
pub fn candidates(a: &Ipv6Addr) -> Vec<(Ipv6Prefix, usize)> {
    let o = a.octets();
    let mut out = vec![];
    if o[8] != 0 {
        return out;
    }
    for (len, pos) in LAYOUTS {
        let v4 = [o[pos[0]], o[pos[1]], o[pos[2]], o[pos[3]]];
        if let Some(w) = WKA.iter().position(|k| *k == v4) {
            let mut p = [0u8; 16];
            let n = usize::from(len / 8);
            p[..n].copy_from_slice(&o[..n]);
            if let Ok(pfx) = Ipv6Prefix::new(Ipv6Addr::from(p), len) {
                out.push((pfx, w));
            }
        }
    }
    out
}

/// The prefix of one answer alone: the first candidate, trying /96, /64,
/// /56, /48, /40, /32 in this order.
#[cfg(test)]
pub fn derive_prefix(a: &Ipv6Addr) -> Option<Ipv6Prefix> {
    candidates(a).first().map(|c| c.0)
}

/// What the answers to `ipv4only.arpa` say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The prefix to use (the first one found).
    pub prefix: Ipv6Prefix,
    /// Other, different prefixes in the answers (RFC 7050 §3 allows several;
    /// a CLAT translates with one).
    pub others: Vec<Ipv6Prefix>,
    /// The lowest TTL of the answers that gave a prefix, in seconds.
    pub ttl: u32,
    /// The resolver that answered (set by [`discover`]).
    pub resolver: Option<SocketAddr>,
}

/// The prefixes in a set of answers (RFC 7050 §3). Answers without a
/// well-known address are ignored. When an answer holds a well-known
/// address at several places (a prefix whose own bits look like
/// 192.0.0.170), the place where the other answers hold the *other*
/// well-known address under the same prefix wins: a DNS64 synthesizes
/// 192.0.0.170 and 192.0.0.171 with the same prefix at the same place.
/// Without such a confirmation the order /96, /64, /56, /48, /40, /32 decides.
/// A prefix no pool6 can be (a multicast one, [`crate::config::check_pool6`])
/// is skipped, so that a usable prefix in another answer is used (RFC 7050
/// §3 lets a node use any of them).
pub fn prefix_from_answers(answers: &[(Ipv6Addr, u32)]) -> Result<Discovered, String> {
    let mut unusable: Vec<String> = vec![];
    let per: Vec<(Vec<(Ipv6Prefix, usize)>, u32)> = answers
        .iter()
        .map(|(a, ttl)| {
            let mut c = candidates(a);
            c.retain(|(p, _)| match crate::config::check_pool6(p) {
                Ok(()) => true,
                Err(e) => {
                    let why = format!("{p}: {e}");
                    if !unusable.contains(&why) {
                        unusable.push(why);
                    }
                    false
                }
            });
            (c, *ttl)
        })
        .collect();
    let confirmed = |p: &Ipv6Prefix| {
        let seen = |w: usize| {
            per.iter()
                .any(|(c, _)| c.iter().any(|(q, x)| q == p && *x == w))
        };
        seen(0) && seen(1)
    };
    let mut found: Vec<Ipv6Prefix> = vec![];
    let mut ttl = u32::MAX;
    for (c, t) in &per {
        if c.is_empty() {
            continue;
        }
        let pick = c.iter().find(|(p, _)| confirmed(p)).unwrap_or(&c[0]).0;
        if !found.contains(&pick) {
            found.push(pick);
        }
        ttl = ttl.min(*t);
    }
    if found.is_empty() && !unusable.is_empty() {
        return Err(format!(
            "ipv4only.arpa answered only with prefixes that cannot be pool6 ({})",
            unusable.join("; ")
        ));
    }
    if found.is_empty() {
        return Err(
            "no AAAA answer for ipv4only.arpa contains 192.0.0.170 or 192.0.0.171 at an RFC 6052 place (no DNS64?)"
                .into(),
        );
    }
    Ok(Discovered {
        prefix: found[0],
        others: found[1..].to_vec(),
        ttl,
        resolver: None,
    })
}

/// The `nameserver` lines of a resolv.conf text, in order, at most 3 (as
/// the libc resolver, MAXNS). A link-local address keeps its `%interface`
/// scope (an interface name or an index).
pub fn nameservers(resolv: &str) -> Vec<SocketAddr> {
    resolv
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            if w.next()? != "nameserver" {
                return None;
            }
            let mut parts = w.next()?.splitn(2, '%');
            let ip: IpAddr = parts.next()?.parse().ok()?;
            let mut sa = SocketAddr::new(ip, 53);
            if let (SocketAddr::V6(v6), Some(scope)) = (&mut sa, parts.next()) {
                let ix = scope.parse::<u32>().ok().or_else(|| {
                    let c = std::ffi::CString::new(scope).ok()?;
                    // SAFETY: a NUL-terminated string for the lookup only.
                    let ix = unsafe { libc::if_nametoindex(c.as_ptr()) };
                    (ix != 0).then_some(ix)
                });
                v6.set_scope_id(ix.unwrap_or(0));
            }
            Some(sa)
        })
        .take(3)
        .collect()
}

/// The first `nameserver` in a resolv.conf text.
#[cfg(test)]
pub fn first_nameserver(resolv: &str) -> Option<IpAddr> {
    nameservers(resolv).first().map(|s| s.ip())
}

/// What one query to one resolver gave.
enum Asked {
    /// A prefix.
    Found(Discovered),
    /// An answer that settles it (no DNS64: NXDOMAIN, or no well-known
    /// address in the answers): the other resolvers are not asked.
    Final(String),
    /// No usable answer (timeout, SERVFAIL, REFUSED, ...): ask the next one.
    Retry(String),
}

/// A DNS ID that an off-path attacker cannot guess (RFC 5452 §9.2: with
/// the kernel's random source port, this is what makes a forged answer
/// with another prefix hard to slip in).
fn query_id(attempt: u16) -> u16 {
    let mut b = [0u8; 2];
    // SAFETY: getrandom(2) writes at most 2 bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 2, 0) };
    if n == 2 {
        return u16::from_ne_bytes(b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    (std::process::id() as u16) ^ attempt.wrapping_mul(0x9e37) ^ (t as u16)
}

/// The response's question section is the one we asked (ipv4only.arpa,
/// AAAA, IN; RFC 5452 §4.2), the name compared without case.
pub fn same_question(query: &[u8], resp: &[u8]) -> bool {
    let q = &query[12..];
    resp.len() >= 12 + q.len()
        && resp[4..6] == [0, 1]
        && resp[12..12 + q.len()].eq_ignore_ascii_case(q)
}

fn ask(sock: &UdpSocket, server: SocketAddr, id: u16) -> Asked {
    let q = build_query(id);
    if let Err(e) = sock.send_to(&q, server) {
        return Asked::Retry(format!("send to {server}: {e}"));
    }
    let mut buf = [0u8; 1500];
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || sock.set_read_timeout(Some(left)).is_err() {
            return Asked::Retry(format!("{server}: timed out"));
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) if from.ip() == server.ip() && from.port() == server.port() => {
                if n >= 2 && buf[..2] == id.to_be_bytes() && !same_question(&q, &buf[..n]) {
                    crate::warn!("RFC 7050 answer ignored: its question is not ipv4only.arpa AAAA", "resolver" => server);
                    continue;
                }
                match parse_response(&buf[..n], id) {
                    Ok(answers) => {
                        return match prefix_from_answers(&answers) {
                            Ok(d) => Asked::Found(d),
                            Err(e) => Asked::Final(format!("{server}: {e}")),
                        }
                    }
                    Err(e) if e.contains("ID") => continue,
                    Err(e) if e.contains("rcode 3") => {
                        return Asked::Final(format!("{server}: {e}"))
                    }
                    Err(e) => return Asked::Retry(format!("{server}: {e}")),
                }
            }
            Ok(_) => continue,
            // A signal to the process (the start's own handling) is no
            // answer: wait on (it ended the query with a warning, found by
            // a test run: "Interrupted system call").
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Asked::Retry(match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                        format!("{server}: timed out")
                    }
                    _ => format!("{server}: {e}"),
                })
            }
        }
    }
}

/// Runs the discovery: UDP to the resolvers of /etc/resolv.conf (at most 3,
/// in order), 2 s timeout per query, 3 rounds. A query without a usable
/// answer is warned about, at debug level once `settled` is set (an RA gave
/// the prefix meanwhile: this result will not be used).
pub fn discover(settled: &std::sync::atomic::AtomicBool) -> Result<Discovered, String> {
    let text = std::fs::read_to_string("/etc/resolv.conf")
        .map_err(|e| format!("RFC 7050 discovery: /etc/resolv.conf: {e}"))?;
    let servers = nameservers(&text);
    if servers.is_empty() {
        return Err("RFC 7050 discovery: no nameserver in /etc/resolv.conf".into());
    }
    let mut socks: Vec<(bool, UdpSocket)> = vec![];
    for v4 in [true, false] {
        if servers.iter().any(|s| s.is_ipv4() == v4) {
            let bind = if v4 { "0.0.0.0:0" } else { "[::]:0" };
            let sock =
                UdpSocket::bind(bind).map_err(|e| format!("RFC 7050 discovery: bind: {e}"))?;
            socks.push((v4, sock));
        }
    }
    let mut last = String::from("no answer");
    for attempt in 1..=3u16 {
        for server in &servers {
            let sock = &socks
                .iter()
                .find(|(v4, _)| *v4 == server.is_ipv4())
                .unwrap()
                .1;
            let id = query_id(attempt);
            match ask(sock, *server, id) {
                // Logged by the caller: at debug level when it is the prefix
                // in use already (a refresh).
                Asked::Found(d) => {
                    return Ok(Discovered {
                        resolver: Some(*server),
                        ..d
                    })
                }
                Asked::Final(e) => return Err(format!("RFC 7050 discovery via {e}")),
                Asked::Retry(e) => {
                    let level = if settled.load(std::sync::atomic::Ordering::Relaxed) {
                        crate::config::Level::Debug
                    } else {
                        crate::config::Level::Warn
                    };
                    crate::log_at!(level, "RFC 7050 query got no usable answer", "resolver" => server, "attempt" => attempt, "reason" => e);
                    last = e;
                }
            }
        }
    }
    Err(format!(
        "RFC 7050 discovery: no usable answer from {} resolver(s) after 3 tries ({last}); set pool6 in the config",
        servers.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(id: u16, rcode: u8, answers: &[Ipv6Addr]) -> Vec<u8> {
        let mut m = build_query(id);
        m[2] = 0x81;
        m[3] = 0x80 | rcode;
        m[7] = answers.len() as u8;
        for a in answers {
            m.extend_from_slice(&[0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16]);
            m.extend_from_slice(&a.octets());
        }
        m
    }

    /// RFC 5452 §4.2: an answer must echo the question we asked.
    #[test]
    fn question_must_match() {
        let q = build_query(5);
        let ok = response(5, 0, &["64:ff9b::c000:aa".parse().unwrap()]);
        assert!(same_question(&q, &ok));
        let mut upper = ok.clone();
        upper[13] = b'I';
        assert!(same_question(&q, &upper));
        let mut other = ok.clone();
        other[14] = b'x';
        assert!(!same_question(&q, &other));
        let mut a_type = ok.clone();
        a_type[q.len() - 3] = 1; // QTYPE A instead of AAAA
        assert!(!same_question(&q, &a_type));
        assert!(!same_question(&q, &ok[..20]));
    }

    #[test]
    fn query_wire_format() {
        let q = build_query(0x1234);
        assert_eq!(&q[..4], &[0x12, 0x34, 1, 0]);
        assert_eq!(&q[12..21], b"\x08ipv4only");
        assert_eq!(&q[q.len() - 4..], &[0, 28, 0, 1]);
    }

    /// RFC 7050 §3: the Well-Known Prefix 64:ff9b::/96.
    #[test]
    fn wkp_from_response() {
        let a: Ipv6Addr = "64:ff9b::c000:aa".parse().unwrap();
        let b: Ipv6Addr = "64:ff9b::c000:ab".parse().unwrap();
        let m = response(7, 0, &[a, b]);
        let ans = parse_response(&m, 7).unwrap();
        assert_eq!(ans, vec![(a, 60), (b, 60)]);
        let d = prefix_from_answers(&ans).unwrap();
        assert_eq!(d.prefix.to_string(), "64:ff9b::/96");
        assert!(d.others.is_empty());
        assert_eq!(d.ttl, 60);
    }

    /// RFC 7050 §3 + RFC 6052 §2.2: every prefix length, u-octet skipped.
    #[test]
    fn derive_every_length() {
        let cases = [
            ("2001:db8:c000:aa::", "2001:db8::/32"),
            ("2001:db8:1c0:0:aa::", "2001:db8:100::/40"),
            ("2001:db8:122:c000:0:aa00::", "2001:db8:122::/48"),
            ("2001:db8:122:3c0:0:aa::", "2001:db8:122:300::/56"),
            ("2001:db8:122:344:c0:0:aa00:0", "2001:db8:122:344::/64"),
            ("2001:db8:122:344::c000:ab", "2001:db8:122:344::/96"),
        ];
        for (addr, want) in cases {
            let a: Ipv6Addr = addr.parse().unwrap();
            assert_eq!(
                derive_prefix(&a).map(|p| p.to_string()).as_deref(),
                Some(want),
                "{addr}"
            );
        }
        assert_eq!(derive_prefix(&"2001:db8::1".parse().unwrap()), None);
    }

    #[test]
    fn errors_reported() {
        let m = response(9, 3, &[]);
        assert!(parse_response(&m, 9).unwrap_err().contains("rcode 3"));
        let m = response(9, 0, &[]);
        assert!(parse_response(&m, 10).unwrap_err().contains("ID"));
        assert!(parse_response(&m[..5], 9).is_err());
        let ans = parse_response(&response(9, 0, &["2001:db8::1".parse().unwrap()]), 9).unwrap();
        assert!(prefix_from_answers(&ans).is_err());
        assert!(prefix_from_answers(&[]).is_err());
        let m = response(9, 3, &[]);
        assert!(parse_response(&m, 9).unwrap_err().contains("NXDOMAIN"));
        let mut t = response(9, 0, &["64:ff9b::c000:aa".parse().unwrap()]);
        t.truncate(t.len() - 3);
        assert!(parse_response(&t, 9).is_err());
    }

    fn with_ttl(list: &[&str], ttl: u32) -> Vec<(Ipv6Addr, u32)> {
        list.iter().map(|a| (a.parse().unwrap(), ttl)).collect()
    }

    /// RFC 6052 §2.2: bits 64-71 must be zero. An answer whose u-octet is
    /// set is not an RFC 6052 address: it gives no prefix (before, a /96
    /// answer had its u-octet cleared, so the CLAT used a prefix the DNS64
    /// does not use).
    #[test]
    fn rfc6052_u_octet_not_zero_ignored() {
        for a in [
            "2001:db8:0:0:100::c000:aa",      // /96 with u-octet 0x01
            "2001:db8:122:344:ffc0:0:aa00:0", // /64 with u-octet 0xff
            "2001:db8:c000:aa:100::",         // /32 with u-octet 0x01
        ] {
            let a: Ipv6Addr = a.parse().unwrap();
            assert_eq!(derive_prefix(&a), None, "{a}");
        }
        let ans = with_ttl(&["2001:db8:0:0:100::c000:aa", "64:ff9b::c000:ab"], 60);
        let d = prefix_from_answers(&ans).unwrap();
        assert_eq!(d.prefix.to_string(), "64:ff9b::/96");
        assert!(d.others.is_empty());
    }

    /// RFC 7050 §3: the well-known address may also appear inside the
    /// prefix; the place where 192.0.0.170 and 192.0.0.171 both appear
    /// under the same prefix is the one the DNS64 used.
    #[test]
    fn rfc7050_s3_ambiguous_place_resolved_by_both_wkas() {
        // A /32 DNS64 whose prefix' last 32 bits hold nothing special, but
        // whose suffix happens to be ...c000:aa: /96 reading gives a
        // different prefix for each answer; /32 is confirmed by both.
        let ans = with_ttl(
            &["2001:db8:c000:aa::c000:aa", "2001:db8:c000:ab::c000:aa"],
            30,
        );
        let d = prefix_from_answers(&ans).unwrap();
        assert_eq!(d.prefix.to_string(), "2001:db8::/32");
        assert!(d.others.is_empty(), "{:?}", d.others);
        // A /96 prefix containing c000:aa at the /32 place: /96 confirmed.
        let ans = with_ttl(
            &["2001:db8:c000:aa::c000:aa", "2001:db8:c000:aa::c000:ab"],
            30,
        );
        let d = prefix_from_answers(&ans).unwrap();
        assert_eq!(d.prefix.to_string(), "2001:db8:c000:aa::/96");
        assert!(d.others.is_empty());
    }

    /// RFC 7050 §3: several prefixes; answers without a well-known address
    /// are ignored; the TTL is the lowest one of the answers used.
    #[test]
    fn rfc7050_s3_several_prefixes_and_ttl() {
        let ans = vec![
            ("2001:db8::1".parse().unwrap(), 5),
            ("2001:db8:64::c000:aa".parse().unwrap(), 300),
            ("2001:db8:64::c000:ab".parse().unwrap(), 120),
            ("64:ff9b::c000:aa".parse().unwrap(), 600),
        ];
        let d = prefix_from_answers(&ans).unwrap();
        assert_eq!(d.prefix.to_string(), "2001:db8:64::/96");
        assert_eq!(d.others.len(), 1);
        assert_eq!(d.others[0].to_string(), "64:ff9b::/96");
        assert_eq!(d.ttl, 120);
        // RFC 2181 §8: a TTL with the top bit set counts as zero.
        let mut m = response(4, 0, &["64:ff9b::c000:aa".parse().unwrap()]);
        let n = m.len();
        m[n - 22..n - 18].copy_from_slice(&0x8000_0001u32.to_be_bytes());
        assert_eq!(parse_response(&m, 4).unwrap()[0].1, 0);
    }

    /// RFC 7050 §3 lets a node use any of the prefixes found: an unusable
    /// one (multicast, RFC 4291 §2.7) is skipped for a usable one in a
    /// later answer, instead of stopping the start; with only unusable
    /// ones the error names them.
    #[test]
    fn rfc7050_s3_unusable_prefix_skipped() {
        let ans = with_ttl(&["ff0e::c000:aa", "2001:db8:64::c000:aa"], 60);
        let d = prefix_from_answers(&ans).unwrap();
        assert_eq!(d.prefix.to_string(), "2001:db8:64::/96");
        assert!(d.others.is_empty(), "{:?}", d.others);
        let e = prefix_from_answers(&with_ttl(&["ff0e::c000:aa"], 60)).unwrap_err();
        assert!(e.contains("ff0e::/96") && e.contains("multicast"), "{e}");
    }

    #[test]
    fn resolv_conf() {
        let t = "# x\nsearch example\nnameserver fe80::1%eth0\nnameserver 10.0.0.1\n";
        assert_eq!(first_nameserver(t), Some("fe80::1".parse().unwrap()));
        assert_eq!(first_nameserver("options ndots:1\n"), None);
        let t = "nameserver 10.0.0.1\nnameserver fe80::1%7\nnameserver ::1\nnameserver 10.0.0.4\n";
        let all = nameservers(t);
        assert_eq!(all.len(), 3);
        assert_eq!(all[1].to_string(), "[fe80::1%7]:53");
        assert_eq!(all[2].to_string(), "[::1]:53");
    }

    use proptest::prelude::*;

    /// One answer record for the generator: owner name compressed (a
    /// pointer to the question) or spelled out, type, class, TTL, rdata.
    fn record() -> impl Strategy<Value = (bool, u16, u16, u32, Vec<u8>)> {
        (
            any::<bool>(),
            prop_oneof![Just(28u16), Just(1), Just(5), any::<u16>()],
            prop_oneof![Just(1u16), any::<u16>()],
            any::<u32>(),
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 16),
                proptest::collection::vec(any::<u8>(), 0..40),
            ],
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, .. ProptestConfig::default() })]

        /// A resolver's answer is untrusted input: any bytes give an
        /// answer list or an error, never a panic (names with loops of
        /// compression pointers included).
        #[test]
        fn arbitrary_responses_never_panic(
            mut m in proptest::collection::vec(any::<u8>(), 0..600),
            valid_header in any::<bool>(),
        ) {
            if valid_header && m.len() >= 12 {
                m[..4].copy_from_slice(&[0x12, 0x34, 0x81, 0x80]);
            }
            let _ = parse_response(&m, 0x1234);
            let _ = same_question(&build_query(0x1234), &m);
        }

        /// RFC 1035 §4.1 / RFC 7050 §3 as a model: the AAAA records of class
        /// IN with 16 bytes of data are the answer, in order, with their
        /// TTL (RFC 2181 §8: a TTL over 2^31 - 1 counts as 0); every other
        /// record is skipped; cutting the message anywhere in the answers
        /// is an error, not a shorter list.
        #[test]
        fn generated_responses_give_their_aaaa_records(
            recs in proptest::collection::vec(record(), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut m = response(0x1234, 0, &[]);
            let q_end = m.len();
            m[6..8].copy_from_slice(&(recs.len() as u16).to_be_bytes());
            let mut want = vec![];
            for (compressed, typ, class, ttl, rd) in &recs {
                if *compressed {
                    m.extend_from_slice(&[0xc0, 12]);
                } else {
                    m.extend_from_slice(b"\x08ipv4only\x04arpa\x00");
                }
                m.extend_from_slice(&typ.to_be_bytes());
                m.extend_from_slice(&class.to_be_bytes());
                m.extend_from_slice(&ttl.to_be_bytes());
                m.extend_from_slice(&(rd.len() as u16).to_be_bytes());
                m.extend_from_slice(rd);
                if *typ == 28 && *class == 1 && rd.len() == 16 {
                    let a: [u8; 16] = rd[..].try_into().unwrap();
                    let ttl = if *ttl > i32::MAX as u32 { 0 } else { *ttl };
                    want.push((Ipv6Addr::from(a), ttl));
                }
            }
            prop_assert_eq!(parse_response(&m, 0x1234), Ok(want));
            prop_assert_eq!(parse_response(&m, 0x1235).is_err(), true);
            if !recs.is_empty() {
                let at = q_end + cut.index(m.len() - q_end);
                prop_assert!(parse_response(&m[..at], 0x1234).is_err());
            }
        }
    }
}
