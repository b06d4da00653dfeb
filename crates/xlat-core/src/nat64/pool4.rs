//! pool4: the IPv4 transport addresses of the NAT64, and the candidate
//! lists the port allocator probes (RFC 6146 §3.5.1.1, RFC 6056 §3.3.3).
//!
//! The pool is partitioned among the table shards: shard `s` owns every
//! port `p` with `(p >> 1) & (shards - 1) == s` (see the module doc of
//! [`super`] for why). Bit 0 is left out of the shard function so that
//! every shard has ports of both parities.

use super::Proto;
use crate::addr::Ipv4Prefix;
use core::net::Ipv4Addr;

/// Jool's default pool4 port range for TCP and UDP: above Linux's
/// ephemeral range (32768-60999), so the translator's own host sockets
/// never collide with NAT64 mappings.
pub const DEFAULT_PORTS: (u16, u16) = (61001, 65535);
/// Default ICMP identifier range (all identifiers).
pub const DEFAULT_ICMP_IDS: (u16, u16) = (0, 65535);

/// One pool4 line: addresses (a prefix), protocol, port range, mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool4Entry {
    /// Packets carry a mark (e.g. the fwmark); a 6->4 flow with mark `m`
    /// only gets addresses from entries with mark `m` (Jool's pool4 mark).
    pub mark: u32,
    pub proto: Proto,
    pub prefix: Ipv4Prefix,
    /// Inclusive port (or ICMP identifier) range.
    pub ports: (u16, u16),
}

impl Pool4Entry {
    /// An entry with mark 0 and the default range of the protocol.
    pub fn new(proto: Proto, prefix: Ipv4Prefix) -> Self {
        let ports = match proto {
            Proto::Icmp => DEFAULT_ICMP_IDS,
            _ => DEFAULT_PORTS,
        };
        Pool4Entry {
            mark: 0,
            proto,
            prefix,
            ports,
        }
    }

    /// The same prefix for TCP, UDP and ICMP with the default ranges.
    pub fn all_protocols(prefix: Ipv4Prefix) -> [Pool4Entry; 3] {
        [
            Pool4Entry::new(Proto::Tcp, prefix),
            Pool4Entry::new(Proto::Udp, prefix),
            Pool4Entry::new(Proto::Icmp, prefix),
        ]
    }
}

/// Candidate ports of a run of addresses: for each of the `naddrs`
/// addresses from `addr0`, the ports `first + k * step` for `k < count`
/// (`step` = 2 * shards). Flattened index `i` within the segment is
/// address `i / count`, port number `i % count` (address-major, so a
/// linear probe stays on one address as long as it can: RFC 4787 REQ-2,
/// "paired" address pooling, best effort).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seg {
    pub addr0: u32,
    pub first: u32,
    pub count: u32,
    /// Flattened index of this segment's first candidate in its lane.
    pub start: u64,
    /// Ordinal of `addr0` among the lane's addresses.
    pub astart: u64,
}

/// Candidates of one (shard, port class, parity).
#[derive(Debug, Clone, Default)]
pub(crate) struct Lane {
    pub segs: Vec<Seg>,
    pub total: u64,
    pub addrs: u64,
}

impl Lane {
    /// Segment index holding flattened index `i` (< total).
    pub fn seg_of(&self, i: u64) -> usize {
        self.segs.partition_point(|s| s.start <= i) - 1
    }

    /// Segment index holding address ordinal `a` (< addrs).
    pub fn seg_of_addr(&self, a: u64) -> usize {
        self.segs.partition_point(|s| s.astart <= a) - 1
    }

    /// (address, port) at flattened index `i`.
    pub fn at(&self, i: u64, step: u32) -> (u32, u16) {
        let s = &self.segs[self.seg_of(i)];
        let r = i - s.start;
        let a = s.addr0 + (r / u64::from(s.count)) as u32;
        let p = s.first + (r % u64::from(s.count)) as u32 * step;
        (a, p as u16)
    }
}

/// Everything the allocator needs for one (mark, protocol).
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub mark: u32,
    pub proto: Proto,
    /// `lanes[shard][class][parity]`; class 0 = ports 0-1023, class 1 =
    /// 1024-65535 (ICMP identifiers use class 1 only, see `class_of`).
    pub lanes: Vec<[[Lane; 2]; 2]>,
    pub step: u32,
}

/// RFC 6146 §3.5.1.1: the "well-known" class 0-1023 and the rest.
pub(crate) fn class_of(proto: Proto, port: u16) -> usize {
    if proto == Proto::Icmp || port >= 1024 {
        1
    } else {
        0
    }
}

fn class_bounds(proto: Proto, class: usize) -> (u32, u32) {
    if proto == Proto::Icmp {
        return if class == 1 { (0, 65535) } else { (1, 0) };
    }
    if class == 0 {
        (0, 1023)
    } else {
        (1024, 65535)
    }
}

/// Builds the plans for every (mark, protocol) in `entries`.
pub(crate) fn build_plans(entries: &[Pool4Entry], shards: usize) -> Vec<Plan> {
    let step = 2 * shards as u32;
    let mut plans: Vec<Plan> = Vec::new();
    for e in entries {
        let idx = match plans
            .iter()
            .position(|p| p.mark == e.mark && p.proto == e.proto)
        {
            Some(i) => i,
            None => {
                plans.push(Plan {
                    mark: e.mark,
                    proto: e.proto,
                    lanes: (0..shards).map(|_| Default::default()).collect(),
                    step,
                });
                plans.len() - 1
            }
        };
        let plan = &mut plans[idx];
        let addr0 = u32::from(e.prefix.addr());
        let naddrs = e.prefix.size().min(u64::from(u32::MAX)) as u32;
        for (s, lanes) in plan.lanes.iter_mut().enumerate() {
            for (class, by_parity) in lanes.iter_mut().enumerate() {
                let (clo, chi) = class_bounds(e.proto, class);
                let lo = u32::from(e.ports.0).max(clo);
                let hi = u32::from(e.ports.1).min(chi);
                if lo > hi {
                    continue;
                }
                for (parity, lane) in by_parity.iter_mut().enumerate() {
                    let b = 2 * s as u32 + parity as u32;
                    let first = if lo <= b {
                        b
                    } else {
                        b + (lo - b).div_ceil(step) * step
                    };
                    if first > hi {
                        continue;
                    }
                    let count = (hi - first) / step + 1;
                    lane.segs.push(Seg {
                        addr0,
                        first,
                        count,
                        start: lane.total,
                        astart: lane.addrs,
                    });
                    lane.total += u64::from(count) * u64::from(naddrs);
                    lane.addrs += u64::from(naddrs);
                }
            }
        }
    }
    plans
}

/// pool4 addresses as sorted, merged intervals: `[any, tcp, udp, icmp]`,
/// so the per-packet hairpin check is a binary search.
#[derive(Debug, Clone, Default)]
pub(crate) struct AddrIndex {
    lists: [Vec<(u32, u32)>; 4],
}

impl AddrIndex {
    pub fn new(entries: &[Pool4Entry]) -> AddrIndex {
        let mut idx = AddrIndex::default();
        for (i, list) in idx.lists.iter_mut().enumerate() {
            let mut v: Vec<(u32, u32)> = entries
                .iter()
                .filter(|e| i == 0 || e.proto as usize == i - 1)
                .map(|e| {
                    let a = u32::from(e.prefix.addr());
                    (a, a + (e.prefix.size() - 1) as u32)
                })
                .collect();
            v.sort_unstable();
            let mut merged: Vec<(u32, u32)> = Vec::with_capacity(v.len());
            for (a, b) in v {
                match merged.last_mut() {
                    Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            *list = merged;
        }
        idx
    }

    pub fn contains(&self, proto: Option<Proto>, addr: Ipv4Addr) -> bool {
        let list = &self.lists[proto.map_or(0, |p| p as usize + 1)];
        let a = u32::from(addr);
        let i = list.partition_point(|r| r.0 <= a);
        i > 0 && list[i - 1].1 >= a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(proto: Proto, prefix: &str, ports: (u16, u16)) -> Pool4Entry {
        Pool4Entry {
            mark: 0,
            proto,
            prefix: prefix.parse().unwrap(),
            ports,
        }
    }

    /// RFC 6146 §3.5.1.1 candidate lanes: every candidate is in range, in
    /// its class, of its parity and owned by its shard, and the lanes
    /// together hold exactly the configured transport addresses.
    #[test]
    fn lanes_partition_the_pool() {
        let entries = [
            entry(Proto::Udp, "192.0.2.0/30", (1000, 1100)),
            entry(Proto::Udp, "198.51.100.7/32", (60000, 60100)),
        ];
        for shards in [1usize, 2, 4, 8] {
            let plans = build_plans(&entries, shards);
            assert_eq!(plans.len(), 1);
            let plan = &plans[0];
            let mut all = std::collections::HashSet::new();
            for (s, lanes) in plan.lanes.iter().enumerate() {
                for (class, by_par) in lanes.iter().enumerate() {
                    for (par, lane) in by_par.iter().enumerate() {
                        for i in 0..lane.total {
                            let (a, p) = lane.at(i, plan.step);
                            assert_eq!((usize::from(p) >> 1) & (shards - 1), s);
                            assert_eq!(usize::from(p & 1), par);
                            assert_eq!(class_of(Proto::Udp, p), class);
                            assert!(all.insert((a, p)), "duplicate {a} {p}");
                        }
                    }
                }
            }
            assert_eq!(all.len(), 4 * 101 + 101);
            for (a, p) in &all {
                let a = Ipv4Addr::from(*a);
                assert!(entries
                    .iter()
                    .any(|e| e.prefix.contains(a) && (e.ports.0..=e.ports.1).contains(p)));
            }
        }
    }

    /// RFC 6146 §3.8 needs "is this a pool4 address": merged intervals.
    #[test]
    fn addr_index_per_protocol() {
        let entries = [
            entry(Proto::Tcp, "192.0.2.0/31", (1, 2)),
            entry(Proto::Tcp, "192.0.2.2/31", (1, 2)),
            entry(Proto::Icmp, "198.51.100.0/24", (1, 2)),
        ];
        let idx = AddrIndex::new(&entries);
        let a = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(idx.lists[0].len(), 2, "adjacent prefixes merged");
        assert!(idx.contains(Some(Proto::Tcp), a("192.0.2.3")));
        assert!(!idx.contains(Some(Proto::Tcp), a("192.0.2.4")));
        assert!(!idx.contains(Some(Proto::Udp), a("192.0.2.1")));
        assert!(idx.contains(None, a("198.51.100.255")));
        assert!(!idx.contains(Some(Proto::Tcp), a("198.51.100.1")));
        assert!(!idx.contains(None, a("0.0.0.0")));
        assert!(!idx.contains(None, a("255.255.255.255")));
    }
}
