//! The TCP session state machine of RFC 6146 §3.5.2 as a pure function.

/// TCP FIN flag (as in the TCP header's flags byte).
pub const FIN: u8 = 0x01;
/// TCP SYN flag.
pub const SYN: u8 = 0x02;
/// TCP RST flag.
pub const RST: u8 = 0x04;
/// TCP ACK flag.
pub const ACK: u8 = 0x10;

/// RFC 6146 §3.5.2.1 session states. `Closed` is never stored: a session
/// that reaches it is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TcpState {
    Closed = 0,
    V4Init = 1,
    V6Init = 2,
    Established = 3,
    V4FinRcv = 4,
    V6FinRcv = 5,
    V4FinV6FinRcv = 6,
    Trans = 7,
}

impl TcpState {
    pub(crate) fn from_u8(v: u8) -> TcpState {
        match v {
            1 => TcpState::V4Init,
            2 => TcpState::V6Init,
            3 => TcpState::Established,
            4 => TcpState::V4FinRcv,
            5 => TcpState::V6FinRcv,
            6 => TcpState::V4FinV6FinRcv,
            7 => TcpState::Trans,
            _ => TcpState::Closed,
        }
    }

    /// Stable lower-case name (for logs and `xlat session` output).
    pub fn name(self) -> &'static str {
        match self {
            TcpState::Closed => "closed",
            TcpState::V4Init => "v4_init",
            TcpState::V6Init => "v6_init",
            TcpState::Established => "established",
            TcpState::V4FinRcv => "v4_fin_rcv",
            TcpState::V6FinRcv => "v6_fin_rcv",
            TcpState::V4FinV6FinRcv => "v4_fin_v6_fin_rcv",
            TcpState::Trans => "trans",
        }
    }
}

/// Which side a packet came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Arrived on the IPv6 interface ("V6" in RFC 6146's state names).
    V6,
    /// Arrived on the IPv4 interface.
    V4,
}

/// What happens to a session's lifetime after a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// Unchanged.
    Keep,
    /// Set to TCP_EST (RFC 6146 §3.5.2: at least 2 h 4 min).
    Est,
    /// Set to TCP_TRANS (at least 4 min).
    Trans,
    /// Set to TCP_INCOMING_SYN (6 s). (Not produced by [`step`]: stored
    /// SYNs have their own 6 s timer.)
    IncomingSyn,
}

/// One step of RFC 6146 §3.5.2.2 for an existing session (or `Closed`
/// when there is none). Returns the next state and lifetime rule, or
/// `None` when the packet opens no session (only possible from `Closed`:
/// every packet of an existing session is translated and forwarded).
pub fn step(state: TcpState, side: Side, flags: u8) -> Option<(TcpState, Lifetime)> {
    use Lifetime as L;
    use TcpState::*;
    let syn = flags & SYN != 0;
    let fin = flags & FIN != 0;
    let rst = flags & RST != 0;
    Some(match state {
        // CLOSED: only a SYN opens a session. A V6 SYN -> V6 INIT with
        // TCP_TRANS; a V4 SYN (with a BIB entry and allowed by filtering,
        // so it is forwarded, not stored) -> V4 INIT with TCP_TRANS too:
        // a half-open connection is "transitory" and RFC 5382 REQ-5 (which
        // RFC 6146 §4 follows) gives it at least 4 minutes; the 6 s of
        // TCP_INCOMING_SYN are for *stored* SYNs. Anything else opens no
        // session (the caller translates it through an existing BIB
        // entry, or drops it when there is none).
        Closed => match (side, syn) {
            (Side::V6, true) => (V6Init, L::Trans),
            (Side::V4, true) => (V4Init, L::Trans),
            _ => return None,
        },
        // V4 INIT: a V6 SYN completes the (possibly simultaneous) open.
        V4Init => match (side, syn) {
            (Side::V6, true) => (Established, L::Est),
            _ => (V4Init, L::Keep),
        },
        // V6 INIT: a V4 SYN -> ESTABLISHED; a V6 SYN (retransmission)
        // refreshes TCP_TRANS; other packets pass unchanged.
        V6Init => match (side, syn) {
            (Side::V4, true) => (Established, L::Est),
            (Side::V6, true) => (V6Init, L::Trans),
            _ => (V6Init, L::Keep),
        },
        // ESTABLISHED: RST -> TRANS; FIN from one side -> that side's FIN
        // RCV; anything else refreshes TCP_EST.
        Established => {
            if rst {
                (Trans, L::Trans)
            } else if fin {
                match side {
                    Side::V4 => (V4FinRcv, L::Est),
                    Side::V6 => (V6FinRcv, L::Est),
                }
            } else {
                (Established, L::Est)
            }
        }
        // V4 FIN RCV: a V6 FIN -> V4 FIN + V6 FIN RCV with TCP_TRANS;
        // anything else refreshes TCP_EST. A RST ends the connection as in
        // ESTABLISHED: TRANS with TCP_TRANS (RFC 7857 §2.2: after a RST the
        // session goes 4 minutes after the last packet). RFC 6146's text
        // has no RST case here, and refreshing TCP_EST kept a connection
        // that a server closed with a FIN and then a RST (HTTP lingering
        // close, iperf3) and its pool4 port for 2 h 4 min.
        V4FinRcv => match (side, fin, rst) {
            (_, _, true) => (Trans, L::Trans),
            (Side::V6, true, _) => (V4FinV6FinRcv, L::Trans),
            _ => (V4FinRcv, L::Est),
        },
        V6FinRcv => match (side, fin, rst) {
            (_, _, true) => (Trans, L::Trans),
            (Side::V4, true, _) => (V4FinV6FinRcv, L::Trans),
            _ => (V6FinRcv, L::Est),
        },
        // Both FINs seen: packets pass, the lifetime is not refreshed. A
        // SYN without ACK, the first segment of a new connection on the
        // same addresses and ports (a client reusing its port while the
        // old connection waits out TCP_TRANS), opens again as from CLOSED:
        // V6 SYN -> V6 INIT, V4 SYN -> V4 INIT, with TCP_TRANS. RFC 6146
        // has no such case; kept in this state, the new connection lost its
        // session and BIB entry at the old one's deadline and then every
        // segment (as a host's TCP stack accepts such a SYN in TIME-WAIT,
        // RFC 6191, and conntrack opens a new connection).
        V4FinV6FinRcv => match (side, syn && flags & ACK == 0) {
            (Side::V6, true) => (V6Init, L::Trans),
            (Side::V4, true) => (V4Init, L::Trans),
            _ => (V4FinV6FinRcv, L::Keep),
        },
        // TRANS: any packet but a RST brings the session back to
        // ESTABLISHED; a RST leaves it to expire.
        Trans => {
            if rst {
                (Trans, L::Keep)
            } else {
                (Established, L::Est)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6146 §3.5.2.2: only SYNs leave CLOSED.
    #[test]
    fn closed_needs_syn() {
        assert_eq!(step(TcpState::Closed, Side::V6, 0), None);
        assert_eq!(step(TcpState::Closed, Side::V4, FIN), None);
        assert_eq!(step(TcpState::Closed, Side::V4, RST), None);
        assert_eq!(
            step(TcpState::Closed, Side::V6, SYN),
            Some((TcpState::V6Init, Lifetime::Trans))
        );
        assert_eq!(
            step(TcpState::Closed, Side::V4, SYN),
            Some((TcpState::V4Init, Lifetime::Trans))
        );
    }

    /// RFC 6146 §3.5.2.2, every state x side x {plain, SYN, FIN, RST},
    /// written out from the RFC's text state by state:
    /// - CLOSED: V6 SYN -> V6 INIT (TCP_TRANS); V4 SYN -> V4 INIT
    ///   (forwarded: TCP_TRANS, RFC 5382 REQ-5); other packets open no
    ///   session.
    /// - V4 INIT: V6 SYN -> ESTABLISHED (TCP_EST); else unchanged.
    /// - V6 INIT: V4 SYN -> ESTABLISHED (TCP_EST); V6 SYN -> TCP_TRANS
    ///   again; else unchanged.
    /// - ESTABLISHED: V4 FIN -> V4 FIN RCV; V6 FIN -> V6 FIN RCV; RST ->
    ///   TRANS (TCP_TRANS); else TCP_EST again.
    /// - V4 FIN RCV: V6 FIN -> V4 FIN + V6 FIN RCV (TCP_TRANS); RST from
    ///   either side -> TRANS (TCP_TRANS, RFC 7857 §2.2); else TCP_EST
    ///   again. V6 FIN RCV symmetrically.
    /// - V4 FIN + V6 FIN RCV: packets pass, lifetime untouched.
    /// - TRANS: RST -> unchanged; anything else -> ESTABLISHED (TCP_EST).
    #[test]
    fn rfc6146_3_5_2_2_every_transition() {
        use Lifetime as L;
        use Side::{V4, V6};
        use TcpState::*;
        type Row = (TcpState, Side, u8, Option<(TcpState, Lifetime)>);
        #[rustfmt::skip]
        let table: &[Row] = &[
            (Closed, V6, ACK, None),
            (Closed, V6, SYN, Some((V6Init, L::Trans))),
            (Closed, V6, FIN, None),
            (Closed, V6, RST, None),
            (Closed, V4, ACK, None),
            (Closed, V4, SYN, Some((V4Init, L::Trans))),
            (Closed, V4, FIN, None),
            (Closed, V4, RST, None),
            (V4Init, V6, ACK, Some((V4Init, L::Keep))),
            (V4Init, V6, SYN, Some((Established, L::Est))),
            (V4Init, V6, FIN, Some((V4Init, L::Keep))),
            (V4Init, V6, RST, Some((V4Init, L::Keep))),
            (V4Init, V4, ACK, Some((V4Init, L::Keep))),
            (V4Init, V4, SYN, Some((V4Init, L::Keep))),
            (V4Init, V4, FIN, Some((V4Init, L::Keep))),
            (V4Init, V4, RST, Some((V4Init, L::Keep))),
            (V6Init, V6, ACK, Some((V6Init, L::Keep))),
            (V6Init, V6, SYN, Some((V6Init, L::Trans))),
            (V6Init, V6, FIN, Some((V6Init, L::Keep))),
            (V6Init, V6, RST, Some((V6Init, L::Keep))),
            (V6Init, V4, ACK, Some((V6Init, L::Keep))),
            (V6Init, V4, SYN, Some((Established, L::Est))),
            (V6Init, V4, FIN, Some((V6Init, L::Keep))),
            (V6Init, V4, RST, Some((V6Init, L::Keep))),
            (Established, V6, ACK, Some((Established, L::Est))),
            (Established, V6, SYN, Some((Established, L::Est))),
            (Established, V6, FIN, Some((V6FinRcv, L::Est))),
            (Established, V6, RST, Some((Trans, L::Trans))),
            (Established, V4, ACK, Some((Established, L::Est))),
            (Established, V4, SYN, Some((Established, L::Est))),
            (Established, V4, FIN, Some((V4FinRcv, L::Est))),
            (Established, V4, RST, Some((Trans, L::Trans))),
            (V4FinRcv, V6, ACK, Some((V4FinRcv, L::Est))),
            (V4FinRcv, V6, FIN, Some((V4FinV6FinRcv, L::Trans))),
            (V4FinRcv, V4, ACK, Some((V4FinRcv, L::Est))),
            (V4FinRcv, V4, FIN, Some((V4FinRcv, L::Est))),
            (V4FinRcv, V4, RST, Some((Trans, L::Trans))),
            (V4FinRcv, V6, RST, Some((Trans, L::Trans))),
            (V4FinRcv, V6, FIN | RST, Some((Trans, L::Trans))),
            (V6FinRcv, V4, ACK, Some((V6FinRcv, L::Est))),
            (V6FinRcv, V4, FIN, Some((V4FinV6FinRcv, L::Trans))),
            (V6FinRcv, V6, ACK, Some((V6FinRcv, L::Est))),
            (V6FinRcv, V6, FIN, Some((V6FinRcv, L::Est))),
            (V6FinRcv, V4, RST, Some((Trans, L::Trans))),
            (V6FinRcv, V6, RST, Some((Trans, L::Trans))),
            (V4FinV6FinRcv, V6, ACK, Some((V4FinV6FinRcv, L::Keep))),
            (V4FinV6FinRcv, V4, FIN, Some((V4FinV6FinRcv, L::Keep))),
            (V4FinV6FinRcv, V4, RST, Some((V4FinV6FinRcv, L::Keep))),
            (Trans, V6, ACK, Some((Established, L::Est))),
            (Trans, V4, ACK, Some((Established, L::Est))),
            (Trans, V4, FIN, Some((Established, L::Est))),
            (Trans, V6, RST, Some((Trans, L::Keep))),
            (Trans, V4, RST, Some((Trans, L::Keep))),
        ];
        for &(st, side, flags, want) in table {
            assert_eq!(
                step(st, side, flags | ACK),
                want,
                "{st:?} {side:?} {flags:#x}"
            );
        }
    }

    /// After both FINs, a new connection's SYN (no ACK) on the same
    /// 5-tuple opens the session again (see `step`); a SYN+ACK, a FIN or
    /// data do not, and leave the lifetime alone.
    #[test]
    fn a_new_syn_after_both_fins_opens_again() {
        use TcpState::*;
        assert_eq!(
            step(V4FinV6FinRcv, Side::V6, SYN),
            Some((V6Init, Lifetime::Trans))
        );
        assert_eq!(
            step(V4FinV6FinRcv, Side::V4, SYN),
            Some((V4Init, Lifetime::Trans))
        );
        for side in [Side::V6, Side::V4] {
            for flags in [SYN | ACK, ACK, FIN | ACK, RST] {
                assert_eq!(
                    step(V4FinV6FinRcv, side, flags),
                    Some((V4FinV6FinRcv, Lifetime::Keep)),
                    "{side:?} {flags:#x}"
                );
            }
        }
        // The new connection then completes as from CLOSED.
        assert_eq!(
            step(V6Init, Side::V4, SYN | ACK),
            Some((Established, Lifetime::Est))
        );
    }

    /// RFC 6146 §3.5.2.2: every state name round-trips through u8.
    #[test]
    fn state_codes_round_trip() {
        for v in 0..8u8 {
            assert_eq!(TcpState::from_u8(v) as u8, v);
        }
    }
}
