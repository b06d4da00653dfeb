//! A batch of buffers for `sendmmsg(2)` / `recvmmsg(2)`: the buffers, one
//! iovec per buffer and one `mmsghdr` per iovec (and, if asked, one socket
//! address per message), wired together once. Every I/O loop of the tester
//! that moves frames in batches through a socket uses it.
//!
//! The kernel reads and writes through the raw pointers stored in the
//! headers, so the vectors are sized once in the constructor and never grow
//! or shrink: moving a `Mmsg` moves only the vectors' handles, never their
//! heap storage, and the pointers stay valid for the value's whole life.

use std::os::fd::RawFd;

/// `N` is the socket address type of each message (`()`: none, as for a
/// connected socket or a receiver that does not care who sent).
pub struct Mmsg<N: Copy = ()> {
    bufs: Vec<Vec<u8>>,
    iovs: Vec<libc::iovec>,
    names: Vec<N>,
    msgs: Vec<libc::mmsghdr>,
}

/// What one [`Mmsg::send_all`] did.
pub struct Sent {
    /// Messages the kernel took (from the first on).
    pub frames: usize,
    /// `sendmmsg(2)` calls made.
    pub calls: u64,
    /// Refusals retried (errnos of the `retry` list).
    pub retried: u64,
}

impl Mmsg<()> {
    /// `count` buffers of `len` bytes each, without socket addresses.
    pub fn new(count: usize, len: usize) -> Mmsg<()> {
        Mmsg::build(count, len, None)
    }
}

impl<N: Copy> Mmsg<N> {
    /// `count` buffers of `len` bytes each, message `i` carrying its own
    /// socket address (starting as `name`, full size): the destination for
    /// `send`, where the kernel writes the source for `recv`.
    pub fn with_names(count: usize, len: usize, name: N) -> Mmsg<N> {
        Mmsg::build(count, len, Some(name))
    }

    fn build(count: usize, len: usize, name: Option<N>) -> Mmsg<N> {
        let mut bufs: Vec<Vec<u8>> = (0..count).map(|_| vec![0u8; len]).collect();
        let mut iovs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        let mut names: Vec<N> = name.map_or(Vec::new(), |n| vec![n; count]);
        // SAFETY: mmsghdr is plain data; all-zero is a valid empty value.
        let mut msgs: Vec<libc::mmsghdr> =
            (0..count).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (i, (m, iov)) in msgs.iter_mut().zip(iovs.iter_mut()).enumerate() {
            m.msg_hdr.msg_iov = iov as *mut libc::iovec;
            m.msg_hdr.msg_iovlen = 1;
            if let Some(n) = names.get_mut(i) {
                m.msg_hdr.msg_name = n as *mut N as *mut libc::c_void;
                m.msg_hdr.msg_namelen = std::mem::size_of::<N>() as libc::socklen_t;
            }
        }
        Mmsg {
            bufs,
            iovs,
            names,
            msgs,
        }
    }

    /// Buffer `i`, whole.
    pub fn buf_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }

    /// Every buffer, whole, in order.
    pub fn bufs_mut(&mut self) -> impl Iterator<Item = &mut [u8]> {
        self.bufs.iter_mut().map(|b| b.as_mut_slice())
    }

    /// Makes message `i` send only the first `len` bytes of its buffer.
    pub fn set_len(&mut self, i: usize, len: usize) {
        self.iovs[i].iov_len = len.min(self.bufs[i].len());
    }

    /// Sets the socket address of message `i` (`len`: its meaningful size).
    /// Panics on a batch made without addresses.
    pub fn set_name(&mut self, i: usize, name: N, len: libc::socklen_t) {
        self.names[i] = name;
        self.msgs[i].msg_hdr.msg_namelen = len;
    }

    /// The socket address of message `i` (for `recv`, as the kernel wrote it).
    /// Panics on a batch made without addresses.
    pub fn name(&self, i: usize) -> &N {
        &self.names[i]
    }

    /// One `sendmmsg(2)` of messages `from..to`: how many the kernel took
    /// (at least one), or the error it gave.
    pub fn send(&mut self, fd: RawFd, from: usize, to: usize) -> std::io::Result<usize> {
        assert!(from < to && to <= self.msgs.len());
        // SAFETY: msgs[from..to] point at live iovecs, names and buffers that
        // this value owns and never reallocates.
        let r =
            unsafe { libc::sendmmsg(fd, self.msgs.as_mut_ptr().add(from), (to - from) as u32, 0) };
        if r > 0 {
            Ok(r as usize)
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Sends messages `0..n`, the rest again after a partial send. A refusal
    /// whose errno is in `retry` (a full queue, an ICMP error reported on the
    /// socket) is counted and retried after yielding the CPU, `EINTR` is
    /// retried uncounted, and after either `give_up()` may end the batch (the
    /// sender's schedule is lost: lateness shows there). Any other error ends
    /// it as `sendmmsg: ...`.
    pub fn send_all(
        &mut self,
        fd: RawFd,
        n: usize,
        retry: &[i32],
        mut give_up: impl FnMut() -> bool,
    ) -> Result<Sent, String> {
        let mut s = Sent {
            frames: 0,
            calls: 0,
            retried: 0,
        };
        while s.frames < n {
            s.calls += 1;
            let err = match self.send(fd, s.frames, n) {
                Ok(r) => {
                    s.frames += r;
                    continue;
                }
                Err(err) => err,
            };
            match err.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(e) if retry.contains(&e) => {
                    s.retried += 1;
                    std::thread::yield_now();
                }
                _ => return Err(format!("sendmmsg: {err}")),
            }
            if give_up() {
                break;
            }
        }
        Ok(s)
    }

    /// One `recvmmsg(2)` with `MSG_WAITFORONE` into every buffer: how many
    /// messages arrived, or the error the kernel gave (`EAGAIN` when the
    /// socket's receive timeout passed with nothing).
    pub fn recv(&mut self, fd: RawFd) -> std::io::Result<usize> {
        let named = !self.names.is_empty();
        for m in self.msgs.iter_mut() {
            m.msg_len = 0;
            if named {
                m.msg_hdr.msg_namelen = std::mem::size_of::<N>() as libc::socklen_t;
            }
        }
        // SAFETY: msgs point at live iovecs, names and buffers that this
        // value owns and never reallocates.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                self.msgs.len() as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }

    /// The bytes of message `i` of the last `recv` (cut at the buffer size).
    pub fn received(&self, i: usize) -> &[u8] {
        let len = (self.msgs[i].msg_len as usize).min(self.bufs[i].len());
        &self.bufs[i][..len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn sends_and_receives_a_batch_over_loopback() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut out = Mmsg::new(4, 64);
        for (i, b) in out.bufs_mut().enumerate() {
            b.fill(i as u8 + 1);
        }
        for i in 0..4 {
            out.set_len(i, 10 + i);
        }
        let mut done = 0;
        while done < 4 {
            done += out.send(tx.as_raw_fd(), done, 4).unwrap();
        }
        // SAFETY: sockaddr_in is plain data; all-zero is valid.
        let zero: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut inb = Mmsg::with_names(8, 12, zero);
        let mut got = Vec::new();
        while got.len() < 4 {
            let n = inb.recv(rx.as_raw_fd()).unwrap();
            for i in 0..n {
                // Each datagram arrives whole, the last one cut at 12 bytes.
                got.push(inb.received(i).to_vec());
                let from = inb.name(i);
                assert_eq!(from.sin_family as i32, libc::AF_INET);
                assert_eq!(u16::from_be(from.sin_port), tx.local_addr().unwrap().port());
            }
        }
        assert_eq!(
            got,
            vec![vec![1u8; 10], vec![2u8; 11], vec![3u8; 12], vec![4u8; 12]]
        );
    }
}
