//! RFC 7757 §3.2/§3.3 with a 100,000-entry EAMT: every lookup correct in
//! both directions, before and after removing half of the entries.

use std::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::addr::{EamEntry, Eamt, Ipv4Prefix, Ipv6Prefix};

const N: u32 = 100_000;
const BASE4: u32 = 0x0a00_0000; // 10.0.0.0
const BASE6: u128 = 0x2001_0db8u128 << 96; // 2001:db8::
const COVER6: u128 = 0x2001_0db8_0001u128 << 80; // 2001:db8:1::

/// Entry i: 10.0.0.0 + 4i, /30 <-> /126 when i & 3 == 0, else /32 <-> /128.
fn entry(i: u32) -> EamEntry {
    let (l4, l6) = if i & 3 == 0 { (30, 126) } else { (32, 128) };
    EamEntry {
        v4: Ipv4Prefix::new(Ipv4Addr::from(BASE4 + 4 * i), l4).unwrap(),
        v6: Ipv6Prefix::new(Ipv6Addr::from(BASE6 + u128::from(4 * i)), l6).unwrap(),
    }
}

fn check(t: &Eamt, i: u32, present: bool) {
    let a = BASE4 + 4 * i;
    for off in 0..4u32 {
        let v4 = Ipv4Addr::from(a + off);
        let specific = present && (i & 3 == 0 || off == 0);
        let want6 = if specific {
            Ipv6Addr::from(BASE6 + u128::from(4 * i + off))
        } else {
            // The covering 10.0.0.0/8 <-> 2001:db8:1::/104 entry.
            Ipv6Addr::from(COVER6 | u128::from((a + off) & 0x00ff_ffff))
        };
        assert_eq!(t.lookup4(v4), Some(want6), "{v4}");
        assert_eq!(t.lookup6(&want6), Some(v4), "{want6}");
    }
    // An IPv6 address next to a /128 entry is not mapped by it.
    if i & 3 != 0 {
        let near = Ipv6Addr::from(BASE6 + u128::from(4 * i + 1));
        assert_eq!(t.lookup6(&near), None);
    }
}

#[test]
fn rfc7757_s3_100k_entries_both_directions() {
    let mut t = Eamt::new();
    t.insert(EamEntry {
        v4: "10.0.0.0/8".parse().unwrap(),
        v6: "2001:db8:1::/104".parse().unwrap(),
    })
    .unwrap();
    for i in 0..N {
        t.insert(entry(i)).unwrap();
    }
    assert_eq!(t.len(), N as usize + 1);
    for i in 0..N {
        check(&t, i, true);
    }
    // Remove the odd entries, alternating the family used to name them.
    for i in (1..N).step_by(2) {
        let e = entry(i);
        let r = if i & 3 == 1 {
            t.remove_v4(&e.v4)
        } else {
            t.remove_v6(&e.v6)
        };
        assert_eq!(r, Some(e));
    }
    assert_eq!(t.len(), (N / 2) as usize + 1);
    for i in 0..N {
        check(&t, i, i & 1 == 0);
    }
    assert_eq!(t.entries().len(), t.len());
}
