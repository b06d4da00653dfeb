//! RFC 8781: the NAT64 prefix in Router Advertisements (the PREF64 option).
//! Used by the CLAT as a fallback when RFC 7050 discovery finds nothing:
//! one Router Solicitation per interface, then RAs are read for a few
//! seconds.

use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use xlat_core::addr::Ipv6Prefix;

const ND_ROUTER_SOLICIT: u8 = 133;
const ND_ROUTER_ADVERT: u8 = 134;
/// RFC 8781 §4: option type 38, length 2 (16 bytes).
const OPT_PREF64: u8 = 38;

/// RFC 8781 §4: the PREF64 option of a Router Advertisement (the whole
/// ICMPv6 message, starting at its type). Returns the prefix and its
/// lifetime in seconds; options with lifetime 0 or an unknown PLC are skipped.
pub fn parse_ra(msg: &[u8]) -> Option<(Ipv6Prefix, u32)> {
    if msg.len() < 16 || msg[0] != ND_ROUTER_ADVERT || msg[1] != 0 {
        return None;
    }
    let mut i = 16;
    while i + 2 <= msg.len() {
        let typ = msg[i];
        let len = usize::from(msg[i + 1]) * 8;
        if len == 0 || i + len > msg.len() {
            return None; // RFC 4861 §4.6: a zero length option is invalid.
        }
        if typ == OPT_PREF64 && len == 16 {
            let o = &msg[i..i + 16];
            let sl = u16::from_be_bytes([o[2], o[3]]);
            let lifetime = u32::from(sl >> 3) * 8;
            let plen = match sl & 7 {
                0 => 96,
                1 => 64,
                2 => 56,
                3 => 48,
                4 => 40,
                5 => 32,
                _ => {
                    i += len;
                    continue;
                }
            };
            if lifetime > 0 {
                let mut a = [0u8; 16];
                a[..12].copy_from_slice(&o[4..16]);
                // Bits beyond the prefix length are ignored (§4).
                let n = usize::from(plen / 8);
                a[n..].iter_mut().for_each(|b| *b = 0);
                if let Ok(p) = Ipv6Prefix::new(Ipv6Addr::from(a), plen) {
                    return Some((p, lifetime));
                }
            }
        }
        i += len;
    }
    None
}

fn interfaces() -> Vec<u32> {
    let mut out = vec![];
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "lo" {
            continue;
        }
        if let Ok(ix) = std::fs::read_to_string(e.path().join("ifindex")) {
            if let Ok(ix) = ix.trim().parse() {
                out.push(ix);
            }
        }
    }
    out
}

/// Sends Router Solicitations and waits up to `wait` for an RA with PREF64.
pub fn discover(wait: Duration) -> Result<Ipv6Prefix, String> {
    // SAFETY: plain socket(2); the fd is owned right away.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET6,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_ICMPV6,
        )
    };
    if fd < 0 {
        return Err(format!(
            "RFC 8781: raw ICMPv6 socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let hops: libc::c_int = 255; // RFC 4861 §6.1.1
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_MULTICAST_HOPS,
            (&hops as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let rs = [ND_ROUTER_SOLICIT, 0, 0, 0, 0, 0, 0, 0];
    for ix in interfaces() {
        let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        sa.sin6_addr.s6_addr = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        sa.sin6_scope_id = ix;
        // The kernel fills in the ICMPv6 checksum of raw ICMPv6 sockets.
        unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                rs.as_ptr().cast(),
                rs.len(),
                0,
                (&sa as *const libc::sockaddr_in6).cast(),
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            );
        }
    }
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; 1500];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "RFC 8781: no Router Advertisement with a PREF64 option within {} s",
                wait.as_secs()
            ));
        }
        let mut p = libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        if unsafe { libc::poll(&mut p, 1, left.as_millis().min(1000) as i32) } <= 0 {
            continue;
        }
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            continue;
        }
        if let Some((p, lifetime)) = parse_ra(&buf[..n as usize]) {
            crate::info!("pool6 discovered (RFC 8781 PREF64)", "pool6" => p, "lifetime" => lifetime);
            return Ok(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ra(opts: &[&[u8]]) -> Vec<u8> {
        let mut m = vec![
            ND_ROUTER_ADVERT,
            0,
            0,
            0,
            64,
            0,
            0x07,
            0x08,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        for o in opts {
            m.extend_from_slice(o);
        }
        m
    }

    fn pref64(lifetime: u16, plc: u16, prefix: &str) -> Vec<u8> {
        let a: Ipv6Addr = prefix.parse().unwrap();
        let sl = ((lifetime / 8) << 3) | plc;
        let mut o = vec![OPT_PREF64, 2];
        o.extend_from_slice(&sl.to_be_bytes());
        o.extend_from_slice(&a.octets()[..12]);
        o
    }

    /// RFC 8781 §4: scaled lifetime and PLC -> prefix length.
    #[test]
    fn rfc8781_section_4_pref64() {
        // A source link-layer address option first (type 1, length 1).
        let sll: &[u8] = &[1, 1, 2, 0, 0, 0, 0, 1];
        let m = ra(&[sll, &pref64(1800, 0, "64:ff9b::")]);
        let (p, life) = parse_ra(&m).unwrap();
        assert_eq!(p.to_string(), "64:ff9b::/96");
        assert_eq!(life, 1800);
        let m = ra(&[&pref64(600, 5, "2001:db8:ffff:ffff::")]);
        assert_eq!(parse_ra(&m).unwrap().0.to_string(), "2001:db8::/32");
        let m = ra(&[&pref64(600, 1, "2001:db8:1:2::")]);
        assert_eq!(parse_ra(&m).unwrap().0.to_string(), "2001:db8:1:2::/64");
    }

    #[test]
    fn rfc8781_invalid_options_ignored() {
        // Lifetime 0: the prefix must not be used.
        assert_eq!(parse_ra(&ra(&[&pref64(0, 0, "64:ff9b::")])), None);
        // PLC 6 and 7 are invalid.
        assert_eq!(parse_ra(&ra(&[&pref64(600, 6, "64:ff9b::")])), None);
        // RFC 4861 §4.6: zero-length option ends parsing.
        assert_eq!(
            parse_ra(&ra(&[
                &[1, 0, 0, 0, 0, 0, 0, 0],
                &pref64(600, 0, "64:ff9b::")
            ])),
            None
        );
        // Not an RA.
        let mut m = ra(&[&pref64(600, 0, "64:ff9b::")]);
        m[0] = 133;
        assert_eq!(parse_ra(&m), None);
    }
}
