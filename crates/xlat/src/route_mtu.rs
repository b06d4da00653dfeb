//! Route MTUs for the eBPF fast path.
//!
//! `bpf_fib_lookup` reports the MTU of a route's `mtu` attribute only when
//! it is locked (`mtu lock`): otherwise it gives the device's MTU or a
//! learned path MTU, while the kernel's own forwarding always honours the
//! route's attribute (`ip route add ... mtu 1400`, common on tunnels and
//! overlays). So the loader reads the routes that carry an MTU and gives
//! the program, per output device and family, the smallest of them
//! (`xlat_route_mtu`); a translated packet above it takes the slow path,
//! whose kernel forwarding sends Fragmentation Needed / Packet Too Big
//! (RFC 7915 §4, §5). That is conservative: a big packet to another route
//! of that device takes the slow path too (counted `passed_too_big`).
//!
//! The routes are read with an rtnetlink dump (RTM_GETROUTE) of every
//! table, at start and after every batch of route notifications
//! (route_watch.rs), before the route cache is invalidated.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;

const RTM_GETROUTE: u16 = 26;
const RTM_NEWROUTE: u16 = 24;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_HDRLEN: usize = 16;
const RTMSG_LEN: usize = 12;
const RTA_OIF: u16 = 4;
const RTA_METRICS: u16 = 8;
const RTA_MULTIPATH: u16 = 9;
const RTAX_MTU: u16 = 2;
/// The nested flag of an attribute type (NLA_F_NESTED), and the byte-order flag.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A route that carries an MTU: its family (`AF_INET`/`AF_INET6`), its
/// output device (0: not known, e.g. a nexthop object: applies to every
/// device) and the MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteMtu {
    pub family: u8,
    pub oif: u32,
    pub mtu: u32,
}

/// What a buffer of dump replies held.
#[derive(Debug, PartialEq, Eq)]
pub enum Part {
    /// More messages follow.
    More,
    /// NLMSG_DONE: the dump is complete.
    Done,
    /// The kernel refused the dump (an errno), or the messages are malformed.
    Error(String),
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(i..i + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

/// The attributes (type, payload) of `b`, an rtattr/nlattr sequence; stops
/// at the first malformed one.
fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut i = 0;
    std::iter::from_fn(move || {
        let len = u16_at(b, i)? as usize;
        let ty = u16_at(b, i + 2)? & NLA_TYPE_MASK;
        if len < 4 || i + len > b.len() {
            return None;
        }
        let payload = &b[i + 4..i + len];
        i += (len + 3) & !3;
        Some((ty, payload))
    })
}

/// The RTAX_MTU of an RTA_METRICS payload (0: none).
fn metrics_mtu(b: &[u8]) -> u32 {
    attrs(b)
        .find(|(t, p)| *t == RTAX_MTU && p.len() >= 4)
        .and_then(|(_, p)| u32_at(p, 0))
        .unwrap_or(0)
}

/// The output devices of an RTA_MULTIPATH payload (struct rtnexthop:
/// len u16, flags u8, hops u8, ifindex i32, then attributes).
fn multipath_oifs(b: &[u8], out: &mut Vec<u32>) {
    let mut i = 0;
    while let Some(len) = u16_at(b, i) {
        let len = len as usize;
        if len < 8 || i + len > b.len() {
            return;
        }
        if let Some(ifi) = u32_at(b, i + 4) {
            out.push(ifi);
        }
        i += (len + 3) & !3;
    }
}

/// Parses one buffer of RTM_GETROUTE dump replies, appending the routes
/// that carry an MTU to `out`.
pub fn parse(buf: &[u8], out: &mut Vec<RouteMtu>) -> Part {
    let mut i = 0;
    while i + NLMSG_HDRLEN <= buf.len() {
        let len = u32_at(buf, i).unwrap_or(0) as usize;
        let ty = u16_at(buf, i + 4).unwrap_or(0);
        if len < NLMSG_HDRLEN || i + len > buf.len() {
            return Part::Error(format!("malformed rtnetlink message (length {len})"));
        }
        let body = &buf[i + NLMSG_HDRLEN..i + len];
        match ty {
            NLMSG_DONE => return Part::Done,
            NLMSG_ERROR => {
                let errno = u32_at(body, 0).map_or(0, |e| -(e as i32));
                if errno != 0 {
                    return Part::Error(std::io::Error::from_raw_os_error(errno).to_string());
                }
            }
            RTM_NEWROUTE if body.len() >= RTMSG_LEN => {
                let family = body[0];
                let mut mtu = 0;
                let mut oifs = Vec::new();
                for (t, p) in attrs(&body[RTMSG_LEN..]) {
                    match t {
                        RTA_OIF => oifs.extend(u32_at(p, 0)),
                        RTA_METRICS => mtu = metrics_mtu(p),
                        RTA_MULTIPATH => multipath_oifs(p, &mut oifs),
                        _ => {}
                    }
                }
                if mtu != 0 {
                    if oifs.is_empty() {
                        oifs.push(0);
                    }
                    for oif in oifs {
                        out.push(RouteMtu { family, oif, mtu });
                    }
                }
            }
            _ => {}
        }
        i += (len + 3) & !3;
    }
    Part::More
}

/// At most this many (device, family) minima are kept; beyond, one per
/// family for every device (more conservative, still correct). The map
/// holds twice as many: the new entries are written before the old go.
pub const MAX_KEYS: usize = 1024;

/// The smallest route MTU per (output device, family); device 0 applies
/// to every device.
pub fn minima(routes: &[RouteMtu]) -> BTreeMap<(u32, u8), u32> {
    let mut m: BTreeMap<(u32, u8), u32> = BTreeMap::new();
    for r in routes {
        let e = m.entry((r.oif, r.family)).or_insert(r.mtu);
        *e = (*e).min(r.mtu);
    }
    if m.len() > MAX_KEYS {
        let mut all: BTreeMap<(u32, u8), u32> = BTreeMap::new();
        for ((_, f), mtu) in m {
            let e = all.entry((0, f)).or_insert(mtu);
            *e = (*e).min(mtu);
        }
        return all;
    }
    m
}

/// Dumps the routes of every table of both families (the calling thread's
/// network namespace) and returns those that carry an MTU.
pub fn dump() -> Result<Vec<RouteMtu>, String> {
    // A dump that stalls must not stall the watcher for ever.
    let fd = crate::route_watch::rtnetlink_socket(2)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    for (seq, family) in [(1u32, libc::AF_INET as u8), (2, libc::AF_INET6 as u8)] {
        let mut req = [0u8; NLMSG_HDRLEN + RTMSG_LEN];
        req[0..4].copy_from_slice(&((NLMSG_HDRLEN + RTMSG_LEN) as u32).to_ne_bytes());
        req[4..6].copy_from_slice(&RTM_GETROUTE.to_ne_bytes());
        req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        req[8..12].copy_from_slice(&seq.to_ne_bytes());
        req[NLMSG_HDRLEN] = family;
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                req.as_ptr() as *const libc::c_void,
                req.len(),
                0,
            )
        };
        if n < 0 {
            return Err(format!(
                "rtnetlink route dump: {}",
                std::io::Error::last_os_error()
            ));
        }
        loop {
            let n = match crate::route_watch::recv(&fd, &mut buf, 0) {
                Ok(0) => return Err("rtnetlink route dump: socket closed".into()),
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(format!("rtnetlink route dump: {e}")),
            };
            match parse(&buf[..n], &mut out) {
                Part::More => {}
                Part::Done => break,
                Part::Error(e) => return Err(format!("rtnetlink route dump: {e}")),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend(((4 + payload.len()) as u16).to_ne_bytes());
        a.extend(ty.to_ne_bytes());
        a.extend(payload);
        while !a.len().is_multiple_of(4) {
            a.push(0);
        }
        a
    }

    fn msg(ty: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend(((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
        m.extend(ty.to_ne_bytes());
        m.extend(2u16.to_ne_bytes());
        m.extend(1u32.to_ne_bytes());
        m.extend(0u32.to_ne_bytes());
        m.extend(body);
        m
    }

    fn route(family: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![family, 24, 0, 0, 254, 3, 0, 1, 0, 0, 0, 0];
        for a in attrs {
            b.extend(a);
        }
        msg(RTM_NEWROUTE, &b)
    }

    /// `ip route add 198.51.100.0/24 dev X mtu 1300` as the kernel dumps it:
    /// RTA_OIF, RTA_METRICS { RTAX_MTU } (nested flag set).
    #[test]
    fn a_route_with_an_mtu_and_one_without() {
        let metrics = attr(RTAX_MTU, &1300u32.to_ne_bytes());
        let mut buf = route(
            2,
            &[
                attr(RTA_OIF, &7u32.to_ne_bytes()),
                attr(RTA_METRICS | 0x8000, &metrics),
            ],
        );
        buf.extend(route(2, &[attr(RTA_OIF, &8u32.to_ne_bytes())]));
        let mut out = vec![];
        assert_eq!(parse(&buf, &mut out), Part::More);
        assert_eq!(
            out,
            vec![RouteMtu {
                family: 2,
                oif: 7,
                mtu: 1300
            }]
        );
        assert_eq!(parse(&msg(NLMSG_DONE, &[0; 4]), &mut out), Part::Done);
    }

    #[test]
    fn multipath_and_nexthop_object_routes() {
        let metrics = attr(RTAX_MTU, &1400u32.to_ne_bytes());
        // Two rtnexthops (len 8, flags, hops, ifindex) on devices 3 and 4.
        let mut mp = Vec::new();
        for ifi in [3u32, 4] {
            mp.extend(8u16.to_ne_bytes());
            mp.extend([0, 0]);
            mp.extend(ifi.to_ne_bytes());
        }
        let mut buf = route(10, &[attr(RTA_MULTIPATH, &mp), attr(RTA_METRICS, &metrics)]);
        // A route through a nexthop object (RTA_NH_ID = 30): no device here.
        buf.extend(route(
            10,
            &[attr(30, &5u32.to_ne_bytes()), attr(RTA_METRICS, &metrics)],
        ));
        let mut out = vec![];
        assert_eq!(parse(&buf, &mut out), Part::More);
        let oifs: Vec<u32> = out.iter().map(|r| r.oif).collect();
        assert_eq!(oifs, vec![3, 4, 0]);
        assert!(out.iter().all(|r| r.family == 10 && r.mtu == 1400));
    }

    #[test]
    fn errors_and_malformed_messages() {
        let mut out = vec![];
        let err = msg(NLMSG_ERROR, &(-(libc::EPERM)).to_ne_bytes());
        assert!(matches!(parse(&err, &mut out), Part::Error(_)));
        // An acknowledgement (error 0) is not an error.
        assert_eq!(parse(&msg(NLMSG_ERROR, &[0; 4]), &mut out), Part::More);
        let mut bad = route(2, &[]);
        bad[0..4].copy_from_slice(&4000u32.to_ne_bytes());
        assert!(matches!(parse(&bad, &mut out), Part::Error(_)));
        // A truncated attribute ends the attributes, not the parse.
        let mut b = vec![2, 24, 0, 0, 254, 3, 0, 1, 0, 0, 0, 0];
        b.extend([200, 0, 8, 0]);
        assert_eq!(parse(&msg(RTM_NEWROUTE, &b), &mut out), Part::More);
        assert!(out.is_empty());
    }

    #[test]
    fn minima_per_device_and_family() {
        let r = |family, oif, mtu| RouteMtu { family, oif, mtu };
        let m = minima(&[r(2, 7, 1400), r(2, 7, 1300), r(10, 7, 1450), r(2, 0, 1350)]);
        assert_eq!(m.get(&(7, 2)), Some(&1300));
        assert_eq!(m.get(&(7, 10)), Some(&1450));
        assert_eq!(m.get(&(0, 2)), Some(&1350));
        let many: Vec<RouteMtu> = (1..=MAX_KEYS as u32 + 1)
            .map(|i| r(2, i, 1300 + i))
            .collect();
        let m = minima(&many);
        assert_eq!(m.len(), 1);
        assert_eq!(m.get(&(0, 2)), Some(&1301));
    }
}
