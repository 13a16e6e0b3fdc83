//! A reader of the PROXY protocol header (versions 1 and 2) that a load balancer in front of the
//! gateway sends before the client's bytes, carrying the client's real address.
//!
//! Spec: <https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt>.
//!
//! Pure code over peeked bytes: it never reads from a socket, never allocates, never trusts a
//! length field without bounds-checking it and never panics. The caller peeks until [`parse`]
//! says [`Parse::Done`] or [`Parse::Invalid`], then discards exactly `consumed` bytes; whatever
//! follows them is the client's stream (typically a TLS ClientHello).
//!
//! What is accepted:
//! - v1: `PROXY TCP4 <src> <dst> <sport> <dport>\r\n`, the same with `TCP6`, and
//!   `PROXY UNKNOWN<anything>\r\n`; single spaces, at most [`MAX_V1_LEN`] bytes with the CRLF,
//!   addresses that match the family, ports `0..=65535` in plain decimal (no sign, no leading
//!   zero).
//! - v2: [`V2_SIGNATURE`], version 2, command LOCAL or PROXY; for PROXY, `AF_INET`/`AF_INET6`
//!   over `STREAM` give addresses, `AF_UNSPEC` and `AF_UNIX` (stream) give [`ProxyHeader::Local`],
//!   datagram and unknown families are refused. TLVs after the addresses are consumed unread.
//!
//! A buffer that is a prefix of a valid header is [`Parse::NeedMore`]. A buffer that can no longer
//! become one is [`Parse::Invalid`] as soon as that shows: v2 fields are checked as each byte
//! arrives; a v1 line is checked field by field (each finished field fully, the one being written
//! as a prefix, IPv6 addresses only by their characters and length until finished) and in full
//! once its CRLF is in.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The 12 bytes that open every v2 header.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// Longest v1 header, `PROXY ` and CRLF included.
pub const MAX_V1_LEN: usize = 107;
/// Size of the fixed part of a v2 header (signature, version/command, family, length).
pub const V2_HEADER_LEN: usize = 16;
/// Longest v2 header: the fixed part and the largest length field.
pub const MAX_V2_LEN: usize = V2_HEADER_LEN + u16::MAX as usize;

const V1_PREFIX: &[u8; 6] = b"PROXY ";

/// A complete PROXY header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyHeader {
    /// The client's addresses as the proxy saw them. `consumed` is the size of the header: the
    /// stream continues after that many bytes.
    Proxied {
        source: SocketAddr,
        destination: SocketAddr,
        consumed: usize,
    },
    /// v1 `PROXY UNKNOWN`, or v2 LOCAL command / `AF_UNSPEC` / `AF_UNIX`: no address is given, use
    /// the socket's own. `consumed` is the size of the header.
    Local { consumed: usize },
}

impl ProxyHeader {
    /// How many bytes the header takes at the start of the stream.
    pub fn consumed(&self) -> usize {
        match *self {
            ProxyHeader::Proxied { consumed, .. } | ProxyHeader::Local { consumed } => consumed,
        }
    }
}

/// What the peeked bytes say so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parse {
    /// A prefix of a valid header (or empty): peek more.
    NeedMore,
    /// A complete header.
    Done(ProxyHeader),
    /// Cannot become a valid header, whatever follows; the reason is short and fixed.
    Invalid(&'static str),
}

/// Parse the PROXY header at the start of `buf` (v1 or v2, detected from the first byte).
pub fn parse(buf: &[u8]) -> Parse {
    match buf.first() {
        None => Parse::NeedMore,
        Some(b'P') => parse_v1(buf),
        Some(b'\r') => parse_v2(buf),
        Some(_) => Parse::Invalid("not a PROXY protocol header"),
    }
}

// ---------------------------------------------------------------------------------------------
// Version 1 (text)
// ---------------------------------------------------------------------------------------------

/// Where the v1 line stands in the buffer.
enum Line {
    /// CRLF at this index: the header is `..index + 2`.
    Complete(usize),
    /// CR at this index is the last byte of the buffer; the LF is still to come.
    PendingLf(usize),
    /// No CR yet.
    Open,
}

fn parse_v1(buf: &[u8]) -> Parse {
    let n = buf.len().min(V1_PREFIX.len());
    if buf.get(..n) != V1_PREFIX.get(..n) {
        return Parse::Invalid("v1: bad signature");
    }
    let mut line = Line::Open;
    for (i, &b) in buf.iter().enumerate().take(MAX_V1_LEN) {
        match b {
            b'\r' => {
                // The LF must fit within MAX_V1_LEN too.
                if i + 2 > MAX_V1_LEN {
                    return Parse::Invalid("v1: line longer than 107 bytes");
                }
                line = match buf.get(i + 1) {
                    Some(b'\n') => Line::Complete(i),
                    Some(_) => return Parse::Invalid("v1: CR not followed by LF"),
                    None => Line::PendingLf(i),
                };
                break;
            }
            b'\n' => return Parse::Invalid("v1: LF without CR"),
            _ => {}
        }
    }
    match line {
        Line::Complete(end) => {
            let fields = buf.get(V1_PREFIX.len()..end).unwrap_or(&[]);
            match v1_line(fields, true) {
                Ok(Some(addrs)) => Parse::Done(match addrs {
                    Some((source, destination)) => ProxyHeader::Proxied {
                        source,
                        destination,
                        consumed: end + 2,
                    },
                    None => ProxyHeader::Local { consumed: end + 2 },
                }),
                Ok(None) => Parse::Invalid("v1: incomplete line"),
                Err(why) => Parse::Invalid(why),
            }
        }
        Line::PendingLf(end) => {
            // Everything before the CR is final: check it in full.
            let fields = buf.get(V1_PREFIX.len()..end).unwrap_or(&[]);
            match v1_line(fields, true) {
                Ok(Some(_)) => Parse::NeedMore,
                Ok(None) => Parse::Invalid("v1: incomplete line"),
                Err(why) => Parse::Invalid(why),
            }
        }
        Line::Open => {
            // The CR must land at index MAX_V1_LEN - 2 at the latest.
            if buf.len() > MAX_V1_LEN - 2 {
                return Parse::Invalid("v1: line longer than 107 bytes");
            }
            let fields = buf.get(V1_PREFIX.len()..).unwrap_or(&[]);
            match v1_line(fields, false) {
                Ok(_) => Parse::NeedMore,
                Err(why) => Parse::Invalid(why),
            }
        }
    }
}

type Addrs = Option<(SocketAddr, SocketAddr)>;

/// Check the text after `PROXY ` (CRLF excluded). With `complete`, the line is final and the
/// result is `Some(addresses)` (`None` for UNKNOWN); otherwise the last field may be partial and
/// `Ok(None)` means "a valid prefix so far".
fn v1_line(line: &[u8], complete: bool) -> Result<Option<Addrs>, &'static str> {
    let (proto, rest) = match line.iter().position(|&b| b == b' ') {
        Some(sp) => (&line[..sp], Some(&line[sp + 1..])),
        None => (line, None),
    };
    if !complete && rest.is_none() {
        // Still writing the protocol name.
        return if [&b"TCP4"[..], b"TCP6", b"UNKNOWN"]
            .iter()
            .any(|p| p.starts_with(proto))
        {
            Ok(None)
        } else {
            Err("v1: unknown protocol")
        };
    }
    let v6 = match proto {
        // The receiver must ignore whatever follows UNKNOWN up to the CRLF.
        b"UNKNOWN" => return Ok(complete.then_some(None)),
        b"TCP4" => false,
        b"TCP6" => true,
        _ => return Err("v1: unknown protocol"),
    };
    let Some(rest) = rest else {
        return Err("v1: missing addresses");
    };
    let mut fields: [&[u8]; 4] = [&[]; 4];
    let mut count = 0;
    for field in rest.split(|&b| b == b' ') {
        let Some(slot) = fields.get_mut(count) else {
            return Err("v1: too many fields");
        };
        *slot = field;
        count += 1;
    }
    if complete && count < 4 {
        return Err("v1: missing fields");
    }
    for (i, field) in fields.iter().take(count).enumerate() {
        let last_open = !complete && i + 1 == count;
        if last_open {
            let ok = match (i, v6) {
                (0 | 1, false) => ipv4_prefix(field),
                (0 | 1, true) => ipv6_prefix(field),
                _ => port_prefix(field),
            };
            if !ok {
                return Err(match i {
                    0 | 1 => "v1: bad address",
                    _ => "v1: bad port",
                });
            }
        } else if field.is_empty() {
            return Err("v1: empty field (double space?)");
        } else if i < 2 {
            let ok = if v6 {
                ipv6(field).is_some()
            } else {
                ipv4(field).is_some()
            };
            if !ok {
                return Err("v1: bad address");
            }
        } else if port(field).is_none() {
            return Err("v1: bad port");
        }
    }
    if !complete {
        return Ok(None);
    }
    let (sport, dport) = match (port(fields[2]), port(fields[3])) {
        (Some(s), Some(d)) => (s, d),
        _ => return Err("v1: bad port"),
    };
    let pair = if v6 {
        match (ipv6(fields[0]), ipv6(fields[1])) {
            (Some(s), Some(d)) => (
                SocketAddr::V6(SocketAddrV6::new(s, sport, 0, 0)),
                SocketAddr::V6(SocketAddrV6::new(d, dport, 0, 0)),
            ),
            _ => return Err("v1: bad address"),
        }
    } else {
        match (ipv4(fields[0]), ipv4(fields[1])) {
            (Some(s), Some(d)) => (
                SocketAddr::V4(SocketAddrV4::new(s, sport)),
                SocketAddr::V4(SocketAddrV4::new(d, dport)),
            ),
            _ => return Err("v1: bad address"),
        }
    };
    Ok(Some(Some(pair)))
}

/// Dotted-quad IPv4, four decimal octets `0..=255` without leading zeros.
fn ipv4(field: &[u8]) -> Option<Ipv4Addr> {
    if !field.iter().all(|&b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    // std's parser refuses leading zeros and out-of-range octets.
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// Can `field` still grow into a valid IPv4 address?
fn ipv4_prefix(field: &[u8]) -> bool {
    let mut parts = 0;
    for part in field.split(|&b| b == b'.') {
        parts += 1;
        if parts > 4 || !part.iter().all(u8::is_ascii_digit) {
            return false;
        }
        if part.len() > 3 || (part.len() > 1 && part[0] == b'0') {
            return false;
        }
        if decimal(part).is_some_and(|v| v > 255) {
            return false;
        }
    }
    // Only the last part may be empty (still being written).
    let mut it = field.split(|&b| b == b'.').peekable();
    while let Some(part) = it.next() {
        if part.is_empty() && it.peek().is_some() {
            return false;
        }
    }
    true
}

fn ipv6(field: &[u8]) -> Option<Ipv6Addr> {
    if !field.iter().all(|&b| is_ipv6_char(b)) {
        return None;
    }
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// Longest textual IPv6 address (with an embedded IPv4 tail).
const MAX_IPV6_TEXT: usize = 45;

/// Can `field` still grow into a valid IPv6 address? (A loose check: characters, length, no
/// `:::` and at most one `::`; the finished field is checked in full.)
fn ipv6_prefix(field: &[u8]) -> bool {
    field.len() <= MAX_IPV6_TEXT
        && field.iter().all(|&b| is_ipv6_char(b))
        && !field.windows(3).any(|w| w == b":::")
        && field.windows(2).filter(|w| *w == b"::").count() <= 1
}

fn is_ipv6_char(b: u8) -> bool {
    b.is_ascii_hexdigit() || b == b':' || b == b'.'
}

/// A port: 1 to 5 decimal digits, no sign, no leading zero, at most 65535.
fn port(field: &[u8]) -> Option<u16> {
    if field.is_empty() || (field.len() > 1 && field[0] == b'0') {
        return None;
    }
    u16::try_from(decimal(field)?).ok()
}

fn port_prefix(field: &[u8]) -> bool {
    field.is_empty() || port(field).is_some()
}

/// Value of 1 to 5 ASCII digits (no sign).
fn decimal(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0u32, |v, &d| v * 10 + u32::from(d - b'0')),
    )
}

// ---------------------------------------------------------------------------------------------
// Version 2 (binary)
// ---------------------------------------------------------------------------------------------

const CMD_LOCAL: u8 = 0x0;
const CMD_PROXY: u8 = 0x1;
const UNSPEC: u8 = 0x00;
const TCP_OVER_IPV4: u8 = 0x11;
const TCP_OVER_IPV6: u8 = 0x21;
const UNIX_STREAM: u8 = 0x31;
const UDP_OVER_IPV4: u8 = 0x12;
const UDP_OVER_IPV6: u8 = 0x22;
const UNIX_DGRAM: u8 = 0x32;
/// Address block sizes: two addresses and two ports (or two 108-byte socket paths).
const IPV4_ADDRS_LEN: usize = 12;
const IPV6_ADDRS_LEN: usize = 36;
const UNIX_ADDRS_LEN: usize = 216;

fn parse_v2(buf: &[u8]) -> Parse {
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf.get(..n) != V2_SIGNATURE.get(..n) {
        return Parse::Invalid("v2: bad signature");
    }
    let Some(&ver_cmd) = buf.get(12) else {
        return Parse::NeedMore;
    };
    if ver_cmd >> 4 != 2 {
        return Parse::Invalid("v2: unsupported version");
    }
    let local = match ver_cmd & 0x0f {
        CMD_LOCAL => true,
        CMD_PROXY => false,
        _ => return Parse::Invalid("v2: unknown command"),
    };
    let Some(&family) = buf.get(13) else {
        return Parse::NeedMore;
    };
    // LOCAL ignores the family byte (the spec says so); PROXY must name one we handle.
    let min_len = if local {
        0
    } else {
        match family {
            UNSPEC => 0,
            TCP_OVER_IPV4 => IPV4_ADDRS_LEN,
            TCP_OVER_IPV6 => IPV6_ADDRS_LEN,
            UNIX_STREAM => UNIX_ADDRS_LEN,
            UDP_OVER_IPV4 | UDP_OVER_IPV6 | UNIX_DGRAM => {
                return Parse::Invalid("v2: datagram protocol not supported")
            }
            _ => return Parse::Invalid("v2: unsupported family or protocol"),
        }
    };
    let (Some(&hi), Some(&lo)) = (buf.get(14), buf.get(15)) else {
        return Parse::NeedMore;
    };
    let len = usize::from(u16::from_be_bytes([hi, lo]));
    if len < min_len {
        return Parse::Invalid("v2: length too short for the addresses");
    }
    let consumed = V2_HEADER_LEN + len;
    let Some(body) = buf.get(V2_HEADER_LEN..consumed) else {
        return Parse::NeedMore;
    };
    if local {
        return Parse::Done(ProxyHeader::Local { consumed });
    }
    // Whatever follows the addresses within `len` is TLVs: consumed, not read.
    let addrs = match family {
        TCP_OVER_IPV4 => v2_ipv4(body),
        TCP_OVER_IPV6 => v2_ipv6(body),
        _ => return Parse::Done(ProxyHeader::Local { consumed }),
    };
    match addrs {
        Some((source, destination)) => Parse::Done(ProxyHeader::Proxied {
            source,
            destination,
            consumed,
        }),
        // Unreachable given the length check above, but never panic.
        None => Parse::Invalid("v2: length too short for the addresses"),
    }
}

fn bytes<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn v2_ipv4(body: &[u8]) -> Option<(SocketAddr, SocketAddr)> {
    let src = Ipv4Addr::from(bytes::<4>(body, 0)?);
    let dst = Ipv4Addr::from(bytes::<4>(body, 4)?);
    let sport = u16::from_be_bytes(bytes(body, 8)?);
    let dport = u16::from_be_bytes(bytes(body, 10)?);
    Some((
        SocketAddr::V4(SocketAddrV4::new(src, sport)),
        SocketAddr::V4(SocketAddrV4::new(dst, dport)),
    ))
}

fn v2_ipv6(body: &[u8]) -> Option<(SocketAddr, SocketAddr)> {
    let src = Ipv6Addr::from(bytes::<16>(body, 0)?);
    let dst = Ipv6Addr::from(bytes::<16>(body, 16)?);
    let sport = u16::from_be_bytes(bytes(body, 32)?);
    let dport = u16::from_be_bytes(bytes(body, 34)?);
    Some((
        SocketAddr::V6(SocketAddrV6::new(src, sport, 0, 0)),
        SocketAddr::V6(SocketAddrV6::new(dst, dport, 0, 0)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_prefixes() {
        for ok in [
            &b""[..],
            b"1",
            b"1.",
            b"1.2.3",
            b"255.255.255.25",
            b"0.0.0.0",
        ] {
            assert!(ipv4_prefix(ok), "{:?}", std::str::from_utf8(ok));
        }
        for bad in [
            &b"256"[..],
            b"1..",
            b".1",
            b"01",
            b"1.2.3.4.",
            b"1.2.3.4.5",
            b"a",
        ] {
            assert!(!ipv4_prefix(bad), "{:?}", std::str::from_utf8(bad));
        }
        assert!(port_prefix(b"6553") && port_prefix(b"65535") && port_prefix(b"0"));
        assert!(!port_prefix(b"65536") && !port_prefix(b"01") && !port_prefix(b"+1"));
        assert!(ipv6_prefix(b"2001:db8::") && ipv6_prefix(b"::ffff:1.2"));
        assert!(!ipv6_prefix(b"1:::") && !ipv6_prefix(b"1::2::") && !ipv6_prefix(b"g"));
        assert_eq!(port(b"65535"), Some(65535));
        assert_eq!(port(b"0"), Some(0));
        assert_eq!(port(b"123456"), None);
    }
}
