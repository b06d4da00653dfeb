//! Packet I/O (`--io packet`): AF_PACKET sockets with memory-mapped rings.
//!
//! - Sending: a `PACKET_TX_RING` (TPACKET_V2) with `PACKET_QDISC_BYPASS`,
//!   bound to the port's interface with protocol 0 (the socket receives
//!   nothing). The tester writes complete Ethernet frames (`io_frame`) into
//!   the ring slots and flushes each paced batch with one `send(2)`.
//! - Receiving: a `PACKET_RX_RING` (TPACKET_V3, blocks handed over when full
//!   or after 4 ms) on the port's interface with `PACKET_IGNORE_OUTGOING`.
//!   Every frame is parsed; only a UDP test frame with a valid IPv4 header
//!   checksum, a valid UDP checksum, the `XLPT` signature and a stream id of
//!   this trial counts; other UDP frames are `foreign`, non-UDP frames
//!   (ARP, ND, ...) `other`. The kernel's receive timestamp (software,
//!   `SO_TIMESTAMPNS`) is the arrival time; a frame stamped after the end of
//!   the post-trial wait is `late` and lost. Frames the ring itself dropped
//!   (`PACKET_STATISTICS`) are reported as `rx_ring_drops`: the tester lost
//!   them, so the trial is invalid.

use crate::engine::{enter_netns, monotonic_ns, Rng, Seen, TrialOut, TrialSpec};
use crate::io_frame::{self, Builder, FrameSpec, Rx};
use crate::io_resolve::Mac;
use crate::mmsg::Mmsg;
use crate::pace::Pacer;
use crate::sockopt::{set_int, set_struct};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

const SOL_PACKET: i32 = 263;
const PACKET_RX_RING: i32 = 5;
const PACKET_VERSION: i32 = 10;
const PACKET_TX_RING: i32 = 13;
const PACKET_LOSS: i32 = 14;
const PACKET_QDISC_BYPASS: i32 = 20;
const PACKET_IGNORE_OUTGOING: i32 = 23;
const PACKET_VNET_HDR: i32 = 15;
const VNET_HDR_LEN: usize = 10;
const TPACKET_V2: i32 = 1;
const TPACKET_V3: i32 = 2;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_TS_SOFTWARE: u32 = 1 << 29;
/// Data offset in a TPACKET_V2 TX slot: TPACKET_ALIGN(sizeof tpacket2_hdr).
const TX_DATA_OFF: usize = 32;
const TX_SLOTS: usize = 4096;
/// The receive ring: RX_BLOCKS blocks of RX_BLOCK bytes, each handed over
/// when full or RX_BLOCK_TOV_MS after its first frame. While the receiver
/// thread is kept off its CPU the kernel fills them: at low rates one block
/// per timeout (128 x 4 ms, about half a second), at high rates about 2,000
/// small frames per block. A frame that finds no free block is dropped
/// (`rx_ring_drops`) and the trial is invalid (the tester lost it).
const RX_BLOCK: usize = 256 << 10;
const RX_BLOCKS: usize = 128;
const RX_BLOCK_TOV_MS: u32 = 4;
/// Stream-id bits that tell the streams of one trial apart.
pub const STREAM_BACKGROUND: u16 = 0x8000;
pub const STREAM_REVERSE: u16 = 0x4000;

/// Which I/O the engine uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoKind {
    /// UDP sockets (sendmmsg/recvmmsg), raw socket for random source ports.
    #[default]
    Socket,
    /// AF_PACKET with memory-mapped TX/RX rings (this module).
    Packet,
    /// AF_XDP sockets in copy mode and an XDP receive program (`io_xdp`);
    /// frames and counting as for `Packet`.
    Xdp,
}

/// One port (interface) as the packet I/O sees it, resolved before a trial.
#[derive(Clone, Debug, Default)]
pub struct PortIo {
    pub ifname: String,
    /// This port's MAC address (source of what it sends).
    pub mac: Mac,
    /// Destination MAC of what it sends (next hop towards the other port).
    pub next_hop: Mac,
}

/// Background traffic (RFC 8219 section 6.1): `n` of every `m` frames of the
/// forward schedule are native IPv6 frames to `dst` from `src`, through the
/// same ports, counted separately (stream id with [`STREAM_BACKGROUND`]).
#[derive(Clone, Debug)]
pub struct Background {
    pub n: u32,
    pub m: u32,
    pub src: IpAddr,
    pub dst: SocketAddr,
    /// Destination MAC of background frames on the sending port.
    pub next_hop: Mac,
}

impl Background {
    pub fn is_bg(&self, i: u64) -> bool {
        (i % self.m as u64) < self.n as u64
    }
    /// Background frames among the first `total` of the schedule.
    pub fn count(&self, total: u64) -> u64 {
        let (n, m) = (self.n as u64, self.m as u64);
        total / m * n + (total % m).min(n)
    }
}

/// Traffic shape and I/O options of a trial (all off by default: the old
/// socket engine).
#[derive(Clone, Debug, Default)]
pub struct IoConfig {
    pub kind: IoKind,
    /// The sending port (forward direction) and the receiving port.
    pub send_port: Option<PortIo>,
    pub recv_port: Option<PortIo>,
    pub send_cpu: Option<usize>,
    pub recv_cpu: Option<usize>,
    /// Fixed source port of the packet sender (without `--random-ports`).
    pub src_port: u16,
    /// RFC 4814 section 4.5 pseudorandom destination ports from this range.
    pub dst_ports: Option<(u16, u16)>,
    /// Pseudorandom source / destination addresses from these ranges.
    pub src_addrs: Option<(IpAddr, IpAddr)>,
    pub dst_addrs: Option<(IpAddr, IpAddr)>,
    /// Bidirectional: the receiving port also sends, to this address (the
    /// sender port's address as seen from the receiving side), from the
    /// receive address; the sending port receives it.
    pub reverse_dst: Option<SocketAddr>,
    pub background: Option<Background>,
    /// Drop test frames at the receiving interface's netdev ingress hook
    /// (after the receive ring saw them); see [`IngressDrop`].
    pub recv_drop: bool,
}

fn ifindex(name: &str) -> Result<i32, String> {
    let c = std::ffi::CString::new(name).map_err(|_| format!("bad interface name {name:?}"))?;
    // SAFETY: valid C string; resolves in the calling thread's namespace.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(format!(
            "interface {name:?}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(i as i32)
}

fn packet_socket() -> Result<OwnedFd, String> {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!(
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind_if(fd: i32, ifi: i32, proto: u16) -> Result<(), String> {
    // SAFETY: all-zero sockaddr_ll is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto.to_be();
    sll.sll_ifindex = ifi;
    // SAFETY: valid sockaddr_ll.
    let r = unsafe {
        libc::bind(
            fd,
            &sll as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(format!(
            "bind AF_PACKET: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

struct Mmap {
    ptr: *mut u8,
    len: usize,
}
// SAFETY: the mapping is used by the one thread that owns it.
unsafe impl Send for Mmap {}
impl Mmap {
    fn new(fd: i32, len: usize) -> Result<Mmap, String> {
        // SAFETY: mapping a packet ring of `len` bytes configured on fd.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mmap packet ring: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Mmap {
            ptr: p as *mut u8,
            len,
        })
    }
    fn status(&self, off: usize) -> &AtomicU32 {
        // SAFETY: off is a 4-aligned offset inside the mapping (a slot or
        // block header's status word, shared with the kernel).
        unsafe { &*(self.ptr.add(off) as *const AtomicU32) }
    }
}
impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// Sets the calling thread's nice value (best effort): env
/// `XLAT_PERF_NICE`, else `default`. The tester's threads keep nice 0 by
/// default: at nice -10 they took CPU time from a userspace DUT on the same
/// machine (xlat's TUN datapath with an nft limit of 20,000/s behind it was
/// measured at 0.947x, at nice 0 at 0.996x; another time 0.62-0.91x
/// against 0.93-1.0x), and the bounded catch-up (crate::pace) already
/// keeps a preempted sender from bunching what it owes.
pub fn boost(default: i32) {
    let nice: i32 = std::env::var("XLAT_PERF_NICE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    if nice != 0 {
        // SAFETY: plain syscalls on the calling thread.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, nice);
        }
    }
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: Option<usize>) -> Result<(), String> {
    boost(0);
    let Some(cpu) = cpu else { return Ok(()) };
    // SAFETY: cpu_set_t is plain data; CPU_SET within bounds checked below.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 1024 {
            return Err(format!("CPU {cpu}: out of range"));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "pinning to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// The driver of interface `name` in the calling thread's namespace
/// (ethtool `ETHTOOL_GDRVINFO`), e.g. "veth"; None if it cannot be read.
pub(crate) fn if_driver(fd: i32, name: &str) -> Option<String> {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    const ETHTOOL_GDRVINFO: u32 = 3;
    // struct ethtool_drvinfo: cmd, driver[32], version[32], fw_version[32],
    // bus_info[32], erom_version[32], reserved2[12], five u32 counters.
    let mut info = [0u8; 196];
    info[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
    // SAFETY: all-zero ifreq is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= ifr.ifr_name.len() {
        return None;
    }
    for (d, b) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = b as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = info.as_mut_ptr() as *mut libc::c_char;
    // SAFETY: SIOCETHTOOL with a valid ifreq pointing at a buffer of the
    // size of struct ethtool_drvinfo, both alive during the call.
    if unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut ifr) } != 0 {
        return None;
    }
    let d = &info[4..36];
    let n = d.iter().position(|&b| b == 0).unwrap_or(d.len());
    Some(String::from_utf8_lossy(&d[..n]).into_owned())
}

/// Send buffer of a TX ring on a veth: larger than the backlog of the
/// receiving CPU (`net.core.netdev_max_backlog`, 1000 frames by default,
/// about 0.8 MB of 84-byte frames), so that the receiving side's queue, not
/// the tester's socket buffer, is what fills up when the DUT falls behind.
pub(crate) const VETH_SNDBUF: i32 = 4 << 20;

/// SO_SNDBUFFORCE (root may exceed `net.core.wmem_max`); best effort.
pub(crate) fn set_sndbuf_force(fd: i32, bytes: i32) {
    let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes);
}

/// A TPACKET_V2 transmit ring on one interface.
pub struct TxRing {
    fd: OwnedFd,
    map: Mmap,
    slot: usize,
    slots: usize,
    head: usize,
    /// Which template a slot holds (frames differ only in per-frame fields).
    kind: Vec<u8>,
    /// Bytes of virtio-net header before each frame (0 or 10).
    vnet: usize,
    /// The interface is a veth: a frame its peer refuses (the receiving
    /// side's queue is full: the DUT's input queue when the DUT runs on
    /// another CPU) is lost, as on a wire, not sent again (see `flush`).
    veth: bool,
    /// Frames the interface refused, counted as lost (`tx_refused`), by
    /// the kind of the slot: [test frames, background frames].
    pub refused: [u64; 2],
}

impl TxRing {
    pub fn open(ifname: &str, max_len: usize) -> Result<TxRing, String> {
        let ifi = ifindex(ifname)?;
        let sock = packet_socket()?;
        let fd = sock.as_raw_fd();
        set_int(fd, SOL_PACKET, PACKET_VERSION, TPACKET_V2)
            .map_err(|e| format!("PACKET_VERSION: {e}"))?;
        // Not every kernel has it; without it frames pass the (noqueue) qdisc.
        let _ = set_int(fd, SOL_PACKET, PACKET_QDISC_BYPASS, 1);
        // A malformed frame is skipped, never blocks the ring.
        let _ = set_int(fd, SOL_PACKET, PACKET_LOSS, 1);
        // A virtio-net header per frame whose hdr_len covers the whole frame:
        // the kernel copies it into the skb's linear area instead of
        // attaching the ring's pages (which veth would have to copy again
        // with skb_copy_ubufs); less CPU per frame.
        let vnet = if std::env::var("XLAT_PERF_TX_VNET").as_deref() != Ok("0")
            && set_int(fd, SOL_PACKET, PACKET_VNET_HDR, 1).is_ok()
        {
            VNET_HDR_LEN
        } else {
            0
        };
        let slot = (TX_DATA_OFF + vnet + max_len).next_power_of_two().max(128);
        let block = slot.max(4096);
        let slots = TX_SLOTS.min(64 * 1024 * 1024 / slot).max(block / slot);
        let req = libc::tpacket_req {
            tp_block_size: block as u32,
            tp_block_nr: (slots * slot / block) as u32,
            tp_frame_size: slot as u32,
            tp_frame_nr: slots as u32,
        };
        set_struct(fd, SOL_PACKET, PACKET_TX_RING, &req)
            .map_err(|e| format!("PACKET_TX_RING: {e}"))?;
        let map = Mmap::new(fd, slots * slot)?;
        bind_if(fd, ifi, 0)?;
        let veth = if_driver(fd, ifname).as_deref() == Some("veth");
        if veth {
            // Frames queued at the peer's CPU still count against the
            // sender's socket buffer (veth does not orphan them): with the
            // default buffer (~280 small frames) a DUT running on another
            // CPU would hold the tester back instead of dropping.
            set_sndbuf_force(fd, VETH_SNDBUF);
        }
        Ok(TxRing {
            fd: sock,
            map,
            slot,
            slots,
            head: 0,
            kind: vec![u8::MAX; slots],
            vnet,
            veth,
            refused: [0; 2],
        })
    }

    /// Asks the kernel to send every frame marked so far.
    ///
    /// When the device refuses a frame (`NET_XMIT_DROP`: on a veth, the
    /// peer's receive queue is full), the kernel frees it, puts its slot
    /// back to "send request", stops and returns ENOBUFS; the next `send`
    /// would transmit the same frame again, i.e. the DUT's drop would turn
    /// into a retransmission and a late schedule. On a veth the tester
    /// treats the frame as lost instead: it marks the slot malformed (a
    /// length shorter than a header, which the kernel skips silently with
    /// `PACKET_LOSS`) and sends the rest. On other interfaces ENOBUFS means
    /// the tester's own transmit queue is full: the frame is sent again.
    fn flush(&mut self) -> Result<bool, String> {
        for _ in 0..self.slots {
            // SAFETY: send(2) with no data on our socket: transmit the ring.
            let r =
                unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            if r >= 0 {
                return Ok(true);
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOBUFS) if self.veth && self.skip_refused() => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => return Ok(false),
                _ => return Err(format!("send (TX ring): {e}")),
            }
        }
        Ok(false)
    }

    /// Marks the frame the kernel stopped at (the first of the run of
    /// "send request" slots that ends just before `head`) to be skipped.
    fn skip_refused(&mut self) -> bool {
        let mut first = None;
        let mut i = self.head;
        for _ in 1..self.slots {
            i = (i + self.slots - 1) % self.slots;
            if self.map.status(i * self.slot).load(Ordering::Acquire) != TP_STATUS_SEND_REQUEST {
                break;
            }
            first = Some(i);
        }
        let Some(i) = first else {
            return false;
        };
        // SAFETY: tp_len (u32 at offset 4) of a slot in the mapping; the
        // kernel reads it only inside our own send(2) calls.
        unsafe { (self.map.ptr.add(i * self.slot + 4) as *mut u32).write_volatile(0) };
        self.refused[usize::from(self.kind[i] == 1)] += 1;
        true
    }

    /// The next free slot's data area (copied from `tpl` if it holds another
    /// template), or None while the kernel still owns it.
    fn next_slot(&mut self, kind: u8, tpl: &[u8]) -> Result<Option<&mut [u8]>, String> {
        let off = self.head * self.slot;
        let st = self.map.status(off).load(Ordering::Acquire);
        if st == TP_STATUS_WRONG_FORMAT {
            return Err("the kernel refused a frame (TP_STATUS_WRONG_FORMAT)".into());
        }
        if st != TP_STATUS_AVAILABLE {
            return Ok(None);
        }
        // SAFETY: the slot belongs to us (status available) and lies inside
        // the mapping; its data area has slot - TX_DATA_OFF >= vnet +
        // tpl.len() bytes.
        let area = unsafe {
            std::slice::from_raw_parts_mut(
                self.map.ptr.add(off + TX_DATA_OFF),
                self.vnet + tpl.len(),
            )
        };
        let (hdr, data) = area.split_at_mut(self.vnet);
        if self.kind[self.head] != kind {
            if self.vnet > 0 {
                // struct virtio_net_hdr: flags 0, gso_type NONE, hdr_len
                // (little endian) = the whole frame, no GSO, no checksum offload.
                hdr.fill(0);
                hdr[2..4].copy_from_slice(&(tpl.len() as u16).to_le_bytes());
            }
            data.copy_from_slice(tpl);
            self.kind[self.head] = kind;
        }
        Ok(Some(data))
    }

    /// Hands the current slot (`len` bytes) to the kernel.
    fn commit(&mut self, len: usize) {
        let off = self.head * self.slot;
        // SAFETY: tp_len (u32 at offset 4) of a slot we own.
        unsafe { (self.map.ptr.add(off + 4) as *mut u32).write_volatile((self.vnet + len) as u32) };
        self.map
            .status(off)
            .store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.head = (self.head + 1) % self.slots;
    }
}

/// Sending with `sendmmsg(2)` on an AF_PACKET socket, the fallback when a
/// TX ring cannot be set up: each frame is copied into a linear buffer by
/// the kernel (on veth here it costs the same CPU per frame as the ring).
pub struct MmsgTx {
    fd: OwnedFd,
    out: Mmsg,
    kind: Vec<u8>,
    used: usize,
}

impl MmsgTx {
    pub fn open(ifname: &str, max_len: usize, batch: usize) -> Result<MmsgTx, String> {
        let ifi = ifindex(ifname)?;
        let sock = packet_socket()?;
        let _ = set_int(sock.as_raw_fd(), SOL_PACKET, PACKET_QDISC_BYPASS, 1);
        let _ = set_int(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            4 << 20,
        );
        bind_if(sock.as_raw_fd(), ifi, 0)?;
        Ok(MmsgTx {
            fd: sock,
            out: Mmsg::new(batch, max_len),
            kind: vec![u8::MAX; batch],
            used: 0,
        })
    }
    fn next_slot(&mut self, kind: u8, tpl: &[u8]) -> Result<Option<&mut [u8]>, String> {
        let i = self.used;
        if i == self.kind.len() {
            return Ok(None);
        }
        let d = &mut self.out.buf_mut(i)[..tpl.len()];
        if self.kind[i] != kind {
            d.copy_from_slice(tpl);
            self.kind[i] = kind;
        }
        Ok(Some(d))
    }
    fn commit(&mut self, len: usize) {
        self.out.set_len(self.used, len);
        self.used += 1;
    }
    fn flush(&mut self) -> Result<bool, String> {
        let n = self.used;
        if n == 0 {
            return Ok(true);
        }
        let mut done = 0;
        let mut ok = true;
        while done < n {
            let e = match self.out.send(self.fd.as_raw_fd(), done, n) {
                Ok(r) => {
                    done += r;
                    continue;
                }
                Err(e) => e,
            };
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                    ok = false;
                    break;
                }
                _ => return Err(format!("sendmmsg (AF_PACKET): {e}")),
            }
        }
        self.used = 0;
        Ok(ok)
    }
}

/// The sending side of the packet I/O.
pub enum Tx {
    Ring(TxRing),
    Mmsg(MmsgTx),
    Xsk(Box<crate::io_xdp::XskTx>),
}

impl Tx {
    fn next_slot(&mut self, kind: u8, tpl: &[u8]) -> Result<Option<&mut [u8]>, String> {
        match self {
            Tx::Ring(r) => r.next_slot(kind, tpl),
            Tx::Mmsg(m) => m.next_slot(kind, tpl),
            Tx::Xsk(x) => x.next_slot(kind, tpl),
        }
    }
    fn commit(&mut self, len: usize) {
        match self {
            Tx::Ring(r) => r.commit(len),
            Tx::Mmsg(m) => m.commit(len),
            Tx::Xsk(x) => x.commit(len),
        }
    }
    fn flush(&mut self) -> Result<bool, String> {
        match self {
            Tx::Ring(r) => r.flush(),
            Tx::Mmsg(m) => m.flush(),
            Tx::Xsk(x) => x.flush(),
        }
    }
    /// Frames the interface refused (lost), see [`TxRing::flush`]: [test
    /// frames, background frames].
    fn refused(&self) -> [u64; 2] {
        match self {
            Tx::Ring(r) => r.refused,
            _ => [0; 2],
        }
    }
}

/// What one sender sends: the main stream and optionally background frames.
struct TxPlan {
    netns: Option<String>,
    port: PortIo,
    cpu: Option<usize>,
    main: Builder,
    sport: u16,
    src_ports: Option<(u16, u16)>,
    dport: u16,
    dst_ports: Option<(u16, u16)>,
    src_addrs: Option<(IpAddr, IpAddr)>,
    dst_addrs: Option<(IpAddr, IpAddr)>,
    bg: Option<(Builder, Background)>,
    batch: usize,
    rate: u64,
    planned: u64,
}

pub struct TxOut {
    /// CPU seconds the sender thread used (its share of the kernel's work
    /// included), for cost per frame independent of other load.
    pub cpu_s: f64,
    pub sent: u64,
    pub send_errors: u64,
    /// Frames the sending interface refused (lost on the way to the DUT):
    /// [test frames, background frames].
    pub refused: [u64; 2],
    pub elapsed: f64,
    pub max_lag_us: u64,
    /// `Pacer::max_burst`: the bucket at the rate the departures needed.
    pub send_burst: u64,
    pub behind: bool,
    /// CLOCK_MONOTONIC when the last frame was handed to the kernel: the
    /// post-trial wait counts from here (closing the sockets afterwards,
    /// e.g. an AF_PACKET socket's RCU grace period, takes tens of ms).
    pub end_ns: u64,
}

/// CPU time of the calling thread, seconds.
pub fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn rand_addr(rng: &mut Rng, r: (IpAddr, IpAddr)) -> IpAddr {
    match r {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let (a, b) = (u32::from(a) as u64, u32::from(b) as u64);
            IpAddr::V4(((a + (rng.next() >> 11) % (b - a + 1)) as u32).into())
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let (a, b) = (u128::from(a), u128::from(b));
            let span = b - a;
            let off = if span == u128::MAX {
                ((rng.next() as u128) << 64) | rng.next() as u128
            } else {
                (((rng.next() as u128) << 64) | rng.next() as u128) % (span + 1)
            };
            IpAddr::V6((a + off).into())
        }
        _ => r.0,
    }
}

/// The end of the post-trial wait (RFC 2544 section 23), set as soon as the
/// last sender has sent its last frame: the wait counts from there, not
/// from when the senders were done closing their sockets (an AF_PACKET
/// socket's close waits for an RCU grace period, tens of milliseconds, in
/// which frames that arrived after a short wait would still have counted).
struct WaitClock {
    senders_left: std::sync::atomic::AtomicUsize,
    last_end: AtomicU64,
    wait_ns: u64,
    stop_at: Arc<AtomicU64>,
}

impl WaitClock {
    /// A sender sent its last frame at `end_ns` (monotonic).
    fn sender_done(&self, end_ns: u64) {
        self.last_end.fetch_max(end_ns, Ordering::AcqRel);
        if self.senders_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let end = self.last_end.load(Ordering::Acquire);
            self.stop_at
                .store(stop_time(end, self.wait_ns), Ordering::Release);
        }
    }
}

/// The receivers' stop time for a last frame sent at `end` (never 0 or 1,
/// which mean "not yet" and "abort").
fn stop_time(end: u64, wait_ns: u64) -> u64 {
    end + wait_ns + 2
}

fn tx_loop(p: &TxPlan, mut ring: Tx, stream: u16, clock: &WaitClock) -> Result<TxOut, String> {
    // SAFETY: plain prctl with integer arguments (precise sleeps).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let mut rng = Rng::new(monotonic_ns() ^ ((stream as u64) << 32));
    let mut pacer = Pacer::new(p.planned, p.rate, p.batch);
    let (mut sent, mut send_errors) = (0u64, 0u64);
    let (mut seq_main, mut seq_bg) = (0u32, 0u32);
    'sched: while let Some(n) = pacer.next(sent) {
        let ts = monotonic_ns();
        for k in 0..n {
            let i = sent + k as u64;
            let bg = p.bg.as_ref().filter(|(_, b)| b.is_bg(i));
            let (kind, b) = match bg {
                Some((b, _)) => (1u8, b),
                None => (0u8, &p.main),
            };
            let slot = loop {
                // Borrow dance: check, flush, retry.
                let ok = ring.next_slot(kind, &b.template)?.is_some();
                if ok {
                    break ring.next_slot(kind, &b.template)?.unwrap();
                }
                if !ring.flush()? {
                    send_errors += 1;
                }
                std::thread::yield_now();
                if pacer.past_hard_stop() {
                    sent += k as u64;
                    break 'sched;
                }
            };
            // RFC 4814 section 4.5: pseudorandom ports for every frame,
            // background ones too (they had the fixed ports).
            let sport = p.src_ports.map_or(p.sport, |(lo, hi)| rng.range(lo, hi));
            if let Some((_, bgd)) = bg {
                let dport = p
                    .dst_ports
                    .map_or(bgd.dst.port(), |(lo, hi)| rng.range(lo, hi));
                b.finish(slot, sport, dport, seq_bg, ts, None);
                seq_bg += 1;
            } else {
                let dport = p.dst_ports.map_or(p.dport, |(lo, hi)| rng.range(lo, hi));
                let addrs = if p.src_addrs.is_some() || p.dst_addrs.is_some() {
                    let (s0, d0) = b.addrs();
                    Some((
                        p.src_addrs.map_or(s0, |r| rand_addr(&mut rng, r)),
                        p.dst_addrs.map_or(d0, |r| rand_addr(&mut rng, r)),
                    ))
                } else {
                    None
                };
                b.finish(slot, sport, dport, seq_main, ts, addrs);
                seq_main += 1;
            }
            let len = b.len();
            ring.commit(len);
        }
        if !ring.flush()? {
            send_errors += 1;
        }
        sent += n as u64;
        if pacer.aborted {
            break;
        }
    }
    // Let the kernel finish what is queued.
    for _ in 0..100 {
        if ring.flush()? {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let elapsed = pacer.elapsed();
    let end_ns = monotonic_ns();
    clock.sender_done(end_ns);
    Ok(TxOut {
        end_ns,
        // The pacer's clock polling is waiting, not the cost of sending.
        cpu_s: (thread_cpu_s() - pacer.spun.as_secs_f64()).max(0.0),
        sent,
        send_errors,
        refused: ring.refused(),
        elapsed,
        max_lag_us: pacer.max_lag.as_micros() as u64,
        send_burst: pacer.max_burst(),
        behind: pacer.behind(sent, elapsed),
    })
}

/// Counters of one stream at a receiver.
#[derive(Default)]
pub(crate) struct StreamRx {
    stream: u16,
    /// The Ethernet type its frames must arrive with (the receive port's
    /// family: a DUT that forwards them untranslated delivers none).
    ethertype: u16,
    /// Where its frames must arrive (see [`RxPlan::dst`]).
    dst: Expect,
    planned: u64,
    seen: Seen,
    received: u64,
    duplicates: u64,
    late: u64,
    delays: Option<Vec<Option<u64>>>,
}

pub struct RxOut {
    pub(crate) streams: Vec<StreamRx>,
    pub(crate) foreign: u64,
    pub(crate) other: u64,
    pub(crate) ring_drops: u64,
}

/// The per-stream counters of a receiver.
pub(crate) fn rx_streams(p: &RxPlan) -> Vec<StreamRx> {
    p.streams
        .iter()
        .map(|&(stream, planned, d)| StreamRx {
            stream,
            // Background frames (RFC 8219 section 6.1) are native IPv6,
            // whatever the receive port's family: not checked.
            ethertype: if stream & STREAM_BACKGROUND != 0 {
                0
            } else {
                p.ethertype
            },
            dst: if stream & STREAM_BACKGROUND != 0 {
                Expect::default()
            } else {
                p.dst
            },
            planned,
            seen: Seen::new(planned),
            delays: d.then(|| vec![None; planned as usize]),
            ..Default::default()
        })
        .collect()
}

/// Counts one received frame (both packet and xdp I/O): a test frame of a
/// stream of this trial is received, duplicate or late (arrival `rx_ns`
/// after `stop`, the end of the post-trial wait); anything else is
/// foreign (UDP) or other.
pub(crate) fn count_frame(
    streams: &mut [StreamRx],
    data: &[u8],
    rx_ns: u64,
    stop: u64,
    foreign: &mut u64,
    other: &mut u64,
) {
    match io_frame::parse(data, true) {
        Rx::Other => *other += 1,
        Rx::Foreign => *foreign += 1,
        Rx::Test(stream, seq, tx) => match streams.iter_mut().find(|s| s.stream == stream) {
            None => *foreign += 1,
            // A test frame of the other family (not translated): foreign.
            Some(s)
                if s.ethertype != 0 && u16::from_be_bytes([data[12], data[13]]) != s.ethertype =>
            {
                *foreign += 1
            }
            // Delivered to another address or port than it was sent to (a
            // DUT that translates or forwards to the wrong place): foreign.
            Some(s) if !s.dst.holds(data) => *foreign += 1,
            Some(s) => {
                let seq = seq as u64;
                if seq >= s.planned {
                    *foreign += 1;
                } else if stop > 1 && rx_ns > stop {
                    // RFC 2544 section 23: after the wait, a frame is lost.
                    s.late += 1;
                } else {
                    if !s.seen.first(seq) {
                        s.duplicates += 1;
                    } else {
                        s.received += 1;
                        if let Some(d) = &mut s.delays {
                            d[seq as usize] = Some(rx_ns.saturating_sub(tx));
                        }
                    }
                }
            }
        },
    }
}

/// While it lives, the receiving namespace's kernel drops test frames at
/// the interface's netdev ingress hook (nftables), after the AF_PACKET tap
/// has seen them: the namespace's IP stack never processes them (no UDP
/// lookup, no ICMP port unreachable back to the DUT, less work on the CPU
/// that delivers the frames). Removed on drop.
pub struct IngressDrop {
    /// `nft delete table netdev TABLE` in its namespace: run on drop, or by
    /// a signal's clean-up.
    undo: crate::undo::Undo,
}

fn nft(netns: Option<&str>, script: &str) -> Result<(), String> {
    use std::io::Write;
    let mut c = match netns {
        Some(ns) => {
            let mut c = std::process::Command::new("ip");
            c.args(["netns", "exec", ns, "nft", "-f", "-"]);
            c
        }
        None => {
            let mut c = std::process::Command::new("nft");
            c.args(["-f", "-"]);
            c
        }
    };
    let mut ch = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("nft: {e}"))?;
    if let Some(mut i) = ch.stdin.take() {
        let _ = i.write_all(script.as_bytes());
    }
    let out = ch.wait_with_output().map_err(|e| format!("nft: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "nft: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

impl IngressDrop {
    pub fn install(netns: Option<&str>, ifname: &str) -> Result<IngressDrop, String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let table = format!(
            "xlp_rx_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        // UDP whose payload starts with the test signature "XLPT".
        let script = format!(
            "table netdev {table} {{\n chain in {{\n  type filter hook ingress device \"{ifname}\" priority 0; policy accept;\n  udp length >= 26 @th,64,32 0x{:08x} counter drop\n }}\n}}\n",
            u32::from_be_bytes(crate::payload::TIMED_SIGNATURE)
        );
        remove_stale_tables(netns);
        let undo = crate::undo::Undo::register(vec![crate::undo::in_netns(
            netns,
            &["nft", "delete", "table", "netdev", &table],
        )]);
        nft(netns, &script)?;
        Ok(IngressDrop { undo })
    }
}

/// Deletes the drop tables (`xlp_rx_PID_N`) that an xlat-perf killed with
/// SIGKILL left in `netns`: their process is gone, and they would drop the
/// test frames of every later run. Tables of running processes stay.
fn remove_stale_tables(netns: Option<&str>) {
    let argv = crate::undo::in_netns(netns, &["nft", "list", "tables", "netdev"]);
    let Ok(out) = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let script: String = stale_tables(&text, |pid| {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    })
    .iter()
    .map(|t| format!("delete table netdev {t}\n"))
    .collect();
    if !script.is_empty() {
        let _ = nft(netns, &script);
    }
}

/// The `xlp_rx_PID_N` tables in `nft list tables netdev` output whose PID
/// is not `alive`.
fn stale_tables(listing: &str, alive: impl Fn(u32) -> bool) -> Vec<String> {
    listing
        .lines()
        .filter_map(|l| l.trim().strip_prefix("table netdev "))
        .filter(|name| {
            let mut parts = name.strip_prefix("xlp_rx_").map(|r| r.split('_'));
            let pid = parts.as_mut().and_then(|p| p.next()?.parse::<u32>().ok());
            let n_ok = parts
                .as_mut()
                .and_then(|p| p.next())
                .is_some_and(|n| n.parse::<u64>().is_ok());
            matches!(pid, Some(pid) if n_ok && pid != std::process::id() && !alive(pid))
        })
        .map(str::to_string)
        .collect()
}

impl Drop for IngressDrop {
    fn drop(&mut self) {
        self.undo.run();
    }
}

pub(crate) struct RxPlan {
    pub(crate) netns: Option<String>,
    pub(crate) ifname: String,
    pub(crate) cpu: Option<usize>,
    /// Drop test frames at the netdev ingress hook (see [`IngressDrop`]).
    ingress_drop: bool,
    /// Where to swallow test frames in the kernel (no ICMP port unreachable
    /// to the DUT): a UDP socket bound to the receive address, if it exists.
    drain: Option<SocketAddr>,
    /// (stream id, planned frames, record delays)
    streams: Vec<(u16, u64, bool)>,
    /// The Ethernet type of the family the frames must arrive in.
    ethertype: u16,
    /// The destination the frames must arrive with: the receiving port's
    /// address (unless the sender draws destinations from a range) and the
    /// UDP destination port(s) they were sent to.
    dst: Expect,
}

/// The destination address (if fixed) and UDP destination port range a
/// received test frame must carry (RFC 2544 section 10: only the frames
/// that reach the receiving port as sent are counted).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expect {
    pub(crate) addr: Option<IpAddr>,
    pub(crate) ports: (u16, u16),
}

impl Default for Expect {
    fn default() -> Expect {
        Expect {
            addr: None,
            ports: (0, u16::MAX),
        }
    }
}

impl Expect {
    /// Whether Ethernet frame `f` (a test frame that `io_frame::parse`
    /// accepted: IPv4 or IPv6 without extension headers, UDP) is addressed
    /// as expected.
    fn holds(&self, f: &[u8]) -> bool {
        let (dst, l4): (IpAddr, usize) = match u16::from_be_bytes([f[12], f[13]]) {
            0x0800 if f.len() >= 34 => {
                let a: [u8; 4] = f[30..34].try_into().unwrap();
                (a.into(), 14 + (f[14] & 0x0f) as usize * 4)
            }
            0x86dd if f.len() >= 54 => {
                let a: [u8; 16] = f[38..54].try_into().unwrap();
                (a.into(), 54)
            }
            _ => return false,
        };
        let Some(p) = f.get(l4 + 2..l4 + 4) else {
            return false;
        };
        let port = u16::from_be_bytes([p[0], p[1]]);
        self.addr.is_none_or(|a| a == dst) && (self.ports.0..=self.ports.1).contains(&port)
    }
}

/// The Ethernet type of `a`'s family.
fn ethertype_of(a: std::net::IpAddr) -> u16 {
    if a.is_ipv4() {
        io_frame::ETH_P_IP
    } else {
        io_frame::ETH_P_IPV6
    }
}

fn realtime_minus_monotonic() -> i128 {
    let mut best = i128::MAX;
    let mut off = 0i128;
    for _ in 0..5 {
        let a = monotonic_ns();
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespec pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let b = monotonic_ns();
        let real = ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128;
        if ((b - a) as i128) < best {
            best = (b - a) as i128;
            off = real - (a as i128 + b as i128) / 2;
        }
    }
    off
}

type RxParts = (OwnedFd, Mmap, Option<UdpSocket>, Option<IngressDrop>);

fn rx_setup(p: &RxPlan) -> Result<RxParts, String> {
    if let Some(ns) = &p.netns {
        enter_netns(ns)?;
    }
    pin(p.cpu)?;
    let ifi = ifindex(&p.ifname)?;
    let sock = packet_socket()?;
    let fd = sock.as_raw_fd();
    set_int(fd, SOL_PACKET, PACKET_VERSION, TPACKET_V3)
        .map_err(|e| format!("PACKET_VERSION V3: {e}"))?;
    set_int(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        .map_err(|e| format!("PACKET_IGNORE_OUTGOING: {e}"))?;
    // Software receive timestamps on every frame (else coarse ones).
    let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
    let req = libc::tpacket_req3 {
        tp_block_size: RX_BLOCK as u32,
        tp_block_nr: RX_BLOCKS as u32,
        tp_frame_size: 2048,
        tp_frame_nr: (RX_BLOCK * RX_BLOCKS / 2048) as u32,
        tp_retire_blk_tov: RX_BLOCK_TOV_MS,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    set_struct(fd, SOL_PACKET, PACKET_RX_RING, &req).map_err(|e| format!("PACKET_RX_RING: {e}"))?;
    let map = Mmap::new(fd, RX_BLOCK * RX_BLOCKS)?;
    bind_if(fd, ifi, libc::ETH_P_ALL as u16)?;
    let dropper = if p.ingress_drop {
        Some(
            IngressDrop::install(p.netns.as_deref(), &p.ifname).map_err(|e| {
                format!(
                    "installing the ingress drop on {} ({e}); --recv-drop off avoids it",
                    p.ifname
                )
            })?,
        )
    } else {
        None
    };
    // Without it, a UDP socket with a tiny buffer swallows fixed-port test
    // frames (else the kernel answers ICMP port unreachable).
    let drain = p.drain.filter(|_| dropper.is_none()).and_then(|a| {
        let s = UdpSocket::bind(a).ok()?;
        let _ = set_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 1);
        Some(s)
    });
    Ok((sock, map, drain, dropper))
}

fn rx_loop(
    p: &RxPlan,
    ready: mpsc::Sender<Result<(), String>>,
    stop_at: Arc<AtomicU64>,
    limit_s: f64,
) -> Result<RxOut, String> {
    let (sock, map, _drain, _dropper) = match rx_setup(p) {
        Ok(x) => {
            let _ = ready.send(Ok(()));
            x
        }
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let fd = sock.as_raw_fd();
    let mut streams = rx_streams(p);
    let (mut foreign, mut other) = (0u64, 0u64);
    let off = realtime_minus_monotonic();
    let limit = monotonic_ns() + (limit_s * 1e9) as u64;
    let mut cur = 0usize;
    // Blocks still to look at once the trial is over (a starved receiver
    // catches up on what arrived in time; other traffic cannot keep it alive).
    let mut drain: Option<usize> = None;
    loop {
        let now = monotonic_ns();
        let stop = stop_at.load(Ordering::Acquire);
        // Past the end of the wait plus a few block timeouts: every frame
        // that arrived in time has been handed over.
        if stop == 1 || now >= limit {
            break;
        }
        if drain.is_none() && stop > 1 && now >= stop + (u64::from(RX_BLOCK_TOV_MS) + 6) * 1_000_000
        {
            drain = Some(RX_BLOCKS);
        }
        if drain == Some(0) {
            break;
        }
        let boff = cur * RX_BLOCK;
        let st = map.status(boff + 8).load(Ordering::Acquire);
        if st & TP_STATUS_USER == 0 {
            if drain.is_some() {
                break;
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 5) };
            continue;
        }
        let stop = stop_at.load(Ordering::Acquire);
        let now_mono = monotonic_ns();
        // SAFETY: block header fields inside the mapping; the block is ours.
        let (num, first) = unsafe {
            (
                (map.ptr.add(boff + 12) as *const u32).read_volatile(),
                (map.ptr.add(boff + 16) as *const u32).read_volatile(),
            )
        };
        let mut po = boff + first as usize;
        for _ in 0..num {
            // SAFETY: tpacket3_hdr fields of a frame inside this block.
            let (next, sec, nsec, snap, status, mac) = unsafe {
                let h = map.ptr.add(po);
                (
                    (h as *const u32).read_volatile(),
                    (h.add(4) as *const u32).read_volatile(),
                    (h.add(8) as *const u32).read_volatile(),
                    (h.add(12) as *const u32).read_volatile(),
                    (h.add(20) as *const u32).read_volatile(),
                    (h.add(24) as *const u16).read_volatile(),
                )
            };
            // SAFETY: the captured bytes of this frame, inside the block.
            let data = unsafe {
                std::slice::from_raw_parts(map.ptr.add(po + mac as usize), snap as usize)
            };
            let rx_ns = if status & TP_STATUS_TS_SOFTWARE != 0 {
                let real = sec as i128 * 1_000_000_000 + nsec as i128;
                (real - off).max(0) as u64
            } else {
                now_mono
            };
            count_frame(&mut streams, data, rx_ns, stop, &mut foreign, &mut other);
            if next == 0 {
                break;
            }
            po += next as usize;
        }
        map.status(boff + 8).store(0, Ordering::Release);
        cur = (cur + 1) % RX_BLOCKS;
        drain = drain.map(|d| d - 1);
    }
    let ring_drops = crate::sockopt::packet_drops(fd);
    Ok(RxOut {
        streams,
        foreign,
        other,
        ring_drops,
    })
}

/// One direction of a trial: who sends what to whom.
struct Direction {
    tx: TxPlan,
    rx: RxPlan,
}

fn spawn_rx(
    p: RxPlan,
    stop_at: Arc<AtomicU64>,
    limit_s: f64,
    kind: IoKind,
) -> Result<std::thread::JoinHandle<Result<RxOut, String>>, String> {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::Builder::new()
        .name("xlp-prx".into())
        .spawn(move || {
            if kind == IoKind::Xdp {
                crate::io_xdp::rx_loop(&p, tx, stop_at, limit_s)
            } else {
                rx_loop(&p, tx, stop_at, limit_s)
            }
        })
        .map_err(|e| format!("spawn receiver: {e}"))?;
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => {
            let _ = h.join();
            Err(format!("receiver: {e}"))
        }
        Err(_) => Err("receiver did not start".into()),
    }
}

fn frame_spec(
    port: &PortIo,
    next_hop: Mac,
    src: IpAddr,
    dst: SocketAddr,
    sport: u16,
    payload: usize,
    stream: u16,
) -> FrameSpec {
    FrameSpec {
        l2: Some((next_hop, port.mac)),
        src,
        dst: dst.ip(),
        sport,
        dport: dst.port(),
        payload,
        stream,
    }
}

/// Runs one trial on packet I/O (see `engine::run_trial`).
pub fn run_trial(
    ep: &crate::engine::Endpoints,
    spec: &TrialSpec,
    planned: u64,
) -> Result<TrialOut, String> {
    let io = &ep.io;
    let sp = io
        .send_port
        .clone()
        .ok_or("packet I/O: the sending port is not resolved")?;
    let rp = io
        .recv_port
        .clone()
        .ok_or("packet I/O: the receiving port is not resolved")?;
    let src = ep
        .src
        .ok_or("packet I/O needs the source address (--src)")?;
    let stream = spec.stream & !(STREAM_BACKGROUND | STREAM_REVERSE);
    let bg = io.background.clone();
    let n_bg = bg.as_ref().map_or(0, |b| b.count(planned));
    let n_main = planned - n_bg;
    let main = Builder::new(&frame_spec(
        &sp,
        sp.next_hop,
        src,
        ep.dst,
        io.src_port,
        ep.payload,
        stream,
    ))?;
    let bgb = match &bg {
        None => None,
        Some(b) => Some((
            Builder::new(&frame_spec(
                &sp,
                b.next_hop,
                b.src,
                b.dst,
                io.src_port,
                ep.payload,
                stream | STREAM_BACKGROUND,
            ))?,
            b.clone(),
        )),
    };
    let mut rx_streams = vec![(stream, n_main, spec.delays)];
    if bg.is_some() {
        rx_streams.push((stream | STREAM_BACKGROUND, n_bg, false));
    }
    let mut dirs = vec![Direction {
        tx: TxPlan {
            netns: ep.send_netns.clone(),
            port: sp.clone(),
            cpu: io.send_cpu,
            main,
            sport: io.src_port,
            src_ports: ep.src_ports,
            dport: ep.dst.port(),
            dst_ports: io.dst_ports,
            src_addrs: io.src_addrs,
            dst_addrs: io.dst_addrs,
            bg: bgb,
            batch: ep.batch,
            rate: spec.rate,
            planned,
        },
        rx: RxPlan {
            netns: ep.recv_netns.clone(),
            ifname: rp.ifname.clone(),
            cpu: io.recv_cpu,
            ingress_drop: io.recv_drop,
            drain: (io.dst_ports.is_none() && io.dst_addrs.is_none()).then_some(ep.recv_bind),
            streams: rx_streams,
            ethertype: ethertype_of(ep.recv_bind.ip()),
            dst: Expect {
                // A wildcard --recv-bind (0.0.0.0, ::) names no address.
                addr: (io.dst_addrs.is_none() && !ep.recv_bind.ip().is_unspecified())
                    .then_some(ep.recv_bind.ip()),
                ports: io.dst_ports.unwrap_or((ep.dst.port(), ep.dst.port())),
            },
        },
    }];
    if let Some(rdst) = io.reverse_dst {
        let rstream = stream | STREAM_REVERSE;
        let b = Builder::new(&frame_spec(
            &rp,
            rp.next_hop,
            ep.recv_bind.ip(),
            rdst,
            io.src_port,
            // Same UDP payload: the frame sizes mirror the forward ones.
            ep.payload,
            rstream,
        ))?;
        dirs.push(Direction {
            tx: TxPlan {
                netns: ep.recv_netns.clone(),
                port: rp.clone(),
                cpu: io.send_cpu,
                main: b,
                sport: io.src_port,
                src_ports: ep.src_ports,
                dport: rdst.port(),
                dst_ports: io.dst_ports,
                src_addrs: None,
                dst_addrs: None,
                bg: None,
                batch: ep.batch,
                rate: spec.rate,
                planned,
            },
            rx: RxPlan {
                netns: ep.send_netns.clone(),
                ifname: sp.ifname.clone(),
                cpu: io.recv_cpu,
                ingress_drop: io.recv_drop,
                drain: io
                    .dst_ports
                    .is_none()
                    .then_some(SocketAddr::new(src, rdst.port())),
                streams: vec![(rstream, planned, spec.delays)],
                ethertype: ethertype_of(src),
                dst: Expect {
                    addr: io.src_addrs.is_none().then_some(src),
                    ports: io.dst_ports.unwrap_or((rdst.port(), rdst.port())),
                },
            },
        });
    }
    let stop_at = Arc::new(AtomicU64::new(0));
    let limit_s = spec.duration * 2.0 + spec.wait + 30.0;
    let mut rxs = Vec::new();
    for d in &mut dirs {
        let plan = RxPlan {
            netns: d.rx.netns.clone(),
            ifname: d.rx.ifname.clone(),
            cpu: d.rx.cpu,
            ingress_drop: d.rx.ingress_drop,
            drain: d.rx.drain,
            streams: std::mem::take(&mut d.rx.streams),
            ethertype: d.rx.ethertype,
            dst: d.rx.dst,
        };
        match spawn_rx(plan, stop_at.clone(), limit_s, io.kind) {
            Ok(h) => rxs.push(h),
            Err(e) => {
                stop_at.store(1, Ordering::Release);
                for h in rxs {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    // Senders: set up every ring first, then start the schedules together
    // (a sender whose setup failed makes all of them stop before sending).
    let go = Arc::new(std::sync::Barrier::new(dirs.len()));
    let clock = Arc::new(WaitClock {
        senders_left: std::sync::atomic::AtomicUsize::new(dirs.len()),
        last_end: AtomicU64::new(0),
        wait_ns: (spec.wait * 1e9) as u64,
        stop_at: stop_at.clone(),
    });
    let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut txs = Vec::new();
    let kind = io.kind;
    for d in dirs {
        let (go, failed, clock) = (go.clone(), failed.clone(), clock.clone());
        let tx = d.tx;
        let h = std::thread::Builder::new()
            .name("xlp-ptx".into())
            .spawn(move || {
                let setup = (|| {
                    if let Some(ns) = &tx.netns {
                        enter_netns(ns)?;
                    }
                    pin(tx.cpu)?;
                    let max_len = tx
                        .main
                        .len()
                        .max(tx.bg.as_ref().map_or(0, |(b, _)| b.len()));
                    if kind == IoKind::Xdp {
                        return crate::io_xdp::XskTx::open(&tx.port.ifname)
                            .map(|x| Tx::Xsk(Box::new(x)));
                    }
                    // Without a TX ring (older kernels): sendmmsg(2) on the
                    // same kind of socket.
                    TxRing::open(&tx.port.ifname, max_len)
                        .map(Tx::Ring)
                        .or_else(|e| {
                            MmsgTx::open(&tx.port.ifname, max_len, tx.batch)
                                .map(Tx::Mmsg)
                                .map_err(|e2| format!("{e}; {e2}"))
                        })
                })();
                if setup.is_err() {
                    failed.store(true, Ordering::Release);
                }
                go.wait();
                let ring = setup.map_err(|e| format!("sender: {e}"))?;
                if failed.load(Ordering::Acquire) {
                    return Err("sender: another sender failed to start".into());
                }
                tx_loop(&tx, ring, stream, &clock).map_err(|e| format!("sender: {e}"))
            })
            .map_err(|e| format!("spawn sender: {e}"))?;
        txs.push(h);
    }
    let txo: Vec<Result<TxOut, String>> = txs
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| Err("sender panicked".into())))
        .collect();
    // RFC 2544 section 23 / RFC 8219 section 7.1: wait for late frames, then
    // stop; the wait starts when the last frame was sent (WaitClock has set
    // the same time already unless a sender failed).
    let end = txo
        .iter()
        .filter_map(|t| t.as_ref().ok().map(|t| t.end_ns))
        .max()
        .unwrap_or_else(monotonic_ns);
    stop_at.store(stop_time(end, (spec.wait * 1e9) as u64), Ordering::Release);
    let rxo: Vec<Result<RxOut, String>> = rxs
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| Err("receiver panicked".into())))
        .collect();
    let mut outs = Vec::new();
    for (t, r) in txo.into_iter().zip(rxo) {
        let t = t?;
        let r = r.map_err(|e| format!("receiver: {e}"))?;
        outs.push((t, r));
    }
    let mut it = outs.into_iter();
    let (t0, mut r0) = it.next().unwrap();
    let mk = |s: StreamRx, t: &TxOut, bg: bool, planned: u64, sent: u64, foreign, other, drops| {
        TrialOut {
            rate: spec.rate,
            planned,
            sent,
            received: s.received,
            duplicates: s.duplicates,
            foreign,
            other,
            late: s.late,
            rx_ring_drops: drops,
            send_errors: t.send_errors,
            tx_refused: t.refused[usize::from(bg)],
            tx_cpu_s: t.cpu_s,
            elapsed: t.elapsed,
            max_lag_us: t.max_lag_us,
            send_burst: t.send_burst,
            behind: t.behind,
            delays: s.delays.unwrap_or_default(),
            ..Default::default()
        }
    };
    // Sent frames per stream follow the schedule's n/m split.
    let sent_bg = bg.as_ref().map_or(0, |b| b.count(t0.sent));
    let bg_stream = if bg.is_some() { r0.streams.pop() } else { None };
    let main_stream = r0.streams.pop().unwrap();
    let mut out = mk(
        main_stream,
        &t0,
        false,
        n_main,
        t0.sent - sent_bg,
        r0.foreign,
        r0.other,
        r0.ring_drops,
    );
    if let Some(s) = bg_stream {
        let mut b = mk(s, &t0, true, n_bg, sent_bg, 0, 0, 0);
        // The background stream's own rate: n/m of the offered frames.
        if let Some(g) = &bg {
            b.rate = spec.rate * g.n as u64 / g.m as u64;
        }
        out.background = Some(Box::new(b));
    }
    if let Some((t1, mut r1)) = it.next() {
        let s = r1.streams.pop().unwrap();
        out.reverse = Some(Box::new(mk(
            s,
            &t1,
            false,
            planned,
            t1.sent,
            r1.foreign,
            r1.other,
            r1.ring_drops,
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Only xlat-perf's own tables of processes that are gone are stale.
    #[test]
    fn stale_tables_are_those_of_dead_processes() {
        let me = std::process::id();
        let listing = format!(
            "table netdev xlp_rx_4242_0\ntable netdev xlp_rx_77_3\ntable netdev xlp_rx_{me}_1\n\
             table netdev filter\ntable netdev xlp_rx_x_1\ntable netdev xlp_rx_5\n"
        );
        let got = stale_tables(&listing, |pid| pid == 77);
        assert_eq!(got, vec!["xlp_rx_4242_0".to_string()]);
    }

    // RFC 8219 section 6.1: n of every m frames are background traffic; the
    // count over any prefix of the schedule matches the per-frame choice.
    #[test]
    fn rfc8219_s6_1_background_fraction() {
        let b = Background {
            n: 2,
            m: 7,
            src: "2001:db8::1".parse().unwrap(),
            dst: "[2001:db8::2]:9".parse().unwrap(),
            next_hop: [0; 6],
        };
        for total in [0u64, 1, 2, 3, 7, 8, 9, 700, 701, 1003] {
            let direct = (0..total).filter(|&i| b.is_bg(i)).count() as u64;
            assert_eq!(b.count(total), direct, "{total}");
        }
        assert_eq!(b.count(7000), 2000);
    }

    /// A frame that reaches the receive port in the family it was sent in
    /// (a DUT that forwards IPv6 test frames without translating them to
    /// IPv4) is no received frame; background frames are native IPv6 by
    /// definition.
    #[test]
    fn frames_of_the_other_family_are_foreign() {
        let frame = |src: &str, dst: &str, stream: u16| {
            let b = Builder::new(&io_frame::FrameSpec {
                l2: Some(([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])),
                src: src.parse().unwrap(),
                dst: dst.parse().unwrap(),
                sport: 1234,
                dport: 7000,
                payload: 18,
                stream,
            })
            .unwrap();
            let mut f = b.template.clone();
            b.finish(&mut f, 1234, 7000, 0, 1, None);
            f
        };
        let plan = RxPlan {
            netns: None,
            ifname: "x".into(),
            cpu: None,
            ingress_drop: false,
            drain: None,
            streams: vec![(5, 10, false), (5 | STREAM_BACKGROUND, 10, false)],
            ethertype: ethertype_of("192.0.2.2".parse().unwrap()),
            dst: Expect {
                addr: Some("192.0.2.2".parse().unwrap()),
                ports: (7000, 7000),
            },
        };
        let mut streams = rx_streams(&plan);
        let (mut foreign, mut other) = (0, 0);
        let v4 = frame("198.51.100.1", "192.0.2.2", 5);
        let v6 = frame("2001:db8::1", "64:ff9b::c000:202", 5);
        let bg = frame("2001:db8::1", "2001:db8::2", 5 | STREAM_BACKGROUND);
        for f in [&v4, &v6, &bg] {
            count_frame(&mut streams, f, 1, 0, &mut foreign, &mut other);
        }
        assert_eq!((streams[0].received, streams[1].received), (1, 1));
        assert_eq!((foreign, other), (1, 0));
        // RFC 2544 section 10: a test frame delivered to another address
        // or UDP port than it was sent to is not received (foreign).
        let elsewhere = frame("198.51.100.1", "192.0.2.3", 5);
        let other_port = {
            let b = Builder::new(&FrameSpec {
                l2: Some(([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])),
                src: "198.51.100.1".parse().unwrap(),
                dst: "192.0.2.2".parse().unwrap(),
                sport: 1234,
                dport: 7001,
                payload: 18,
                stream: 5,
            })
            .unwrap();
            let mut f = b.template.clone();
            b.finish(&mut f, 1234, 7001, 1, 1, None);
            f
        };
        assert!(matches!(
            io_frame::parse(&other_port, true),
            Rx::Test(5, 1, _)
        ));
        for f in [&elsewhere, &other_port] {
            count_frame(&mut streams, f, 1, 0, &mut foreign, &mut other);
        }
        assert_eq!(streams[0].received, 1);
        assert_eq!((foreign, other), (3, 0));
        let any = Expect::default();
        assert!(any.holds(&elsewhere) && any.holds(&other_port));
    }

    #[test]
    fn address_ranges_stay_inside() {
        let mut r = Rng::new(7);
        let v4 = ("10.0.0.250".parse().unwrap(), "10.0.1.5".parse().unwrap());
        let v6 = (
            "2001:db8::ffff:fff0".parse().unwrap(),
            "2001:db8::1:0:f".parse().unwrap(),
        );
        let (mut lo4, mut hi4) = (false, false);
        for _ in 0..10_000 {
            let a = rand_addr(&mut r, v4);
            assert!(a >= v4.0 && a <= v4.1, "{a}");
            lo4 |= a == v4.0;
            hi4 |= a == v4.1;
            let b = rand_addr(&mut r, v6);
            assert!(b >= v6.0 && b <= v6.1, "{b}");
        }
        assert!(lo4 && hi4, "both ends of a 12-address range are drawn");
    }
}
