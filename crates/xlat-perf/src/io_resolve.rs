//! Resolves what the packet I/O needs before a trial, from the kernel of the
//! port's namespace (with `ip -j`, iproute2): the interface towards a
//! destination and its MAC address, the next hop and its MAC address from the
//! neighbour table (after one ping / neighbour solicitation if it is not
//! there yet), the interface that holds the receive address, and the
//! source address the kernel would pick.
//!
//! Everything here runs before the first test frame; a failure is a
//! parameter error naming the option to give instead.

use std::net::IpAddr;
use std::process::Command;

pub type Mac = [u8; 6];

/// Link facts of one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub ifname: String,
    pub mac: Mac,
    /// The device carries Ethernet headers (ether, loopback); false on an L3
    /// device such as a TUN (link type "none").
    pub l2: bool,
    pub loopback: bool,
    pub mtu: u32,
    pub up: bool,
}

fn ip_cmd(netns: Option<&str>, args: &[&str]) -> Result<String, String> {
    let mut c = Command::new("ip");
    if let Some(ns) = netns {
        c.args(["-n", ns]);
    }
    c.args(args);
    let out = c
        .output()
        .map_err(|e| format!("running `ip {}`: {e} (iproute2 needed)", args.join(" ")))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The string value of `"key":"value"` in compact `ip -j` output.
fn jstr(s: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":\"");
    let i = s.find(&pat)? + pat.len();
    let end = s[i..].find('"')?;
    Some(s[i..i + end].to_string())
}

fn jnum(s: &str, key: &str) -> Option<u64> {
    let pat = format!("\"{key}\":");
    let i = s.find(&pat)? + pat.len();
    let digits: String = s[i..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

pub fn parse_mac(s: &str) -> Option<Mac> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        m[i] = u8::from_str_radix(p, 16).ok()?;
    }
    Some(m)
}

pub fn fmt_mac(m: &Mac) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

pub(crate) fn ns_label(netns: Option<&str>) -> String {
    netns.map_or("the current namespace".into(), |n| {
        format!("namespace {n:?}")
    })
}

/// Link facts of `ifname` in `netns`.
pub fn link(netns: Option<&str>, ifname: &str, key: &str) -> Result<Link, String> {
    let out = ip_cmd(netns, &["-j", "link", "show", "dev", ifname]).map_err(|e| {
        format!(
            "--{key} {ifname:?}: no such interface in {} ({e})",
            ns_label(netns)
        )
    })?;
    let lt = jstr(&out, "link_type").unwrap_or_default();
    let (l2, loopback) = match lt.as_str() {
        "ether" => (true, false),
        "loopback" => (true, true),
        "none" => (false, false),
        other => {
            return Err(format!(
                "--{key} {ifname:?}: link type {other:?} is not supported by --io packet (use --io socket)"
            ))
        }
    };
    let mac = if l2 {
        jstr(&out, "address")
            .and_then(|a| parse_mac(&a))
            .ok_or_else(|| format!("--{key} {ifname:?}: no MAC address"))?
    } else {
        [0; 6]
    };
    let flags_up = admin_up(&out);
    Ok(Link {
        ifname: ifname.to_string(),
        mac,
        l2,
        loopback,
        mtu: jnum(&out, "mtu").unwrap_or(1500) as u32,
        up: flags_up,
    })
}

/// IFF_UP of an interface from its compact `ip -j link show` output: "UP"
/// among its `flags` (a down interface has no "UP" there; its `operstate`
/// is "DOWN" too, but so is that of an interface whose peer is down, which
/// still takes frames from the tester).
pub(crate) fn admin_up(json: &str) -> bool {
    let Some(i) = json.find("\"flags\":[") else {
        return false;
    };
    let rest = &json[i + 9..];
    let flags = &rest[..rest.find(']').unwrap_or(rest.len())];
    flags.split(',').any(|f| f.trim() == "\"UP\"")
}

/// The interface in `netns` holding `a`, if it is down (not IFF_UP), for
/// receiving ports that are not resolved with [`link`] (`--io socket`, the
/// RFC 9693 Initiator and Responder): nothing would arrive on it. None
/// when it is up, when no interface holds `a`, or when `ip` cannot tell.
pub fn down_iface_holding(netns: Option<&str>, a: IpAddr) -> Option<String> {
    let ifname = iface_of_addr(netns, a).ok().flatten()?;
    let out = ip_cmd(netns, &["-j", "link", "show", "dev", &ifname]).ok()?;
    (!admin_up(&out)).then_some(ifname)
}

/// The kernel's route to `dst` in `netns`: (device, gateway, preferred source).
pub fn route(
    netns: Option<&str>,
    dst: IpAddr,
) -> Result<(String, Option<IpAddr>, Option<IpAddr>), String> {
    let d = dst.to_string();
    let out = ip_cmd(netns, &["-j", "route", "get", &d])
        .map_err(|e| format!("no route to {dst} in {} ({e})", ns_label(netns)))?;
    let dev = jstr(&out, "dev").ok_or_else(|| format!("no route to {dst}: {out}"))?;
    let gw = jstr(&out, "gateway").and_then(|g| g.parse().ok());
    let src = jstr(&out, "prefsrc").and_then(|g| g.parse().ok());
    Ok((dev, gw, src))
}

/// The MTU of the kernel's route to `dst` in `netns` leaving through `dev`
/// (any link type: socket I/O also sends over tunnels): the route's own
/// `mtu` metric when it has one, else the device's MTU; None when `ip`
/// cannot tell.
pub fn route_mtu(netns: Option<&str>, dst: IpAddr, dev: &str) -> Option<u32> {
    let link_mtu = ip_cmd(netns, &["-j", "link", "show", "dev", dev])
        .ok()
        .and_then(|out| jnum(&out, "mtu"))? as u32;
    let d = dst.to_string();
    let metric = ip_cmd(netns, &["-j", "route", "get", &d])
        .ok()
        .and_then(|out| jnum(&out, "mtu"));
    Some(metric.map_or(link_mtu, |m| (m as u32).min(link_mtu)))
}

/// The interface holding address `a` in `netns`, if any.
pub fn iface_of_addr(netns: Option<&str>, a: IpAddr) -> Result<Option<String>, String> {
    let pfx = format!("{a}/{}", if a.is_ipv6() { 128 } else { 32 });
    let out = ip_cmd(netns, &["-o", "addr", "show", "to", &pfx])?;
    Ok(out
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .map(|s| s.trim_end_matches(':').to_string()))
}

fn neigh_mac(netns: Option<&str>, hop: IpAddr, dev: &str) -> Result<Option<Mac>, String> {
    let h = hop.to_string();
    let out = ip_cmd(netns, &["-j", "neigh", "show", "to", &h, "dev", dev])?;
    if out.contains("FAILED") || out.contains("INCOMPLETE") {
        return Ok(None);
    }
    Ok(jstr(&out, "lladdr").and_then(|m| parse_mac(&m)))
}

/// The MAC address of next hop `hop` on `dev` from the neighbour table; if
/// it is not known yet, one ping (ARP / neighbour discovery) first.
pub fn next_hop_mac(netns: Option<&str>, hop: IpAddr, dev: &str, key: &str) -> Result<Mac, String> {
    if let Some(m) = neigh_mac(netns, hop, dev)? {
        return Ok(m);
    }
    let mut c = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "ping"]);
            c
        }
        None => Command::new("ping"),
    };
    let h = hop.to_string();
    c.args(["-c", "1", "-W", "1", "-I", dev, &h]);
    let _ = c.output();
    neigh_mac(netns, hop, dev)?.ok_or_else(|| {
        format!(
            "the MAC address of next hop {hop} on {dev} in {} is unknown (no neighbour entry, no answer to ARP/ND): give --{key} MAC",
            ns_label(netns)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_and_json_helpers() {
        assert_eq!(parse_mac("02:0a:ff:00:01:9"), Some([2, 10, 255, 0, 1, 9]));
        assert_eq!(parse_mac("02:0a:ff:00:01"), None);
        assert_eq!(parse_mac("02:0a:ff:00:01:zz"), None);
        assert_eq!(fmt_mac(&[2, 10, 255, 0, 1, 9]), "02:0a:ff:00:01:09");
        let j = r#"[{"dst":"198.51.100.2","gateway":"192.0.2.254","dev":"p0","prefsrc":"192.0.2.1","mtu":1500}]"#;
        assert_eq!(jstr(j, "dev").as_deref(), Some("p0"));
        assert_eq!(jstr(j, "gateway").as_deref(), Some("192.0.2.254"));
        assert_eq!(jnum(j, "mtu"), Some(1500));
        assert_eq!(jstr(j, "lladdr"), None);
    }

    #[test]
    fn loopback_resolves_in_the_current_namespace() {
        let l = link(None, "lo", "send-if").unwrap();
        assert!(l.loopback && l.l2 && l.mac == [0; 6]);
        let e = link(None, "xlp-no-such-if0", "send-if").unwrap_err();
        assert!(
            e.contains("--send-if") && e.contains("no such interface"),
            "{e}"
        );
        let (dev, gw, _) = route(None, "127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!((dev.as_str(), gw), ("lo", None));
    }

    /// IFF_UP from `ip -j link show`: a link set down has no "UP" flag; one
    /// whose peer is down (NO-CARRIER, operstate DOWN) is still up.
    #[test]
    fn admin_up_reads_the_flags() {
        let down = r#"[{"ifindex":2,"ifname":"p0","flags":["BROADCAST","MULTICAST"],"mtu":1500,"operstate":"DOWN","link_type":"ether"}]"#;
        let no_carrier = r#"[{"ifindex":3,"ifname":"p1","flags":["NO-CARRIER","BROADCAST","MULTICAST","UP"],"mtu":1500,"operstate":"DOWN"}]"#;
        let up = r#"[{"ifindex":2,"ifname":"p0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"operstate":"UP"}]"#;
        // An interface named UP that is down.
        let named =
            r#"[{"ifindex":4,"ifname":"UP","flags":["BROADCAST","MULTICAST"],"operstate":"DOWN"}]"#;
        assert!(!admin_up(down));
        assert!(admin_up(no_carrier));
        assert!(admin_up(up));
        assert!(!admin_up(named));
        assert!(!admin_up(""));
    }
}
