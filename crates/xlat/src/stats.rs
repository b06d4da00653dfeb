//! Per-worker counters: one cache-line aligned block of `AtomicU64` per
//! worker, written with Relaxed stores by its owner only, summed on demand
//! by `xlat stats` and the metrics endpoint.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use xlat_core::nat64::{Counts, Nat64State, Proto};
use xlat_core::DropReason;

/// The datapath's own counters, by index.
pub const NAMES: [&str; 21] = [
    "translated_4to6_packets",
    "translated_4to6_bytes",
    "translated_6to4_packets",
    "translated_6to4_bytes",
    "icmp_errors_sent",
    "fragments_emitted",
    "received_packets",
    "received_bytes",
    "dropped_packets",
    "tun_read_errors",
    "tun_write_errors",
    "gso_packets",
    "gso_untranslatable",
    "translator_panics",
    "icmp_reassembled",
    "routing_loop_packets",
    "icmp_errors_rate_limited",
    "fragments_held",
    "udp_checksum_zero_reassembled",
    "reassembly_fragments_held",
    "nat64_tcp_probes_sent",
];
pub const T46_PKTS: usize = 0;
pub const T46_BYTES: usize = 1;
pub const T64_PKTS: usize = 2;
pub const T64_BYTES: usize = 3;
pub const ICMP_ERRORS: usize = 4;
pub const FRAGMENTS: usize = 5;
pub const RX_PKTS: usize = 6;
pub const RX_BYTES: usize = 7;
pub const DROPPED: usize = 8;
pub const READ_ERRORS: usize = 9;
pub const WRITE_ERRORS: usize = 10;
pub const GSO_PKTS: usize = 11;
pub const GSO_BAD: usize = 12;
pub const PANICS: usize = 13;
/// ICMP messages put back together from fragments (crate::reasm).
pub const ICMP_REASSEMBLED: usize = 14;
/// Packets the kernel routed back into the TUN more than once (crate::loop_guard).
pub const ROUTING_LOOP: usize = 15;
/// ICMP errors not sent: over `icmp-errors-per-second` (crate::icmp_limit).
pub const ICMP_RATE_LIMITED: usize = 16;
/// NAT64 fragments held until their first fragment came (not translated yet).
pub const FRAGMENTS_HELD: usize = 17;
/// NAT64: IPv4 UDP datagrams without checksum put back together from
/// fragments to calculate it (RFC 6146 §3.4, crate::reasm).
pub const UDP_REASSEMBLED: usize = 18;
/// Fragments kept by a reassembly (ICMP, NAT64 UDP without checksum) until
/// their message was whole: not translated on their own (crate::reasm).
pub const REASSEMBLY_HELD: usize = 19;
/// NAT64: the probes of TCP sessions whose TCP_EST ran out (RFC 6146
/// §3.5.2.2), one per endpoint probed.
pub const TCP_PROBES: usize = 20;
pub const FIXED: usize = NAMES.len();
pub const TOTAL: usize = FIXED + DropReason::COUNT;

/// One worker's counters, on their own cache lines.
#[repr(align(64))]
pub struct WorkerCounters {
    v: [AtomicU64; TOTAL],
}

impl Default for WorkerCounters {
    fn default() -> Self {
        WorkerCounters {
            v: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl WorkerCounters {
    /// Only the owning worker writes, so load + store is enough (no RMW).
    #[inline]
    pub fn add(&self, i: usize, n: u64) {
        let c = &self.v[i];
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
    /// `n` packets not translated for reason `r`: the reason and
    /// `dropped_packets`.
    #[inline]
    pub fn dropped(&self, r: DropReason, n: u64) {
        self.add(FIXED + r as usize, n);
        self.add(DROPPED, n);
    }
    pub fn get(&self, i: usize) -> u64 {
        self.v[i].load(Ordering::Relaxed)
    }
}

/// All counters of the process.
#[derive(Default)]
pub struct Registry {
    workers: Mutex<Vec<Arc<WorkerCounters>>>,
    /// Control-plane counters (rare; atomics with fetch_add).
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
    /// The NAT64 state (mode = "nat64"): table sizes are reported with the counters.
    pub nat64: OnceLock<Arc<Nat64State>>,
    /// The eBPF fast path's per-CPU counters, when it is in use.
    pub fast: OnceLock<Arc<crate::ebpf::Counters>>,
    /// The NAT64 flow cache of the fast path (mode = "nat64", kind = "ebpf").
    pub flows: OnceLock<Arc<crate::ebpf::FlowCache>>,
    /// CLAT with pool6 discovery (RFC 7050 / RFC 8781): its counters.
    pub discovery: OnceLock<Arc<DiscoveryCounters>>,
}

/// Counters of the CLAT's pool6 discovery (docs/clat.md).
#[derive(Debug, Default)]
pub struct DiscoveryCounters {
    /// Discoveries that gave a prefix (at start and later).
    pub ok: AtomicU64,
    /// Discoveries that gave nothing (the prefix in use was kept).
    pub failed: AtomicU64,
    /// Times the prefix in use was replaced.
    pub changes: AtomicU64,
    /// Router Advertisements ignored (RFC 4861 §6.1.2: source not
    /// link-local or hop limit not 255; or from the customer side, see
    /// `rfc8781::CustomerSide`).
    pub ra_ignored: AtomicU64,
}

impl DiscoveryCounters {
    pub const NAMES: [&'static str; 4] = [
        "pool6_discoveries",
        "pool6_discovery_failures",
        "pool6_changes",
        "pool6_ra_ignored",
    ];
    /// The metrics' HELP text of each of [`Self::NAMES`].
    pub const HELP: [&'static str; 4] = [
        "pool6 discoveries that found a prefix (RFC 7050, RFC 8781).",
        "pool6 discoveries that found nothing usable (the prefix in use was kept).",
        "Times the pool6 prefix in use was replaced.",
        "Router Advertisements ignored (source not link-local or hop limit not 255, RFC 4861 section 6.1.2; arrived on the CLAT's customer side, or on an interface not in [clat] ra-interfaces).",
    ];
    fn read(&self) -> [u64; 4] {
        [
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.changes.load(Ordering::Relaxed),
            self.ra_ignored.load(Ordering::Relaxed),
        ]
    }
}

/// When the daemon became ready (seconds since the Unix epoch): the
/// metrics' `xlat_start_time_seconds`, so that a scraper tells a restart
/// (counters from zero) from a counter reset.
static STARTED_UNIX: OnceLock<f64> = OnceLock::new();

/// Records the start time (the first call counts).
pub fn mark_started() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let _ = STARTED_UNIX.set(now);
}

/// A summed snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub fixed: [u64; FIXED],
    pub drops: Vec<(DropReason, u64)>,
    pub reloads: u64,
    pub reload_failures: u64,
    pub nat64: Option<Counts>,
    /// NAT64 sessions removed because a reloaded pool4 no longer covers them.
    pub nat64_pool4_drained: u64,
    /// The eBPF fast path's counters (names in `ebpf::COUNTERS`), or None
    /// when the TUN datapath runs alone.
    pub fast: Option<[u64; crate::ebpf::COUNTERS.len()]>,
    /// The NAT64 flow cache's counters (names in `ebpf::FLOW_COUNTERS`).
    pub flows: Option<[u64; crate::ebpf::FLOW_COUNTERS.len()]>,
    /// pool6 discovery counters (names in `DiscoveryCounters::NAMES`).
    pub discovery: Option<[u64; 4]>,
}

impl Registry {
    pub fn new_worker(&self) -> Arc<WorkerCounters> {
        let w = Arc::new(WorkerCounters::default());
        self.workers.lock().unwrap().push(w.clone());
        w
    }

    pub fn snapshot(&self) -> Snapshot {
        let ws = self.workers.lock().unwrap();
        let mut fixed = [0u64; FIXED];
        for (i, f) in fixed.iter_mut().enumerate() {
            *f = ws.iter().map(|w| w.get(i)).sum();
        }
        // Held NAT64 fragments that timed out were not translated.
        fixed[DROPPED] += self.nat64.get().map_or(0, |s| s.frag_timeouts());
        let drops = DropReason::ALL
            .iter()
            .map(|r| {
                let mut n: u64 = ws.iter().map(|w| w.get(FIXED + *r as usize)).sum();
                // Held NAT64 fragments time out in the housekeeping thread,
                // which has no worker counters: the state counts them.
                if *r == DropReason::Nat64FragmentTimeout {
                    n += self.nat64.get().map_or(0, |s| s.frag_timeouts());
                }
                (*r, n)
            })
            .collect();
        Snapshot {
            fixed,
            drops,
            reloads: self.reloads.load(Ordering::Relaxed),
            reload_failures: self.reload_failures.load(Ordering::Relaxed),
            nat64: self.nat64.get().map(|n| n.counts()),
            nat64_pool4_drained: self.nat64.get().map_or(0, |n| n.pool4_drained_sessions()),
            fast: self.fast.get().map(|c| c.read()),
            flows: self.flows.get().map(|c| c.counters()),
            discovery: self.discovery.get().map(|c| c.read()),
        }
    }
}

impl Snapshot {
    /// `(name, value)` for every counter, drop reasons by `name()`.
    pub fn pairs(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = NAMES
            .iter()
            .zip(self.fixed.iter())
            .map(|(n, x)| (n.to_string(), *x))
            .collect();
        v.push(("config_reloads".into(), self.reloads));
        v.push(("config_reload_failures".into(), self.reload_failures));
        if let Some(d) = &self.discovery {
            for (n, x) in DiscoveryCounters::NAMES.iter().zip(d.iter()) {
                v.push((n.to_string(), *x));
            }
        }
        v.extend(self.drops.iter().map(|(r, x)| (r.name().to_string(), *x)));
        // Split by datapath (the order of docs/configuration.md): the
        // counters above are the TUN datapath's, `ebpf_*` the fast path's
        // (docs/datapaths.md).
        v.push(("datapath_ebpf".into(), u64::from(self.fast.is_some())));
        if let Some(f) = &self.fast {
            for (n, x) in crate::ebpf::COUNTERS.iter().zip(f.iter()) {
                v.push((format!("ebpf_{n}"), *x));
            }
        }
        if let Some(f) = &self.flows {
            for (n, x) in crate::ebpf::FLOW_COUNTERS.iter().zip(f.iter()) {
                v.push((format!("ebpf_{n}"), *x));
            }
        }
        if let Some(c) = &self.nat64 {
            for p in Proto::ALL {
                v.push((
                    format!("nat64_sessions_{}", p.name()),
                    c.sessions[p as usize] as u64,
                ));
            }
            for p in Proto::ALL {
                v.push((format!("nat64_bib_{}", p.name()), c.bib[p as usize] as u64));
            }
            v.push(("nat64_stored_syns".into(), c.stored_syns as u64));
            v.push((
                "nat64_pool4_drained_sessions".into(),
                self.nat64_pool4_drained,
            ));
        }
        v
    }

    /// Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let f = &self.fixed;
        let _ = writeln!(
            o,
            "# HELP xlat_packets_total Packets translated by the TUN datapath (the eBPF fast path's: xlat_ebpf_packets_total), by direction."
        );
        let _ = writeln!(o, "# TYPE xlat_packets_total counter");
        let _ = writeln!(
            o,
            "xlat_packets_total{{direction=\"4to6\"}} {}",
            f[T46_PKTS]
        );
        let _ = writeln!(
            o,
            "xlat_packets_total{{direction=\"6to4\"}} {}",
            f[T64_PKTS]
        );
        if let Some(d) = &self.discovery {
            for ((n, h), x) in DiscoveryCounters::NAMES
                .iter()
                .zip(DiscoveryCounters::HELP)
                .zip(d.iter())
            {
                let _ = writeln!(
                    o,
                    "# HELP xlat_{n}_total {h}\n# TYPE xlat_{n}_total counter\nxlat_{n}_total {x}"
                );
            }
        }
        if let Some(fx) = &self.fast {
            use crate::ebpf::{COUNTERS, C_V4TO6, C_V4TO6_BYTES, C_V6TO4, C_V6TO4_BYTES};
            let _ = writeln!(
                o,
                "# HELP xlat_ebpf_packets_total Packets translated by the eBPF fast path, by direction.\n# TYPE xlat_ebpf_packets_total counter"
            );
            let _ = writeln!(
                o,
                "xlat_ebpf_packets_total{{direction=\"4to6\"}} {}\nxlat_ebpf_packets_total{{direction=\"6to4\"}} {}",
                fx[C_V4TO6], fx[C_V6TO4]
            );
            let _ = writeln!(
                o,
                "# HELP xlat_ebpf_bytes_total Bytes of the packets translated by the eBPF fast path (IP packets after translation), by direction.\n# TYPE xlat_ebpf_bytes_total counter"
            );
            let _ = writeln!(
                o,
                "xlat_ebpf_bytes_total{{direction=\"4to6\"}} {}\nxlat_ebpf_bytes_total{{direction=\"6to4\"}} {}",
                fx[C_V4TO6_BYTES], fx[C_V6TO4_BYTES]
            );
            let _ = writeln!(
                o,
                "# HELP xlat_ebpf_passed_total Packets the eBPF fast path left to the kernel / TUN datapath, by reason.\n# TYPE xlat_ebpf_passed_total counter"
            );
            for (n, x) in COUNTERS.iter().zip(fx.iter()) {
                if let Some(r) = n.strip_prefix("passed_") {
                    let _ = writeln!(o, "xlat_ebpf_passed_total{{reason=\"{r}\"}} {x}");
                }
            }
            let _ = writeln!(
                o,
                "# HELP xlat_ebpf_dropped_total Packets the eBPF fast path dropped after a helper failed mid-translation.\n# TYPE xlat_ebpf_dropped_total counter\nxlat_ebpf_dropped_total {}",
                fx[crate::ebpf::D_ERROR]
            );
        }
        if let Some(f) = &self.flows {
            let _ = writeln!(
                o,
                "# HELP xlat_ebpf_nat64_flows NAT64 sessions in the eBPF flow cache.\n# TYPE xlat_ebpf_nat64_flows gauge\nxlat_ebpf_nat64_flows {}",
                f[0]
            );
            let _ = writeln!(
                o,
                "# HELP xlat_ebpf_nat64_flow_events_total NAT64 flow cache events (inserted, removed, cache_full; not_cached: every session left on the slow path, cache_full included).\n# TYPE xlat_ebpf_nat64_flow_events_total counter"
            );
            for (i, e) in ["inserted", "removed", "cache_full", "not_cached"]
                .iter()
                .enumerate()
            {
                let _ = writeln!(
                    o,
                    "xlat_ebpf_nat64_flow_events_total{{event=\"{e}\"}} {}",
                    f[i + 1]
                );
            }
        }
        let _ = writeln!(
            o,
            "# HELP xlat_bytes_total Bytes of packets translated by the TUN datapath (the eBPF fast path's: xlat_ebpf_bytes_total), by direction."
        );
        let _ = writeln!(o, "# TYPE xlat_bytes_total counter");
        let _ = writeln!(o, "xlat_bytes_total{{direction=\"4to6\"}} {}", f[T46_BYTES]);
        let _ = writeln!(o, "xlat_bytes_total{{direction=\"6to4\"}} {}", f[T64_BYTES]);
        let simple = [
            (
                "xlat_received_packets_total",
                RX_PKTS,
                "Packets read from the TUN device.",
            ),
            (
                "xlat_received_bytes_total",
                RX_BYTES,
                "Bytes read from the TUN device.",
            ),
            (
                "xlat_icmp_errors_sent_total",
                ICMP_ERRORS,
                "ICMP errors sent instead of a translation.",
            ),
            (
                "xlat_icmp_errors_rate_limited_total",
                ICMP_RATE_LIMITED,
                "ICMP errors not sent: over icmp-errors-per-second (RFC 4443 section 2.4).",
            ),
            (
                "xlat_fragments_held_total",
                FRAGMENTS_HELD,
                "NAT64 fragments held until their first fragment came (RFC 6146 section 3.4); counted as translated or dropped when it comes or not.",
            ),
            (
                "xlat_fragments_emitted_total",
                FRAGMENTS,
                "Pieces xlat cut IPv4 packets without DF into (RFC 7915 section 4).",
            ),
            (
                "xlat_dropped_packets_total",
                DROPPED,
                "Packets not translated (all reasons, ICMP-answered included).",
            ),
            (
                "xlat_tun_read_errors_total",
                READ_ERRORS,
                "Errors reading the TUN device.",
            ),
            (
                "xlat_tun_write_errors_total",
                WRITE_ERRORS,
                "Errors writing the TUN device.",
            ),
            (
                "xlat_gso_packets_total",
                GSO_PKTS,
                "GSO super-packets translated.",
            ),
            (
                "xlat_gso_untranslatable_total",
                GSO_BAD,
                "GSO super-packets that could not be translated as one.",
            ),
            (
                "xlat_translator_panics_total",
                PANICS,
                "Packets whose translation panicked (caught, packet dropped).",
            ),
            (
                "xlat_icmp_reassembled_total",
                ICMP_REASSEMBLED,
                "Fragmented ICMP messages reassembled to be translated whole.",
            ),
            (
                "xlat_udp_checksum_zero_reassembled_total",
                UDP_REASSEMBLED,
                "NAT64: IPv4 UDP datagrams without checksum reassembled to calculate it (RFC 6146 section 3.4).",
            ),
            (
                "xlat_reassembly_fragments_held_total",
                REASSEMBLY_HELD,
                "Fragments kept by a reassembly and translated with their whole message (counted when it is whole; fragments of one never whole are drops).",
            ),
            (
                "xlat_nat64_tcp_probes_sent_total",
                TCP_PROBES,
                "NAT64: probes (an ACK with zero sequence numbers) of TCP sessions whose TCP_EST ran out, one per endpoint (RFC 6146 section 3.5.2.2).",
            ),
            (
                "xlat_routing_loop_packets_total",
                ROUTING_LOOP,
                "Packets the kernel routed back into the TUN more than once (a routing loop; their TTL is decremented so that it ends).",
            ),
        ];
        for (name, i, help) in simple {
            let _ = writeln!(
                o,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                f[i]
            );
        }
        let _ = writeln!(
            o,
            "# HELP xlat_drops_total Packets not translated, by reason."
        );
        let _ = writeln!(o, "# TYPE xlat_drops_total counter");
        for (r, x) in &self.drops {
            let _ = writeln!(o, "xlat_drops_total{{reason=\"{}\"}} {x}", r.name());
        }
        if let Some(t) = STARTED_UNIX.get() {
            let _ = writeln!(
                o,
                "# HELP xlat_start_time_seconds When the daemon became ready, in seconds since the Unix epoch.\n# TYPE xlat_start_time_seconds gauge\nxlat_start_time_seconds {t:.3}"
            );
        }
        let _ = writeln!(
            o,
            "# HELP xlat_config_reloads_total Successful configuration reloads."
        );
        let _ = writeln!(o, "# TYPE xlat_config_reloads_total counter");
        let _ = writeln!(o, "xlat_config_reloads_total {}", self.reloads);
        let _ = writeln!(
            o,
            "# HELP xlat_config_reload_failures_total Configuration reloads refused (the running configuration stayed).\n# TYPE xlat_config_reload_failures_total counter\nxlat_config_reload_failures_total {}",
            self.reload_failures
        );
        if let Some(c) = &self.nat64 {
            let _ = writeln!(
                o,
                "# HELP xlat_nat64_sessions NAT64 sessions (RFC 6146 3.2), by protocol.\n# TYPE xlat_nat64_sessions gauge"
            );
            for p in Proto::ALL {
                let _ = writeln!(
                    o,
                    "xlat_nat64_sessions{{protocol=\"{}\"}} {}",
                    p.name(),
                    c.sessions[p as usize]
                );
            }
            let _ = writeln!(
                o,
                "# HELP xlat_nat64_bib_entries NAT64 BIB entries (RFC 6146 3.1), by protocol.\n# TYPE xlat_nat64_bib_entries gauge"
            );
            for p in Proto::ALL {
                let _ = writeln!(
                    o,
                    "xlat_nat64_bib_entries{{protocol=\"{}\"}} {}",
                    p.name(),
                    c.bib[p as usize]
                );
            }
            let _ = writeln!(
                o,
                "# HELP xlat_nat64_stored_syns IPv4 SYNs held without a session (RFC 6146 3.5.2.2).\n# TYPE xlat_nat64_stored_syns gauge\nxlat_nat64_stored_syns {}",
                c.stored_syns
            );
            let _ = writeln!(
                o,
                "# HELP xlat_nat64_pool4_drained_sessions_total NAT64 sessions removed by a pool4 change on reload.\n# TYPE xlat_nat64_pool4_drained_sessions_total counter\nxlat_nat64_pool4_drained_sessions_total {}",
                self.nat64_pool4_drained
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_across_workers_and_lists_every_reason() {
        let r = Registry::default();
        let a = r.new_worker();
        let b = r.new_worker();
        a.add(T46_PKTS, 2);
        b.add(T46_PKTS, 3);
        b.dropped(DropReason::Src4Denied, 1);
        let s = r.snapshot();
        assert_eq!(s.fixed[T46_PKTS], 5);
        assert_eq!(s.fixed[DROPPED], 1);
        let p = s.pairs();
        // + config_reloads, config_reload_failures, datapath_ebpf.
        assert_eq!(p.len(), FIXED + 3 + DropReason::COUNT);
        assert!(p.contains(&("datapath_ebpf".to_string(), 0)));
        assert!(!p.iter().any(|(k, _)| k.starts_with("ebpf_")));
        assert!(p.contains(&("src4_denied".to_string(), 1)));
        assert!(p.contains(&("ipv4_truncated".to_string(), 0)));
        // The order of docs/configuration.md: the TUN datapath's counters
        // (fixed ones, reloads, drop reasons), then the datapath split.
        let at = |k: &str| p.iter().position(|(n, _)| n == k).unwrap();
        assert!(at(NAMES[FIXED - 1]) < at("config_reloads"));
        assert!(at("config_reload_failures") < at("src4_denied"));
        assert!(at("src4_denied") < at("datapath_ebpf"));
        let prom = s.prometheus();
        assert!(prom.contains("xlat_packets_total{direction=\"4to6\"} 5"));
        assert!(prom.contains("xlat_drops_total{reason=\"src4_denied\"} 1"));
        assert_eq!(std::mem::align_of::<WorkerCounters>(), 64);
    }

    /// The Prometheus text format (exposition format 0.0.4): every sample
    /// belongs to a family declared by HELP and TYPE lines before it, names
    /// match `[a-zA-Z_:][a-zA-Z0-9_:]*`, counters end in `_total`, no series
    /// twice, a final newline; and every counter of `xlat stats` has a
    /// series (docs/configuration.md, `[metrics]`).
    #[test]
    fn prometheus_text_is_well_formed_and_complete() {
        use std::collections::{HashMap, HashSet};
        use xlat_core::nat64::{Nat64Config, Pool4Entry};
        let r = Registry::default();
        let cfg = Nat64Config {
            pool4: Pool4Entry::all_protocols("203.0.113.0/28".parse().unwrap()).to_vec(),
            ..Nat64Config::default()
        };
        let _ = r
            .nat64
            .set(Arc::new(Nat64State::new(cfg, [1; 16]).unwrap()));
        let w = r.new_worker();
        for i in 0..FIXED {
            w.add(i, 1000 + i as u64);
        }
        let mut s = r.snapshot();
        s.fast = Some([0; crate::ebpf::COUNTERS.len()]);
        s.flows = Some([0; crate::ebpf::FLOW_COUNTERS.len()]);
        s.discovery = Some([0; 4]);
        let text = s.prometheus();
        assert!(text.ends_with('\n'));
        let name_ok = |n: &str| {
            let mut c = n.chars();
            c.next()
                .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
                && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
        };
        let mut types: HashMap<String, String> = HashMap::new();
        let mut helps: HashSet<String> = HashSet::new();
        let mut series: HashSet<String> = HashSet::new();
        let mut values: HashMap<String, u64> = HashMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                assert!(helps.insert(name.to_string()), "HELP twice: {name}");
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, t) = rest.split_once(' ').unwrap();
                assert!(matches!(t, "counter" | "gauge"), "{line}");
                assert!(helps.contains(name), "TYPE without HELP before: {name}");
                assert!(types.insert(name.into(), t.into()).is_none(), "{line}");
            } else {
                let (sample, value) = line.rsplit_once(' ').expect(line);
                let name = sample.split('{').next().unwrap();
                assert!(name_ok(name), "bad name {name}");
                let t = types.get(name).unwrap_or_else(|| panic!("no TYPE: {line}"));
                if t == "counter" {
                    assert!(name.ends_with("_total"), "counter {name}");
                }
                if let Some(labels) = sample.strip_prefix(name) {
                    if !labels.is_empty() {
                        assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                    }
                }
                assert!(series.insert(sample.to_string()), "series twice: {sample}");
                values.insert(sample.to_string(), value.parse().expect(line));
            }
        }
        for (i, n) in NAMES.iter().enumerate() {
            let want = match *n {
                "translated_4to6_packets" => "xlat_packets_total{direction=\"4to6\"}".into(),
                "translated_6to4_packets" => "xlat_packets_total{direction=\"6to4\"}".into(),
                "translated_4to6_bytes" => "xlat_bytes_total{direction=\"4to6\"}".into(),
                "translated_6to4_bytes" => "xlat_bytes_total{direction=\"6to4\"}".into(),
                other => format!("xlat_{other}_total"),
            };
            assert_eq!(values.get(&want), Some(&(1000 + i as u64)), "{n} as {want}");
        }
        for reason in DropReason::ALL {
            assert!(series.contains(&format!("xlat_drops_total{{reason=\"{}\"}}", reason.name())));
        }
        assert!(series.contains("xlat_config_reloads_total"));
        assert!(series.contains("xlat_config_reload_failures_total"));
    }

    /// Split by datapath: the fast path's counters follow with `ebpf_`.
    #[test]
    fn fast_path_counters_listed_with_prefix() {
        let mut s = Registry::default().snapshot();
        let mut f = [0u64; crate::ebpf::COUNTERS.len()];
        f[crate::ebpf::C_V4TO6] = 7;
        f[4] = 2; // passed_not_for_xlat
        s.fast = Some(f);
        let p = s.pairs();
        assert!(p.contains(&("datapath_ebpf".to_string(), 1)));
        assert!(p.contains(&("ebpf_translated_4to6_packets".to_string(), 7)));
        assert!(p.contains(&("ebpf_passed_not_for_xlat".to_string(), 2)));
        assert!(p.contains(&("translated_4to6_packets".to_string(), 0)));
        let prom = s.prometheus();
        assert!(prom.contains("xlat_ebpf_packets_total{direction=\"4to6\"} 7"));
        assert!(prom.contains("xlat_ebpf_bytes_total{direction=\"6to4\"} 0"));
        assert!(prom.contains("xlat_ebpf_passed_total{reason=\"not_for_xlat\"} 2"));
        assert!(prom.contains("xlat_ebpf_dropped_total 0"));
    }

    /// NAT64 table sizes (RFC 6146 §3.1/§3.2) in `xlat stats` and the metrics.
    #[test]
    fn nat64_table_sizes_listed() {
        use xlat_core::nat64::{Nat64Config, Pool4Entry, Ta4, Ta6};
        let r = Registry::default();
        let cfg = Nat64Config {
            pool4: Pool4Entry::all_protocols("203.0.113.0/28".parse().unwrap()).to_vec(),
            ..Nat64Config::default()
        };
        let st = Arc::new(Nat64State::new(cfg, [1; 16]).unwrap());
        st.lookup_or_create_6to4(
            Proto::Udp,
            Ta6::new("2001:db8::1".parse().unwrap(), 1000),
            Ta4::new("198.51.100.2".parse().unwrap(), 53),
            None,
            0,
        )
        .unwrap();
        assert!(!r
            .snapshot()
            .pairs()
            .iter()
            .any(|(k, _)| k.starts_with("nat64_sessions")));
        let _ = r.nat64.set(st);
        let s = r.snapshot();
        let p = s.pairs();
        assert!(p.contains(&("nat64_sessions_udp".to_string(), 1)));
        assert!(p.contains(&("nat64_sessions_tcp".to_string(), 0)));
        assert!(p.contains(&("nat64_bib_udp".to_string(), 1)));
        assert!(p.contains(&("nat64_stored_syns".to_string(), 0)));
        assert!(p.contains(&("nat64_pool4_drained_sessions".to_string(), 0)));
        let prom = s.prometheus();
        assert!(prom.contains("xlat_nat64_sessions{protocol=\"udp\"} 1"));
        assert!(prom.contains("xlat_nat64_bib_entries{protocol=\"icmp\"} 0"));
    }
}
