//! IPv4 -> IPv6 (RFC 7915 §4).
//! STUB: the 4to6 helper implements this file.

use super::{AddressMapper, Config, FragBuf, PacketMeta, Verdict};

pub fn translate(
    cfg: &Config,
    map: &dyn AddressMapper,
    buf: &mut [u8],
    start: usize,
    len: usize,
    meta: PacketMeta,
    frags: &mut FragBuf,
) -> Verdict {
    let _ = (cfg, map, buf, start, len, meta, frags);
    todo!()
}
