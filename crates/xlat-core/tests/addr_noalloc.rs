//! The address mapping lookups (RFC 6052, RFC 7757, RFC 6791, denylist)
//! must not allocate: counted with a per-thread counting allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::addr::{EamEntry, HairpinMode, Pool6, Pool6791v4, Pool6791v6, SiitAddressing};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

#[test]
fn lookups_do_not_allocate() {
    let mut s = SiitAddressing {
        pool6: Some(Pool6::new("2001:db8:64::/96".parse().unwrap()).unwrap()),
        hairpin: HairpinMode::Simple,
        ..SiitAddressing::default()
    };
    for i in 0..1000u32 {
        s.eamt
            .insert(EamEntry {
                v4: format!("192.0.{}.{}/32", i / 256, i % 256).parse().unwrap(),
                v6: format!("2001:db8:e::{:x}/128", i).parse().unwrap(),
            })
            .unwrap();
    }
    let p4 = Pool6791v4::new(vec!["192.0.2.0/24".parse().unwrap()]);
    let p6 = Pool6791v6::new(vec!["2001:db8:ffff::/64".parse().unwrap()]);
    let before = allocs();
    let mut ok = 0u32;
    for i in 0..10_000u32 {
        let v4 = Ipv4Addr::from(0xc000_0000 | (i & 0x3ff));
        let v6 = Ipv6Addr::from((0x2001_0db8_000eu128 << 80) | u128::from(i & 0x3ff));
        ok += s.src_4to6(v4).is_ok() as u32;
        ok += s.dst_4to6(v4).is_ok() as u32;
        ok += s.src_6to4(&v6).is_ok() as u32;
        ok += s
            .dst_6to4(&Ipv6Addr::from(0x2001_0db8_0064u128 << 80 | u128::from(i)))
            .is_ok() as u32;
        ok += s.is_hairpin_6to4(v4) as u32;
        ok += p4.pick(i.wrapping_mul(0x9e37_79b9)).is_some() as u32;
        ok += p6.pick(i).is_some() as u32;
    }
    assert_eq!(allocs() - before, 0, "lookups allocated");
    assert!(ok > 40_000);
}
