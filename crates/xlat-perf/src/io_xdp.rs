//! AF_XDP I/O (`--io xdp`), copy mode: works on veth and on any driver with
//! (native or generic) XDP.
//!
//! - Sending: one AF_XDP socket per sending port, bound to queue 0 in copy
//!   mode, with its own UMEM (4096 frames of 2 KiB), TX and completion
//!   rings. The frames are the complete ones `io_frame` builds (as for
//!   `--io packet`), written into UMEM frames; a paced batch is published on
//!   the TX ring and the kernel is kicked with `sendto(2)` (in copy mode it
//!   sends at most 32 frames per call, so a batch takes several kicks).
//!   Completed frames come back through the completion ring.
//! - Receiving: one AF_XDP socket on queue 0 of the receiving interface
//!   (UMEM of 8192 frames, fill and RX rings) and the XDP program
//!   `bpf/xlp_rx.bpf.c`, attached to the interface for the trial, which
//!   redirects IPv4/IPv6 UDP frames with the test signature to the socket
//!   (XSKMAP) and passes everything else (ARP, ND, other traffic) to the
//!   stack. The test frames never reach the namespace's IP stack. The
//!   program is detached and the sockets closed after the trial, on every
//!   path (drop order). Counting is the packet path's (`io_packet`); the
//!   arrival time is taken when a batch is read from the RX ring (no kernel
//!   timestamp exists for AF_XDP in copy mode).

use crate::engine::{enter_netns, monotonic_ns};
use crate::io_packet::{self, RxOut, RxPlan};
use std::ffi::{c_int, c_void, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use xlat_bpf::{errstr, ffi, quiet_libbpf, Object};

const AF_XDP: c_int = 44;
const SOL_XDP: c_int = 283;
const XDP_MMAP_OFFSETS: c_int = 1;
const XDP_RX_RING: c_int = 2;
const XDP_TX_RING: c_int = 3;
const XDP_UMEM_REG: c_int = 4;
const XDP_UMEM_FILL_RING: c_int = 5;
const XDP_UMEM_COMPLETION_RING: c_int = 6;
const XDP_STATISTICS: c_int = 7;
const XDP_COPY: u16 = 1 << 1;
const PGOFF_RX_RING: i64 = 0;
const PGOFF_TX_RING: i64 = 0x8000_0000;
const PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
pub(crate) const FRAME: usize = 2048;
/// What the kernel keeps in front of a received frame in its chunk.
pub(crate) const XDP_PACKET_HEADROOM: usize = 256;
/// The longest Ethernet frame (FCS not included) an AF_XDP socket takes.
pub(crate) const MAX_FRAME_L2: usize = FRAME - XDP_PACKET_HEADROOM;
const TX_FRAMES: usize = 4096;
const RX_FRAMES: usize = 8192;
const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The object built from bpf/xlp_rx.bpf.c by build.rs.
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xlp_rx.bpf.o"));

fn os_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// A shared mapping (UMEM or a ring), unmapped on drop.
struct Map {
    ptr: *mut u8,
    len: usize,
}
// SAFETY: a mapping is used by the one thread that owns its socket.
unsafe impl Send for Map {}
impl Map {
    fn anon(len: usize) -> Result<Map, String> {
        // SAFETY: anonymous private mapping of len bytes.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!("mmap UMEM: {}", os_err()));
        }
        Ok(Map {
            ptr: p as *mut u8,
            len,
        })
    }
    fn ring(fd: c_int, len: usize, pgoff: i64, what: &str) -> Result<Map, String> {
        // SAFETY: mapping a ring the socket configured, at its page offset.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!("mmap {what} ring: {}", os_err()));
        }
        Ok(Map {
            ptr: p as *mut u8,
            len,
        })
    }
}
impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.ptr as *mut c_void, self.len) };
    }
}

/// One ring shared with the kernel: producer and consumer indexes and the
/// descriptor array (`elem` bytes each, `size` a power of two).
struct Ring {
    map: Map,
    prod: usize,
    cons: usize,
    desc: usize,
    mask: u32,
    size: u32,
    elem: usize,
}

impl Ring {
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: the producer index lies inside the mapping, 4-aligned.
        unsafe { &*(self.map.ptr.add(self.prod) as *const AtomicU32) }
    }
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*(self.map.ptr.add(self.cons) as *const AtomicU32) }
    }
    fn at(&self, idx: u32) -> *mut u8 {
        // SAFETY: idx & mask < size: inside the descriptor array.
        unsafe {
            self.map
                .ptr
                .add(self.desc + (idx & self.mask) as usize * self.elem)
        }
    }
}

fn set_u32(fd: c_int, name: c_int, v: u32, what: &str) -> Result<(), String> {
    // SAFETY: pointer to a live u32.
    let r = unsafe { libc::setsockopt(fd, SOL_XDP, name, &v as *const u32 as *const c_void, 4) };
    if r != 0 {
        return Err(format!("{what}: {}", os_err()));
    }
    Ok(())
}

/// An AF_XDP socket with its UMEM and rings, bound to queue 0 of an
/// interface in copy mode.
struct Xsk {
    // Field order is drop order: rings, then the socket, then the UMEM.
    fill: Ring,
    comp: Ring,
    rx: Option<Ring>,
    tx: Option<Ring>,
    fd: OwnedFd,
    umem: Map,
}

impl Xsk {
    fn open(
        ifname: &str,
        frames: usize,
        rx: bool,
        fill_n: u32,
        comp_n: u32,
    ) -> Result<Xsk, String> {
        let c = CString::new(ifname).map_err(|_| format!("bad interface name {ifname:?}"))?;
        // SAFETY: valid C string.
        let ifi = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if ifi == 0 {
            return Err(format!("interface {ifname:?}: {}", os_err()));
        }
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(format!("AF_XDP socket: {}", os_err()));
        }
        // SAFETY: fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Map::anon(frames * FRAME)?;
        // struct xdp_umem_reg: addr, len, chunk_size, headroom, flags,
        // tx_metadata_len.
        let mut reg = [0u8; 32];
        reg[0..8].copy_from_slice(&(umem.ptr as u64).to_ne_bytes());
        reg[8..16].copy_from_slice(&(umem.len as u64).to_ne_bytes());
        reg[16..20].copy_from_slice(&(FRAME as u32).to_ne_bytes());
        // SAFETY: 32 bytes, the size of struct xdp_umem_reg.
        let r = unsafe {
            libc::setsockopt(
                raw,
                SOL_XDP,
                XDP_UMEM_REG,
                reg.as_ptr() as *const c_void,
                32,
            )
        };
        if r != 0 {
            return Err(format!("XDP_UMEM_REG: {}", os_err()));
        }
        set_u32(raw, XDP_UMEM_FILL_RING, fill_n, "XDP_UMEM_FILL_RING")?;
        set_u32(
            raw,
            XDP_UMEM_COMPLETION_RING,
            comp_n,
            "XDP_UMEM_COMPLETION_RING",
        )?;
        let ring_n = frames as u32;
        if rx {
            set_u32(raw, XDP_RX_RING, ring_n, "XDP_RX_RING")?;
        } else {
            set_u32(raw, XDP_TX_RING, ring_n, "XDP_TX_RING")?;
        }
        // struct xdp_mmap_offsets: rx, tx, fr, cr; each producer, consumer,
        // desc, flags (u64).
        let mut off = [0u64; 16];
        let mut len = 128 as libc::socklen_t;
        // SAFETY: 128-byte buffer, length passed.
        let r = unsafe {
            libc::getsockopt(
                raw,
                SOL_XDP,
                XDP_MMAP_OFFSETS,
                off.as_mut_ptr() as *mut c_void,
                &mut len,
            )
        };
        if r != 0 || len != 128 {
            return Err(format!("XDP_MMAP_OFFSETS: {}", os_err()));
        }
        let mk = |i: usize, n: u32, elem: usize, pgoff: i64, what: &str| -> Result<Ring, String> {
            let o = &off[i * 4..i * 4 + 4];
            let map = Map::ring(raw, o[2] as usize + n as usize * elem, pgoff, what)?;
            Ok(Ring {
                map,
                prod: o[0] as usize,
                cons: o[1] as usize,
                desc: o[2] as usize,
                mask: n - 1,
                size: n,
                elem,
            })
        };
        let (rxr, txr) = if rx {
            (Some(mk(0, ring_n, 16, PGOFF_RX_RING, "RX")?), None)
        } else {
            (None, Some(mk(1, ring_n, 16, PGOFF_TX_RING, "TX")?))
        };
        let fill = mk(2, fill_n, 8, PGOFF_FILL_RING, "fill")?;
        let comp = mk(3, comp_n, 8, PGOFF_COMPLETION_RING, "completion")?;
        let x = Xsk {
            fill,
            comp,
            rx: rxr,
            tx: txr,
            fd,
            umem,
        };
        if rx {
            // Every frame to the kernel for receiving.
            let p = x.fill.producer().load(Ordering::Relaxed);
            for i in 0..fill_n.min(frames as u32) {
                // SAFETY: a u64 slot of the fill ring.
                unsafe { (x.fill.at(p + i) as *mut u64).write((i as u64) * FRAME as u64) };
            }
            x.fill
                .producer()
                .store(p + fill_n.min(frames as u32), Ordering::Release);
        }
        // struct sockaddr_xdp: family, flags, ifindex, queue_id, shared fd.
        let mut sa = [0u8; 16];
        sa[0..2].copy_from_slice(&(AF_XDP as u16).to_ne_bytes());
        sa[2..4].copy_from_slice(&XDP_COPY.to_ne_bytes());
        sa[4..8].copy_from_slice(&ifi.to_ne_bytes());
        // The kernel releases the previous trial's socket from the queue in
        // deferred work: the queue may stay busy for a moment (up to 2 s).
        let mut tries = 0;
        loop {
            // SAFETY: 16-byte sockaddr_xdp.
            let r = unsafe { libc::bind(raw, sa.as_ptr() as *const libc::sockaddr, 16) };
            if r == 0 {
                break;
            }
            let e = os_err();
            if e.raw_os_error() == Some(libc::EBUSY) && tries < 400 {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            }
            return Err(format!("bind to {ifname} queue 0 (copy mode): {e}"));
        }
        Ok(x)
    }

    fn frame_mut(&mut self, addr: u64, len: usize) -> &mut [u8] {
        let a = (addr as usize).min(self.umem.len);
        let l = len.min(self.umem.len - a);
        // SAFETY: inside the UMEM; the frame is owned by us (not on a ring).
        unsafe { std::slice::from_raw_parts_mut(self.umem.ptr.add(a), l) }
    }

    fn frame(&self, addr: u64, len: usize) -> &[u8] {
        let a = (addr as usize).min(self.umem.len);
        let l = len.min(self.umem.len - a);
        // SAFETY: inside the UMEM; the kernel handed the frame to us.
        unsafe { std::slice::from_raw_parts(self.umem.ptr.add(a), l) }
    }

    /// Frames the socket dropped because its RX ring was full or the fill
    /// ring empty (XDP_STATISTICS rx_dropped + rx_ring_full).
    fn rx_drops(&self) -> u64 {
        let mut st = [0u64; 6];
        let mut len = 48 as libc::socklen_t;
        // SAFETY: 48-byte buffer, length passed.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_XDP,
                XDP_STATISTICS,
                st.as_mut_ptr() as *mut c_void,
                &mut len,
            )
        };
        if r != 0 {
            return 0;
        }
        st[0] + st[3]
    }
}

/// The sending side on AF_XDP.
pub struct XskTx {
    x: Xsk,
    /// UMEM frames we own (not on the TX or completion ring).
    free: Vec<u64>,
    /// Which template a UMEM frame holds.
    kind: Vec<u8>,
    /// Our TX producer index (published at flush).
    prod: u32,
}

impl XskTx {
    pub fn open(ifname: &str) -> Result<XskTx, String> {
        let x = Xsk::open(ifname, TX_FRAMES, false, 64, TX_FRAMES as u32)
            .map_err(|e| format!("--io xdp: AF_XDP socket on {ifname}: {e}"))?;
        let prod = x.tx.as_ref().unwrap().producer().load(Ordering::Relaxed);
        let fd = x.fd.as_raw_fd();
        if crate::io_packet::if_driver(fd, ifname).as_deref() == Some("veth") {
            // As for the packet TX ring: frames queued at the peer's CPU
            // count against this socket's send buffer; a DUT on another
            // CPU must drop (the kernel then completes the frame unsent:
            // lost), not hold the tester back.
            crate::io_packet::set_sndbuf_force(fd, crate::io_packet::VETH_SNDBUF);
        }
        Ok(XskTx {
            x,
            free: (0..TX_FRAMES as u64)
                .rev()
                .map(|i| i * FRAME as u64)
                .collect(),
            kind: vec![u8::MAX; TX_FRAMES],
            prod,
        })
    }

    fn reap(&mut self) {
        let c = &self.x.comp;
        let prod = c.producer().load(Ordering::Acquire);
        let mut cons = c.consumer().load(Ordering::Relaxed);
        while cons != prod {
            // SAFETY: a u64 slot the kernel produced.
            let a = unsafe { (c.at(cons) as *const u64).read() };
            self.free.push(a);
            cons = cons.wrapping_add(1);
        }
        c.consumer().store(cons, Ordering::Release);
    }

    pub fn next_slot(&mut self, kind: u8, tpl: &[u8]) -> Result<Option<&mut [u8]>, String> {
        let tx = self.x.tx.as_ref().unwrap();
        let room = tx.size
            - self
                .prod
                .wrapping_sub(tx.consumer().load(Ordering::Acquire));
        if room == 0 {
            return Ok(None);
        }
        if self.free.is_empty() {
            self.reap();
        }
        let Some(&a) = self.free.last() else {
            return Ok(None);
        };
        let i = a as usize / FRAME;
        let d = self.x.frame_mut(a, tpl.len());
        if self.kind[i] != kind {
            d.copy_from_slice(tpl);
            self.kind[i] = kind;
        }
        Ok(Some(d))
    }

    pub fn commit(&mut self, len: usize) {
        let a = self.free.pop().expect("next_slot gave a frame");
        let tx = self.x.tx.as_ref().unwrap();
        let p = tx.at(self.prod);
        // SAFETY: struct xdp_desc { u64 addr; u32 len; u32 options } in a
        // TX slot we own (room checked in next_slot).
        unsafe {
            (p as *mut u64).write(a);
            (p.add(8) as *mut u32).write(len as u32);
            (p.add(12) as *mut u32).write(0);
        }
        self.prod = self.prod.wrapping_add(1);
    }

    /// Publishes the marked frames and kicks the kernel until it has taken
    /// them all (copy mode takes at most 32 per kick); false if it stopped
    /// taking them (busy device) or dropped one.
    pub fn flush(&mut self) -> Result<bool, String> {
        let tx = self.x.tx.as_ref().unwrap();
        tx.producer().store(self.prod, Ordering::Release);
        let fd = self.x.fd.as_raw_fd();
        let mut ok = true;
        let mut last = tx.consumer().load(Ordering::Acquire);
        let mut stuck = 0;
        while last != self.prod {
            // SAFETY: sendto(2) with no data: kick the TX ring.
            let r = unsafe {
                libc::sendto(
                    fd,
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r < 0 {
                let e = os_err();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                    Some(libc::EBUSY) | Some(libc::ENOBUFS) => ok = false,
                    _ => return Err(format!("sendto (AF_XDP TX ring): {e}")),
                }
            }
            let now = tx.consumer().load(Ordering::Acquire);
            if now == last {
                stuck += 1;
                if stuck > 4 {
                    ok = false;
                    break;
                }
            } else {
                stuck = 0;
            }
            last = now;
        }
        self.reap();
        Ok(ok)
    }
}

/// The receive program attached to an interface; detached and unloaded on
/// drop.
struct XdpProg {
    /// Closed after the detach (`Drop`).
    _obj: Object,
    ifindex: c_int,
    mode: u32,
    /// The detach for a signal's clean-up (undo.rs), once attached.
    undo: Option<crate::undo::Undo>,
}

impl XdpProg {
    /// Loads the program, points XSKMAP entry 0 at `xsk_fd` and attaches it
    /// to `ifname` (generic XDP, or native first with
    /// XLAT_PERF_XDP_MODE=native), never replacing another program.
    fn attach(netns: Option<&str>, ifname: &str, xsk_fd: c_int) -> Result<XdpProg, String> {
        quiet_libbpf();
        let c = CString::new(ifname).map_err(|_| format!("bad interface name {ifname:?}"))?;
        // SAFETY: valid C string.
        let ifi = unsafe { libc::if_nametoindex(c.as_ptr()) } as c_int;
        if ifi == 0 {
            return Err(format!("interface {ifname:?}: {}", os_err()));
        }
        let mut obj =
            Object::open_mem(OBJECT).map_err(|e| format!("opening the XDP program: {e}"))?;
        obj.load()
            .map_err(|e| format!("loading the XDP program: {e}"))?;
        let (Some(prog_fd), Some(map_fd)) = (obj.program_fd("xlp_rx"), obj.map_fd("xlp_xsks"))
        else {
            return Err("the XDP object lacks xlp_rx / xlp_xsks".into());
        };
        let mut p = XdpProg {
            _obj: obj,
            ifindex: ifi,
            mode: 0,
            undo: None,
        };
        let key = 0u32;
        let val = xsk_fd as u32;
        // SAFETY: 4-byte key and value.
        let rc = unsafe {
            ffi::bpf_map_update_elem(
                map_fd,
                &key as *const u32 as *const c_void,
                &val as *const u32 as *const c_void,
                0,
            )
        };
        if rc != 0 {
            return Err(format!("XSKMAP update: {}", errstr(rc)));
        }
        let mut last = String::new();
        // Generic XDP by default: on veth it costs the sending CPU less per
        // frame than native XDP (no conversion into an XDP frame and NAPI
        // ring); env XLAT_PERF_XDP_MODE=native tries the driver's native
        // XDP first.
        let modes: &[u32] = if std::env::var("XLAT_PERF_XDP_MODE").as_deref() == Ok("native") {
            &[XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE]
        } else {
            &[XDP_FLAGS_SKB_MODE]
        };
        for &mode in modes {
            // SAFETY: plain attach by ifindex and program fd.
            let rc = unsafe {
                ffi::bpf_xdp_attach(
                    ifi,
                    prog_fd,
                    XDP_FLAGS_UPDATE_IF_NOEXIST | mode,
                    std::ptr::null(),
                )
            };
            if rc == 0 {
                p.mode = mode;
                // Registered once attached: before, a signal's clean-up
                // could remove another program that the attach refused.
                let off = if mode == XDP_FLAGS_DRV_MODE {
                    "xdpdrv"
                } else {
                    "xdpgeneric"
                };
                p.undo = Some(crate::undo::Undo::register(vec![crate::undo::in_netns(
                    netns,
                    &["ip", "link", "set", "dev", ifname, off, "off"],
                )]));
                return Ok(p);
            }
            if -rc == libc::EBUSY || -rc == libc::EEXIST {
                return Err(format!(
                    "attaching the XDP program to {ifname}: another XDP program is attached \
                     (one named xlp_rx is left by an xlat-perf killed with SIGKILL: \
                     `ip link set dev {ifname} xdpgeneric off` removes it)"
                ));
            }
            last = errstr(rc);
        }
        Err(format!("attaching the XDP program to {ifname}: {last}"))
    }
}

impl Drop for XdpProg {
    fn drop(&mut self) {
        if self.mode != 0 {
            // SAFETY: detaching what we attached, same mode.
            unsafe { ffi::bpf_xdp_detach(self.ifindex, self.mode, std::ptr::null()) };
        }
        // The object (`_obj`, the first field) is closed next, with its
        // program and map fds.
    }
}

type RxParts = (Xsk, XdpProg);

fn rx_setup(p: &RxPlan) -> Result<RxParts, String> {
    if let Some(ns) = &p.netns {
        enter_netns(ns)?;
    }
    io_packet::pin(p.cpu)?;
    let x = Xsk::open(&p.ifname, RX_FRAMES, true, RX_FRAMES as u32, 64)
        .map_err(|e| format!("--io xdp: AF_XDP socket on {}: {e}", p.ifname))?;
    let prog = XdpProg::attach(p.netns.as_deref(), &p.ifname, x.fd.as_raw_fd())
        .map_err(|e| format!("--io xdp: {e}"))?;
    Ok((x, prog))
}

/// The receiver thread on AF_XDP (see `io_packet::rx_loop` for the rules).
pub(crate) fn rx_loop(
    p: &RxPlan,
    ready: mpsc::Sender<Result<(), String>>,
    stop_at: Arc<AtomicU64>,
    limit_s: f64,
) -> Result<RxOut, String> {
    // Declared before the parts: the program is detached (drop) before the
    // socket closes, also on every error path.
    let (x, _prog) = match rx_setup(p) {
        Ok(v) => {
            let _ = ready.send(Ok(()));
            v
        }
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let mut streams = io_packet::rx_streams(p);
    let (mut foreign, mut other) = (0u64, 0u64);
    let limit = monotonic_ns() + (limit_s * 1e9) as u64;
    let rx = x.rx.as_ref().unwrap();
    let mut draining = false;
    loop {
        let now = monotonic_ns();
        let stop = stop_at.load(Ordering::Acquire);
        if stop == 1 || now >= limit {
            break;
        }
        if stop > 1 && now >= stop + 5_000_000 {
            if draining {
                break;
            }
            draining = true;
        }
        let prod = rx.producer().load(Ordering::Acquire);
        let mut cons = rx.consumer().load(Ordering::Relaxed);
        if prod == cons {
            if draining {
                break;
            }
            let mut pfd = libc::pollfd {
                fd: x.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 5) };
            continue;
        }
        // Arrival time: when the batch is read from the RX ring.
        let rx_ns = monotonic_ns();
        let stop = stop_at.load(Ordering::Acquire);
        let mut fp = x.fill.producer().load(Ordering::Relaxed);
        while cons != prod {
            // SAFETY: struct xdp_desc the kernel produced.
            let (addr, len) = unsafe {
                let d = rx.at(cons);
                ((d as *const u64).read(), (d.add(8) as *const u32).read())
            };
            let data = x.frame(addr, len as usize);
            io_packet::count_frame(&mut streams, data, rx_ns, stop, &mut foreign, &mut other);
            // Back to the fill ring (it has room: the frame came from it).
            // SAFETY: a u64 slot of the fill ring.
            unsafe { (x.fill.at(fp) as *mut u64).write(addr & !(FRAME as u64 - 1)) };
            fp = fp.wrapping_add(1);
            cons = cons.wrapping_add(1);
        }
        rx.consumer().store(cons, Ordering::Release);
        x.fill.producer().store(fp, Ordering::Release);
    }
    let ring_drops = x.rx_drops();
    Ok(RxOut {
        streams,
        foreign,
        other,
        ring_drops,
    })
}
