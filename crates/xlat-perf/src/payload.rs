//! Test payload and frame-size arithmetic.
//!
//! Every UDP payload starts with a 16-byte header:
//!
//! ```text
//! 0..4   signature  b"XLPF"
//! 4..8   stream id  u32, big endian (lets a sink ignore stray traffic)
//! 8..16  sequence   u64, big endian (0, 1, 2, ... within one trial)
//! 16..   padding    zero bytes up to the requested size
//! ```
//!
//! Frame sizes follow RFC 8219 section 5 / RFC 2544 section 9: a "frame" is the
//! Ethernet frame including the 14-byte header and the 4-byte FCS, so the UDP
//! payload is `frame - 14 - 4 - L3 header - 8`. With the 20-byte difference
//! between IPv4 and IPv6 headers, an 84-byte IPv6 frame becomes a 64-byte IPv4
//! frame after translation, and both carry `84 - 14 - 4 - 40 - 8 = 18` bytes of
//! UDP payload (`64 - 14 - 4 - 20 - 8 = 18` on the IPv4 side).

pub const SIGNATURE: [u8; 4] = *b"XLPF";
pub const HEADER_LEN: usize = 16;
pub const ETHERNET_OVERHEAD: usize = 14 + 4; // header + FCS
pub const UDP_HEADER: usize = 8;

/// L3 header length of a plain (option-free) packet of this family.
pub fn l3_header(ipv6: bool) -> usize {
    if ipv6 {
        40
    } else {
        20
    }
}

/// UDP payload length for an Ethernet frame of `frame` bytes (incl. FCS).
pub fn payload_for_frame(frame: usize, ipv6: bool) -> Result<usize, String> {
    let overhead = ETHERNET_OVERHEAD + l3_header(ipv6) + UDP_HEADER;
    let min = overhead + HEADER_LEN;
    if frame < min {
        return Err(format!(
            "frame size {frame} is below the minimum {min} for {} (headers {overhead} + {HEADER_LEN} bytes of test header)",
            if ipv6 { "IPv6" } else { "IPv4" }
        ));
    }
    Ok(frame - overhead)
}

/// Largest test frame of the measurement subcommands (jumbo frames).
pub const MAX_TEST_FRAME: usize = 9018;

/// Smallest RFC 8219 test frame of the family: the one that carries the
/// 18-byte timed payload (64 bytes IPv4, 84 bytes IPv6; section 5.1.1).
pub fn min_test_frame(ipv6: bool) -> usize {
    ETHERNET_OVERHEAD + l3_header(ipv6) + UDP_HEADER + TIMED_LEN
}

/// `--frame-size` of the measurement subcommands and of `frame-payload`:
/// the UDP payload of a test frame of `frame` bytes, or the usage error.
pub fn test_frame_payload(frame: usize, ipv6: bool) -> Result<usize, String> {
    let min = min_test_frame(ipv6);
    if frame < min {
        return Err(format!(
            "--frame-size {frame}: below the minimum {min} for {} test frames (RFC 8219 section 5.1.1)",
            if ipv6 { "IPv6" } else { "IPv4" }
        ));
    }
    if frame > MAX_TEST_FRAME {
        return Err(format!(
            "--frame-size {frame}: over {MAX_TEST_FRAME} (jumbo) bytes"
        ));
    }
    payload_for_frame(frame, ipv6)
}

/// `xlat-perf frame-payload`: the UDP payload of a test frame, as JSON.
pub fn frame_payload(a: &crate::args::Args) -> Result<String, String> {
    a.check_known(&["frame-size", "ipv4", "ipv6"])?;
    let frame: usize = a.req("frame-size")?;
    let ipv6 = match (a.flag("ipv6"), a.flag("ipv4")) {
        (true, false) => true,
        (false, true) => false,
        _ => return Err("give exactly one of --ipv4, --ipv6".into()),
    };
    // The limits of the measurement subcommands' --frame-size.
    let p = test_frame_payload(frame, ipv6)?;
    Ok(format!(
        "{{\"frame_size\": {frame}, \"family\": \"{}\", \"udp_payload\": {p}}}",
        if ipv6 { "ipv6" } else { "ipv4" }
    ))
}

/// Writes the header for `seq` into `buf` (which is at least HEADER_LEN long).
#[inline]
pub fn write(buf: &mut [u8], stream: u32, seq: u64) {
    buf[0..4].copy_from_slice(&SIGNATURE);
    buf[4..8].copy_from_slice(&stream.to_be_bytes());
    buf[8..16].copy_from_slice(&seq.to_be_bytes());
}

/// Sequence number of a valid test payload of `stream`, or None.
#[inline]
pub fn parse(buf: &[u8], stream: u32) -> Option<u64> {
    if buf.len() < HEADER_LEN || buf[0..4] != SIGNATURE {
        return None;
    }
    if u32::from_be_bytes(buf[4..8].try_into().ok()?) != stream {
        return None;
    }
    Some(u64::from_be_bytes(buf[8..16].try_into().ok()?))
}

/// Timed test payload of the RFC 8219 measurement subcommands (`throughput`,
/// `frame-loss`, `latency`, `pdv`, `ipdv`). It fits the 18 bytes of UDP payload
/// of the smallest frames (64-byte IPv4, 84-byte IPv6; RFC 8219 section 5.1.1),
/// and never relies on IPv4-ID or the flow label, which a translator rewrites:
///
/// ```text
/// 0..4   signature  b"XLPT"
/// 4..6   stream id  u16, big endian (one per trial: stale frames never count)
/// 6..10  sequence   u32, big endian
/// 10..18 send time  u64, big endian, CLOCK_MONOTONIC nanoseconds
/// ```
pub const TIMED_SIGNATURE: [u8; 4] = *b"XLPT";
pub const TIMED_LEN: usize = 18;

/// Writes a timed header into `buf` (at least TIMED_LEN long).
#[inline]
pub fn write_timed(buf: &mut [u8], stream: u16, seq: u32, tx_ns: u64) {
    buf[0..4].copy_from_slice(&TIMED_SIGNATURE);
    buf[4..6].copy_from_slice(&stream.to_be_bytes());
    buf[6..10].copy_from_slice(&seq.to_be_bytes());
    buf[10..18].copy_from_slice(&tx_ns.to_be_bytes());
}

/// (sequence, send time) of a valid timed payload of `stream`, or None.
#[inline]
pub fn parse_timed(buf: &[u8], stream: u16) -> Option<(u32, u64)> {
    if buf.len() < TIMED_LEN || buf[0..4] != TIMED_SIGNATURE {
        return None;
    }
    if u16::from_be_bytes([buf[4], buf[5]]) != stream {
        return None;
    }
    let seq = u32::from_be_bytes(buf[6..10].try_into().ok()?);
    let ts = u64::from_be_bytes(buf[10..18].try_into().ok()?);
    Some((seq, ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 8219 section 5: 84-byte IPv6 frames translate to 64-byte IPv4 frames.
    #[test]
    fn rfc8219_s5_frame_sizes_give_equal_payloads() {
        assert_eq!(payload_for_frame(84, true).unwrap(), 18);
        assert_eq!(payload_for_frame(64, false).unwrap(), 18);
        assert_eq!(payload_for_frame(1518, false).unwrap(), 1472);
        assert_eq!(payload_for_frame(1538, true).unwrap(), 1472);
        assert!(payload_for_frame(81, true).is_err());
        assert_eq!(payload_for_frame(82, true).unwrap(), HEADER_LEN);
    }

    #[test]
    fn payload_roundtrip_and_rejects_foreign_data() {
        let mut b = [0u8; 18];
        write(&mut b, 7, 0x0102_0304_0506_0708);
        assert_eq!(parse(&b, 7), Some(0x0102_0304_0506_0708));
        assert_eq!(parse(&b, 8), None, "other stream id");
        assert_eq!(parse(&b[..15], 7), None, "too short");
        b[0] = b'Y';
        assert_eq!(parse(&b, 7), None, "bad signature");
    }

    // RFC 8219 section 5.1.1: the timed header fits the 18-byte payload of the
    // minimum frames of both families.
    #[test]
    fn rfc8219_s5_1_1_timed_header_fits_minimum_frames() {
        assert_eq!(payload_for_frame(64, false).unwrap(), TIMED_LEN);
        assert_eq!(payload_for_frame(84, true).unwrap(), TIMED_LEN);
        let mut b = [0u8; TIMED_LEN];
        write_timed(&mut b, 0xbeef, 0xdead_cafe, 0x0102_0304_0506_0708);
        assert_eq!(
            parse_timed(&b, 0xbeef),
            Some((0xdead_cafe, 0x0102_0304_0506_0708))
        );
        assert_eq!(parse_timed(&b, 0xbeee), None, "other stream");
        assert_eq!(parse_timed(&b[..17], 0xbeef), None, "too short");
        b[1] = 0;
        assert_eq!(parse_timed(&b, 0xbeef), None, "bad signature");
    }

    /// frame-payload took any size: 100000 (UDP payload 99954, over the
    /// UDP maximum) and 63/83 (payload 17, below the timed payload).
    #[test]
    fn frame_payload_has_the_measurement_limits() {
        let fp = |v: &[&str]| {
            let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            frame_payload(&crate::args::Args::parse(&v).unwrap())
        };
        assert_eq!(
            fp(&["--frame-size", "84", "--ipv6"]).unwrap(),
            "{\"frame_size\": 84, \"family\": \"ipv6\", \"udp_payload\": 18}"
        );
        assert_eq!(
            fp(&["--frame-size", "9018", "--ipv4"]).unwrap(),
            "{\"frame_size\": 9018, \"family\": \"ipv4\", \"udp_payload\": 8972}"
        );
        assert_eq!(
            fp(&["--frame-size", "100000", "--ipv4"]).unwrap_err(),
            "--frame-size 100000: over 9018 (jumbo) bytes"
        );
        assert_eq!(
            fp(&["--frame-size", "83", "--ipv6"]).unwrap_err(),
            "--frame-size 83: below the minimum 84 for IPv6 test frames (RFC 8219 section 5.1.1)"
        );
        assert_eq!(
            fp(&["--frame-size", "63", "--ipv4"]).unwrap_err(),
            "--frame-size 63: below the minimum 64 for IPv4 test frames (RFC 8219 section 5.1.1)"
        );
    }
}
