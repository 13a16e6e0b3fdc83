//! PROXY protocol v1/v2 parser: valid headers, every prefix, invalid inputs, and a deterministic
//! pseudo-random property test (no panic; `Done` never claims more bytes than it was given).

use quickshake_wire::proxy_protocol::{
    parse, Parse, ProxyHeader, MAX_V1_LEN, MAX_V2_LEN, V2_HEADER_LEN, V2_SIGNATURE,
};
use std::net::SocketAddr;

const PAYLOAD: &[u8] = b"\x16\x03\x01\x00\x05hello";

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn proxied(src: &str, dst: &str, consumed: usize) -> Parse {
    Parse::Done(ProxyHeader::Proxied {
        source: sa(src),
        destination: sa(dst),
        consumed,
    })
}

fn v2(ver_cmd: u8, family: u8, body: &[u8]) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.push(ver_cmd);
    h.push(family);
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(body);
    h
}

fn v2_ipv4_body(tlvs: &[u8]) -> Vec<u8> {
    let mut b = vec![192, 0, 2, 1, 198, 51, 100, 7];
    b.extend_from_slice(&40000u16.to_be_bytes());
    b.extend_from_slice(&443u16.to_be_bytes());
    b.extend_from_slice(tlvs);
    b
}

fn v2_ipv6_body(tlvs: &[u8]) -> Vec<u8> {
    let src: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
    let dst: std::net::Ipv6Addr = "2001:db8::ffff:2".parse().unwrap();
    let mut b = src.octets().to_vec();
    b.extend_from_slice(&dst.octets());
    b.extend_from_slice(&1234u16.to_be_bytes());
    b.extend_from_slice(&8443u16.to_be_bytes());
    b.extend_from_slice(tlvs);
    b
}

/// A few TLVs: ALPN "h2", authority "example.com", a NOOP with 3 bytes of padding.
fn tlvs() -> Vec<u8> {
    let mut t = vec![0x01, 0x00, 0x02];
    t.extend_from_slice(b"h2");
    t.extend_from_slice(&[0x02, 0x00, 0x0b]);
    t.extend_from_slice(b"example.com");
    t.extend_from_slice(&[0x04, 0x00, 0x03, 0, 0, 0]);
    t
}

/// Every valid header used by the tests, with what it parses to.
fn valid_headers() -> Vec<(Vec<u8>, Parse)> {
    let v1_4 = b"PROXY TCP4 1.2.3.4 5.6.7.8 1234 443\r\n".to_vec();
    let v1_6 = b"PROXY TCP6 2001:db8::1 ::ffff:10.0.0.1 65535 0\r\n".to_vec();
    let v1_unknown = b"PROXY UNKNOWN\r\n".to_vec();
    let v1_unknown_junk = b"PROXY UNKNOWN ffff:f::ffff ffff:f::ffff 65535 65535\r\n".to_vec();
    let v1_max = {
        let a = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
        format!("PROXY UNKNOWN {a} {a} 65535 65535\r\n").into_bytes()
    };
    let v1_tcp6_max = {
        let a = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
        format!("PROXY TCP6 {a} {a} 65535 65535\r\n").into_bytes()
    };
    assert_eq!(v1_max.len(), MAX_V1_LEN);
    let v2_4 = v2(0x21, 0x11, &v2_ipv4_body(&[]));
    let v2_4_tlv = v2(0x21, 0x11, &v2_ipv4_body(&tlvs()));
    let v2_6 = v2(0x21, 0x21, &v2_ipv6_body(&[]));
    let v2_6_tlv = v2(0x21, 0x21, &v2_ipv6_body(&tlvs()));
    let v2_local = v2(0x20, 0x00, &[]);
    let v2_local_body = v2(0x20, 0x11, &v2_ipv4_body(&tlvs()));
    let v2_unspec = v2(0x21, 0x00, &tlvs());
    let v2_unix = v2(0x21, 0x31, &[0u8; 216]);
    vec![
        (
            v1_4.clone(),
            proxied("1.2.3.4:1234", "5.6.7.8:443", v1_4.len()),
        ),
        (
            v1_6.clone(),
            proxied("[2001:db8::1]:65535", "[::ffff:10.0.0.1]:0", v1_6.len()),
        ),
        (
            v1_unknown.clone(),
            Parse::Done(ProxyHeader::Local { consumed: 15 }),
        ),
        (
            v1_unknown_junk.clone(),
            Parse::Done(ProxyHeader::Local {
                consumed: v1_unknown_junk.len(),
            }),
        ),
        (
            v1_max.clone(),
            Parse::Done(ProxyHeader::Local {
                consumed: MAX_V1_LEN,
            }),
        ),
        (
            v1_tcp6_max.clone(),
            proxied(
                "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
                "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
                v1_tcp6_max.len(),
            ),
        ),
        (
            v2_4.clone(),
            proxied("192.0.2.1:40000", "198.51.100.7:443", 28),
        ),
        (
            v2_4_tlv.clone(),
            proxied("192.0.2.1:40000", "198.51.100.7:443", v2_4_tlv.len()),
        ),
        (
            v2_6.clone(),
            proxied("[2001:db8::1]:1234", "[2001:db8::ffff:2]:8443", 52),
        ),
        (
            v2_6_tlv.clone(),
            proxied(
                "[2001:db8::1]:1234",
                "[2001:db8::ffff:2]:8443",
                v2_6_tlv.len(),
            ),
        ),
        (v2_local, Parse::Done(ProxyHeader::Local { consumed: 16 })),
        (
            v2_local_body.clone(),
            Parse::Done(ProxyHeader::Local {
                consumed: v2_local_body.len(),
            }),
        ),
        (
            v2_unspec.clone(),
            Parse::Done(ProxyHeader::Local {
                consumed: v2_unspec.len(),
            }),
        ),
        (
            v2_unix,
            Parse::Done(ProxyHeader::Local { consumed: 16 + 216 }),
        ),
    ]
}

#[test]
fn valid_headers_parse_and_consumed_is_exact() {
    for (header, want) in valid_headers() {
        assert_eq!(
            parse(&header),
            want,
            "{:?}",
            String::from_utf8_lossy(&header)
        );
        let Parse::Done(h) = want else { unreachable!() };
        assert_eq!(h.consumed(), header.len());
        // Bytes after the header do not change the result, and are left for the caller.
        let mut stream = header.clone();
        stream.extend_from_slice(PAYLOAD);
        assert_eq!(parse(&stream), want);
        assert_eq!(&stream[h.consumed()..], PAYLOAD);
        // Even a second header right behind it is payload.
        let mut twice = header.clone();
        twice.extend_from_slice(&header);
        assert_eq!(parse(&twice), want);
    }
}

#[test]
fn every_strict_prefix_needs_more() {
    assert_eq!(parse(b""), Parse::NeedMore);
    for (header, _) in valid_headers() {
        for cut in 0..header.len() {
            assert_eq!(
                parse(&header[..cut]),
                Parse::NeedMore,
                "cut {cut} of {:?}",
                String::from_utf8_lossy(&header)
            );
        }
    }
}

#[test]
fn v1_examples() {
    assert_eq!(
        parse(b"PROXY TCP4 255.255.255.255 0.0.0.0 65535 0\r\nGET"),
        proxied("255.255.255.255:65535", "0.0.0.0:0", 44)
    );
    assert_eq!(
        parse(b"PROXY TCP6 ::1 :: 1 2\r\n"),
        proxied("[::1]:1", "[::]:2", 23)
    );
    assert_eq!(
        parse(b"PROXY UNKNOWN 1.2.3.4 whatever\r\n"),
        Parse::Done(ProxyHeader::Local { consumed: 32 })
    );
}

fn assert_invalid(buf: &[u8]) {
    match parse(buf) {
        Parse::Invalid(why) => assert!(!why.is_empty()),
        other => panic!(
            "{:?}: expected Invalid, got {other:?}",
            String::from_utf8_lossy(buf)
        ),
    }
}

#[test]
fn v1_invalid() {
    for bad in [
        &b"GET / HTTP/1.1\r\n"[..],
        b"\x16\x03\x01",
        b"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY\r\n",
        b"PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY TCP4\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
        b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
        b"PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n",
        b"PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n",
        b"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
        b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
        b"PROXY TCP6 ::1 ::g 1 2\r\n",
        b"PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 x\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n",
        b"PROXY UNKNOWNX\r\n",
        b"PROXY UNKNOWN \n",
        b"PROXY \r\n",
        // Prefixes that can no longer become valid are refused early.
        b"PROXY X",
        b"PROXY TCP4 1.2.3.4.",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 99999",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 ",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r",
        b"PROXY TCP6 1::2::",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\xff",
    ] {
        assert_invalid(bad);
    }
    // No CRLF within 107 bytes.
    let mut long = b"PROXY UNKNOWN ".to_vec();
    long.resize(MAX_V1_LEN, b'a');
    assert_invalid(&long);
    long.truncate(MAX_V1_LEN - 1);
    assert_invalid(&long); // the CR could only come at byte 107: too late
    long.truncate(MAX_V1_LEN - 2);
    assert_eq!(parse(&long), Parse::NeedMore);
    long.extend_from_slice(b"\r\n");
    assert_eq!(
        parse(&long),
        Parse::Done(ProxyHeader::Local {
            consumed: MAX_V1_LEN
        })
    );
    let mut too_long = b"PROXY UNKNOWN ".to_vec();
    too_long.resize(MAX_V1_LEN - 1, b'a');
    too_long.extend_from_slice(b"\r\n");
    assert_invalid(&too_long);
    // A long TCP6 line (embedded IPv4 tails) that would pass 107 bytes.
    let a = "0000:0000:0000:0000:0000:ffff:255.255.255.255";
    assert_invalid(format!("PROXY TCP6 {a} {a} 65535 65535\r\n").as_bytes());
}

#[test]
fn v2_invalid() {
    let good = v2(0x21, 0x11, &v2_ipv4_body(&[]));
    // Wrong signature bytes, at each position.
    for i in 0..12 {
        let mut bad = good.clone();
        bad[i] ^= 0x40;
        assert_invalid(&bad);
        assert_invalid(&bad[..=i]);
    }
    // Version 1 in the binary header, or version 3; unknown command.
    for ver_cmd in [0x11, 0x31, 0x01, 0x22, 0x2f] {
        let mut bad = good.clone();
        bad[12] = ver_cmd;
        assert_invalid(&bad);
        assert_invalid(&bad[..13]);
    }
    // Datagram and unknown families for PROXY.
    for family in [0x12, 0x22, 0x32, 0x01, 0x10, 0x41, 0x13, 0xff] {
        let mut bad = good.clone();
        bad[13] = family;
        assert_invalid(&bad);
        assert_invalid(&bad[..14]);
    }
    // Length too short for the family's addresses.
    assert_invalid(&v2(0x21, 0x11, &[0u8; 11]));
    assert_invalid(&v2(0x21, 0x21, &v2_ipv4_body(&[])));
    assert_invalid(&v2(0x21, 0x21, &[0u8; 35]));
    assert_invalid(&v2(0x21, 0x31, &[0u8; 215]));
    assert_invalid(&v2(0x21, 0x21, &[0u8; 35])[..16]);
}

#[test]
fn v2_length_bounds() {
    // The largest header: 16 + 65535 bytes of IPv4 addresses and TLV padding.
    let mut body = v2_ipv4_body(&[]);
    body.resize(u16::MAX as usize, 0);
    let big = v2(0x21, 0x11, &body);
    assert_eq!(big.len(), MAX_V2_LEN);
    assert_eq!(
        parse(&big),
        proxied("192.0.2.1:40000", "198.51.100.7:443", MAX_V2_LEN)
    );
    assert_eq!(parse(&big[..MAX_V2_LEN - 1]), Parse::NeedMore);
    assert_eq!(parse(&big[..V2_HEADER_LEN]), Parse::NeedMore);
    // LOCAL ignores the family and any body.
    assert_eq!(
        parse(&v2(0x20, 0xff, b"xyz")),
        Parse::Done(ProxyHeader::Local { consumed: 19 })
    );
}

/// xorshift64*: deterministic, no external crates.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

fn check(buf: &[u8]) {
    match parse(buf) {
        Parse::Done(h) => {
            let c = h.consumed();
            assert!(c > 0 && c <= buf.len(), "consumed {c} of {}", buf.len());
            // The header alone parses the same.
            assert_eq!(parse(&buf[..c]), Parse::Done(h));
        }
        Parse::NeedMore => assert!(buf.len() < MAX_V2_LEN),
        Parse::Invalid(why) => assert!(!why.is_empty()),
    }
}

/// Feeding `buf` one byte at a time: NeedMore until a verdict, then the verdict never changes
/// (a header is found at the length it claims; an invalid prefix stays invalid).
fn check_prefixes_consistent(buf: &[u8]) {
    let mut verdict: Option<(usize, Parse)> = None;
    for cut in 0..=buf.len() {
        let got = parse(&buf[..cut]);
        check(&buf[..cut]);
        match (verdict, got) {
            (None, Parse::NeedMore) => {}
            (None, Parse::Done(h)) => {
                assert_eq!(h.consumed(), cut, "{:?}", String::from_utf8_lossy(buf));
                verdict = Some((cut, got));
            }
            (None, Parse::Invalid(_)) => verdict = Some((cut, got)),
            (Some((at, Parse::Done(h))), _) => assert_eq!(got, Parse::Done(h), "since {at}"),
            (Some((at, _)), got) => assert!(
                matches!(got, Parse::Invalid(_)),
                "invalid at {at} but {got:?} at {cut}: {:?}",
                String::from_utf8_lossy(buf)
            ),
        }
    }
}

#[test]
fn pseudo_random_inputs_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let alphabet = b"PROXY TCP46UNKOW0123456789abcdef.:\r\n \x00QUIT+-";
    for i in 0..10_000 {
        let len = rng.below(140);
        let mut buf: Vec<u8> = (0..len)
            .map(|_| {
                if i % 2 == 0 {
                    rng.byte()
                } else {
                    alphabet[rng.below(alphabet.len())]
                }
            })
            .collect();
        // Give some of them a plausible start so the deeper code is reached.
        match i % 5 {
            1 => buf.splice(0..0, b"PROXY ".iter().copied()).for_each(drop),
            2 => buf
                .splice(0..0, V2_SIGNATURE.iter().copied())
                .for_each(drop),
            _ => {}
        }
        check(&buf);
        if i % 10 == 1 || i % 10 == 2 {
            check_prefixes_consistent(&buf);
        }
    }
}

#[test]
fn mutated_valid_headers_never_panic() {
    let headers: Vec<Vec<u8>> = valid_headers().into_iter().map(|(h, _)| h).collect();
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    for _ in 0..10_000 {
        let mut buf = headers[rng.below(headers.len())].clone();
        buf.extend_from_slice(PAYLOAD);
        for _ in 0..=rng.below(4) {
            let at = rng.below(buf.len() + 1);
            match rng.below(5) {
                0 if at < buf.len() => buf[at] = rng.byte(),
                1 if at < buf.len() => buf[at] ^= 1 << rng.below(8),
                2 => buf.insert(at, rng.byte()),
                3 if at < buf.len() => {
                    buf.remove(at);
                }
                _ => buf.truncate(at),
            }
        }
        check(&buf);
        check_prefixes_consistent(&buf);
    }
}
