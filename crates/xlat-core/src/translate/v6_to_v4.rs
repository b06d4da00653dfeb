//! IPv6 -> IPv4 (RFC 7915 §5).
//! STUB: the 6to4 helper implements this file.

use super::{AddressMapper, Config, PacketMeta, Verdict};

pub fn translate(
    cfg: &Config,
    map: &dyn AddressMapper,
    buf: &mut [u8],
    start: usize,
    len: usize,
    meta: PacketMeta,
) -> Verdict {
    let _ = (cfg, map, buf, start, len, meta);
    todo!()
}
