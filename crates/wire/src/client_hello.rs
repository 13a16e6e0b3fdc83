//! A minimal, allocation-light reader of the server name (SNI) in a TLS ClientHello, used to
//! pick a filter chain before the handshake starts (Envoy's `tls_inspector` does the same).
//!
//! Pure code over peeked bytes: it never reads from a socket and never trusts a length field
//! without bounds-checking it.

/// What the peeked bytes say so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peek {
    /// More bytes are needed to reach the end of the ClientHello's first record.
    NeedMore,
    /// A ClientHello; `sni` is its `server_name`, lower-cased, if any.
    ClientHello { sni: Option<String> },
    /// Not a TLS handshake record; the handshake will fail on its own.
    NotTls,
}

const HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const EXT_SERVER_NAME: u16 = 0;
/// Largest record we are willing to wait for (TLS caps plaintext records at 2^14).
pub const MAX_RECORD: usize = 5 + (1 << 14);

/// Inspect the first bytes of a connection.
pub fn peek_sni(buf: &[u8]) -> Peek {
    if buf.is_empty() {
        return Peek::NeedMore;
    }
    if buf[0] != HANDSHAKE {
        return Peek::NotTls;
    }
    if buf.len() < 5 {
        return Peek::NeedMore;
    }
    if buf[1] != 3 {
        return Peek::NotTls;
    }
    let record_len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    if record_len == 0 || 5 + record_len > MAX_RECORD {
        return Peek::NotTls;
    }
    if buf.len() < 5 + record_len {
        return Peek::NeedMore;
    }
    match parse_client_hello(&buf[5..5 + record_len]) {
        Some(sni) => Peek::ClientHello { sni },
        None => Peek::NotTls,
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u8()?);
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        self.take(n)
    }
}

/// Parse a ClientHello handshake message (possibly truncated at the record end: a ClientHello
/// split over records is accepted only if its extensions fit in the first record).
fn parse_client_hello(body: &[u8]) -> Option<Option<String>> {
    let mut r = Reader { buf: body };
    if r.u8()? != CLIENT_HELLO {
        return None;
    }
    let _len = r.take(3)?;
    let _version = r.u16()?;
    let _random = r.take(32)?;
    let _session_id = r.vec8()?;
    let _ciphers = r.vec16()?;
    let _compression = r.vec8()?;
    if r.buf.is_empty() {
        return Some(None);
    }
    // A ClientHello larger than one record (post-quantum key shares can make it so) has its
    // extensions cut at the record end: read the ones that are complete.
    let ext_len = usize::from(r.u16()?);
    let available = ext_len.min(r.buf.len());
    let mut exts = Reader {
        buf: r.take(available)?,
    };
    while !exts.buf.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec16()?;
        if kind == EXT_SERVER_NAME {
            return Some(parse_server_name(data));
        }
    }
    Some(None)
}

fn parse_server_name(data: &[u8]) -> Option<String> {
    let mut r = Reader { buf: data };
    let mut list = Reader { buf: r.vec16()? };
    while !list.buf.is_empty() {
        let kind = list.u8()?;
        let name = list.vec16()?;
        if kind == 0 {
            let s = std::str::from_utf8(name).ok()?;
            return Some(s.to_ascii_lowercase());
        }
    }
    None
}

/// Does a filter chain's `server_names` entry match this SNI? Envoy's rules: exact match, or a
/// leading `*.` wildcard matching one or more labels. Any other `*` matches nothing.
pub fn server_name_matches(pattern: &str, sni: &str) -> bool {
    match_rank(pattern, sni).is_some()
}

/// How specifically `pattern` matches `sni`: exact beats any wildcard, a longer wildcard
/// suffix beats a shorter one (Envoy picks the most specific server name). `None`: no match.
pub fn match_rank(pattern: &str, sni: &str) -> Option<usize> {
    let pattern = pattern.to_ascii_lowercase();
    if let Some(suffix) = pattern.strip_prefix("*.") {
        let dotted = &pattern[1..];
        return (sni.len() > dotted.len() && sni.ends_with(dotted) && !suffix.is_empty())
            .then_some(suffix.len());
    }
    if pattern.contains('*') {
        return None;
    }
    (pattern == sni).then_some(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(sni: Option<&str>) -> Vec<u8> {
        let mut exts = Vec::new();
        if let Some(name) = sni {
            let mut list = vec![0u8];
            list.extend_from_slice(&(name.len() as u16).to_be_bytes());
            list.extend_from_slice(name.as_bytes());
            let mut ext = (list.len() as u16).to_be_bytes().to_vec();
            ext.extend_from_slice(&list);
            exts.extend_from_slice(&EXT_SERVER_NAME.to_be_bytes());
            exts.extend_from_slice(&(ext.len() as u16).to_be_bytes());
            exts.extend_from_slice(&ext);
        }
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7u8; 32]);
        body.push(0);
        body.extend_from_slice(&[0, 2, 0x13, 0x01]);
        body.extend_from_slice(&[1, 0]);
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(&exts);
        let mut hs = vec![CLIENT_HELLO, 0, 0, 0];
        hs[1..4].copy_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&body);
        let mut rec = vec![HANDSHAKE, 3, 1];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    #[test]
    fn reads_sni() {
        let h = hello(Some("Example.COM"));
        assert_eq!(
            peek_sni(&h),
            Peek::ClientHello {
                sni: Some("example.com".into())
            }
        );
        assert_eq!(peek_sni(&hello(None)), Peek::ClientHello { sni: None });
    }

    #[test]
    fn truncated_needs_more_and_garbage_is_not_tls() {
        let h = hello(Some("a.b"));
        for cut in 0..h.len() {
            assert_eq!(peek_sni(&h[..cut]), Peek::NeedMore, "cut {cut}");
        }
        assert_eq!(peek_sni(b"GET / HTTP/1.1\r\n"), Peek::NotTls);
        assert_eq!(peek_sni(&[22, 3, 1, 0, 0]), Peek::NotTls);
        // A record whose inner lengths lie is not a ClientHello.
        let mut bad = h.clone();
        bad[5 + 4 + 2 + 32] = 200;
        assert_eq!(peek_sni(&bad), Peek::NotTls);
    }

    #[test]
    fn wildcard_matching() {
        assert!(server_name_matches("*.example.com", "a.example.com"));
        assert!(server_name_matches("*.example.com", "a.b.example.com"));
        assert!(!server_name_matches("*.example.com", "example.com"));
        assert!(server_name_matches("Example.com", "example.com"));
        assert!(!server_name_matches("example.com", "xexample.com"));
        assert!(
            !server_name_matches("*example.com", "badexample.com"),
            "only `*.` wildcards"
        );
        assert!(!server_name_matches("*", "anything"));
        assert!(
            match_rank("a.example.com", "a.example.com")
                > match_rank("*.example.com", "a.example.com")
        );
        assert!(
            match_rank("*.a.example.com", "x.a.example.com")
                > match_rank("*.example.com", "x.a.example.com")
        );
    }
}
