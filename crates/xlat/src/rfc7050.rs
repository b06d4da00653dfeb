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

/// The AAAA records of a response to the query with `id`.
pub fn parse_response(m: &[u8], id: u16) -> Result<Vec<Ipv6Addr>, String> {
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
        return Err(format!("resolver answered rcode {rcode}"));
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
        let rdlen = usize::from(u16::from_be_bytes([h[8], h[9]]));
        i += 10;
        let rd = m.get(i..i + rdlen).ok_or("truncated rdata")?;
        if typ == 28 && class == 1 && rdlen == 16 {
            let mut a = [0u8; 16];
            a.copy_from_slice(rd);
            out.push(Ipv6Addr::from(a));
        }
        i += rdlen;
    }
    Ok(out)
}

/// RFC 7050 §3 with the RFC 6052 §2.2 layout: the prefix in which a
/// well-known IPv4 address is embedded, trying /96, /64, /56, /48, /40, /32.
pub fn derive_prefix(a: &Ipv6Addr) -> Option<Ipv6Prefix> {
    let o = a.octets();
    // (prefix length, byte positions of the 4 IPv4 octets; byte 8 is the u-octet)
    let layouts: [(u8, [usize; 4]); 6] = [
        (96, [12, 13, 14, 15]),
        (64, [9, 10, 11, 12]),
        (56, [7, 9, 10, 11]),
        (48, [6, 7, 9, 10]),
        (40, [5, 6, 7, 9]),
        (32, [4, 5, 6, 7]),
    ];
    for (len, pos) in layouts {
        let v4 = [o[pos[0]], o[pos[1]], o[pos[2]], o[pos[3]]];
        if WKA.contains(&v4) {
            let mut p = [0u8; 16];
            let n = usize::from(len / 8);
            p[..n].copy_from_slice(&o[..n]);
            if len == 96 {
                p[8] = 0;
            }
            return Ipv6Prefix::new(Ipv6Addr::from(p), len).ok();
        }
    }
    None
}

/// The prefix from a set of answers: every AAAA that contains a WKA must
/// give the same prefix (RFC 7050 §3 allows several; we use the first and
/// report disagreement).
pub fn prefix_from_answers(answers: &[Ipv6Addr]) -> Result<(Ipv6Prefix, Vec<Ipv6Prefix>), String> {
    let mut found: Vec<Ipv6Prefix> = answers.iter().filter_map(derive_prefix).collect();
    found.dedup();
    if found.is_empty() {
        return Err(
            "no AAAA answer for ipv4only.arpa contains 192.0.0.170 or 192.0.0.171 (no DNS64?)"
                .into(),
        );
    }
    let first = found[0];
    Ok((first, found[1..].to_vec()))
}

/// The first `nameserver` in a resolv.conf text.
pub fn first_nameserver(resolv: &str) -> Option<IpAddr> {
    resolv.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        if w.next()? != "nameserver" {
            return None;
        }
        let a = w.next()?;
        a.split('%').next()?.parse().ok()
    })
}

/// Runs the discovery: UDP to the first resolver, 2 s timeout, 3 tries.
pub fn discover() -> Result<Ipv6Prefix, String> {
    let text = std::fs::read_to_string("/etc/resolv.conf")
        .map_err(|e| format!("RFC 7050 discovery: /etc/resolv.conf: {e}"))?;
    let ns =
        first_nameserver(&text).ok_or("RFC 7050 discovery: no nameserver in /etc/resolv.conf")?;
    let server = SocketAddr::new(ns, 53);
    let bind: SocketAddr = if ns.is_ipv4() {
        "0.0.0.0:0".parse().unwrap()
    } else {
        "[::]:0".parse().unwrap()
    };
    let sock = UdpSocket::bind(bind).map_err(|e| format!("RFC 7050 discovery: bind: {e}"))?;
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let mut last = String::from("no answer");
    for attempt in 1..=3u16 {
        let id = (std::process::id() as u16)
            ^ attempt.wrapping_mul(0x9e37)
            ^ (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .subsec_nanos() as u16);
        let q = build_query(id);
        if let Err(e) = sock.send_to(&q, server) {
            last = format!("send to {server}: {e}");
            continue;
        }
        let mut buf = [0u8; 1500];
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while std::time::Instant::now() < deadline {
            match sock.recv_from(&mut buf) {
                Ok((n, from)) if from == server => match parse_response(&buf[..n], id) {
                    Ok(answers) => {
                        let (p, others) = prefix_from_answers(&answers)?;
                        crate::info!("pool6 discovered (RFC 7050)", "pool6" => p, "resolver" => server, "other_prefixes" => others.len());
                        return Ok(p);
                    }
                    Err(e) if e.contains("ID") => continue,
                    Err(e) => return Err(format!("RFC 7050 discovery via {server}: {e}")),
                },
                Ok(_) => continue,
                Err(e) => {
                    last = match e.kind() {
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                            "timed out".to_string()
                        }
                        _ => e.to_string(),
                    };
                    break;
                }
            }
        }
        crate::warn!("RFC 7050 query got no answer", "resolver" => server, "attempt" => attempt);
    }
    Err(format!(
        "RFC 7050 discovery: no answer from {server} after 3 tries ({last}); set pool6 in the config"
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
        assert_eq!(ans, vec![a, b]);
        let (p, others) = prefix_from_answers(&ans).unwrap();
        assert_eq!(p.to_string(), "64:ff9b::/96");
        assert!(others.is_empty());
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
        let mut t = response(9, 0, &["64:ff9b::c000:aa".parse().unwrap()]);
        t.truncate(t.len() - 3);
        assert!(parse_response(&t, 9).is_err());
    }

    #[test]
    fn resolv_conf() {
        let t = "# x\nsearch example\nnameserver fe80::1%eth0\nnameserver 10.0.0.1\n";
        assert_eq!(first_nameserver(t), Some("fe80::1".parse().unwrap()));
        assert_eq!(first_nameserver("options ndots:1\n"), None);
    }
}
