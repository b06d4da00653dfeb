//! The xlat daemon as a library: the binary (`main.rs`) is its command line,
//! and the fuzz targets (`fuzz/`) drive its parsers (configuration, RFC 8781
//! Router Advertisements, RFC 7050 DNS answers, ICMP reassembly, virtio-net
//! headers, control requests) directly.

pub mod config;
pub mod control;
pub mod daemon;
pub mod datapath;
pub mod ebpf;
pub mod fuzz_entry;
pub mod icmp_limit;
#[macro_use]
pub mod log;
pub mod loop_guard;
pub mod metrics;
pub mod nat64d;
pub mod pmtu;
pub mod privs;
pub mod reasm;
pub mod rfc7050;
pub mod rfc8781;
pub mod route_mtu;
pub mod route_watch;
pub mod stats;
pub mod tun;
pub mod vnet;
