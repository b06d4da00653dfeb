//! xlat-core: pure IPv4/IPv6 translation logic.
//!
//! No I/O, no clock (time comes in as an argument), no globals, and no
//! allocation per packet. The daemon's datapaths hand bytes in and get a
//! [`translate::Verdict`] back; the same code is unit-tested with packet
//! vectors, fuzzed, and used as the oracle for the eBPF fast path.
//!
//! Modules:
//! - [`wire`]: zero-copy views of IPv4, IPv6 (+extension headers), ICMP, TCP, UDP.
//! - [`checksum`]: RFC 1071 sums and RFC 1624 incremental updates.
//! - [`addr`]: RFC 6052 (pool6), RFC 7757 (EAMT), RFC 6791 pools, denylist.
//! - [`translate`]: RFC 7915 in both directions.
//! - [`nat64`]: RFC 6146 state (BIB, sessions, pool4, TCP states, expiry).
//! - [`counters`]: the named drop reasons.

pub mod addr;
pub mod checksum;
pub mod counters;
#[doc(hidden)]
pub mod fuzz_entry;
pub mod nat64;
pub mod translate;
pub mod wire;

pub use counters::DropReason;
pub use translate::{Config, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};
