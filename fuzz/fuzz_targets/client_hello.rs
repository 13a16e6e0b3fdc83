//! `quickshake_wire::client_hello::{peek_sni, server_name_matches}` on arbitrary bytes: what the
//! gateway runs on the first bytes of every downstream connection, before any TLS.
//!
//! Properties checked (a violation aborts, which libFuzzer reports as a crash):
//! * neither function panics;
//! * `ClientHello` is returned only when the first 5 bytes declare a TLS handshake record
//!   (type 22, major version 3) whose non-zero length fits in the input and in `MAX_RECORD`;
//! * the answer depends only on that first record: bytes after it do not change it, and every
//!   proper prefix of the record is `NeedMore`;
//! * the SNI is lower-case and no longer than the record;
//! * `NeedMore` is never returned for input of `MAX_RECORD` bytes or more (the caller stops
//!   reading there, so a `NeedMore` would be a hang in the caller's eyes — it copes, but the
//!   parser's contract is that a full record is decisive);
//! * `server_name_matches(p, p.to_ascii_lowercase())` holds for every pattern `p` without `*`
//!   (only a leading `*.` is a wildcard, as in Envoy), a pattern
//!   never matches an SNI that is not a suffix of it (after the optional `*`), and the bare
//!   suffix of a wildcard (`*.example.com` vs `.example.com`) never matches.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quickshake_wire::client_hello::{peek_sni, server_name_matches, Peek, MAX_RECORD};

fn check_peek(data: &[u8]) {
    let got = peek_sni(data);
    if let Peek::ClientHello { sni } = &got {
        assert!(data.len() >= 5, "ClientHello from {} bytes", data.len());
        assert_eq!(data[0], 22, "ClientHello from a non-handshake record");
        assert_eq!(data[1], 3, "ClientHello from record version major {}", data[1]);
        let record_len = usize::from(u16::from_be_bytes([data[3], data[4]]));
        assert!(record_len > 0, "ClientHello from an empty record");
        assert!(5 + record_len <= data.len(), "record length {record_len} exceeds input");
        assert!(5 + record_len <= MAX_RECORD, "record length {record_len} exceeds MAX_RECORD");
        let record = &data[..5 + record_len];
        // Only the first record matters.
        assert_eq!(peek_sni(record), got, "trailing bytes changed the answer");
        // Proper prefixes of the record are incomplete (a few cuts, to stay linear).
        for cut in [0, 1, 4, 5, 5 + record_len / 2, 5 + record_len - 1] {
            if cut < record.len() {
                assert_eq!(peek_sni(&record[..cut]), Peek::NeedMore, "prefix of {cut} bytes");
            }
        }
        if let Some(name) = sni {
            assert!(name.len() <= record_len, "SNI longer than its record");
            assert!(
                !name.bytes().any(|b| b.is_ascii_uppercase()),
                "SNI {name:?} is not lower-cased"
            );
            // A chain naming exactly this SNI is selected.
            if !name.contains('*') {
                assert!(server_name_matches(name, name));
            }
        }
    }
    if data.len() >= MAX_RECORD {
        assert_ne!(got, Peek::NeedMore, "NeedMore with {} bytes", data.len());
    }
}

fn check_matches(data: &[u8]) {
    // First byte: pattern length; then the pattern; the rest is the SNI.
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n).min(rest.len());
    let pattern = String::from_utf8_lossy(&rest[..n]);
    let sni = String::from_utf8_lossy(&rest[n..]);
    let m = server_name_matches(&pattern, &sni);
    if !pattern.contains('*') {
        assert!(server_name_matches(&pattern, &pattern.to_ascii_lowercase()));
    }
    let lower = pattern.to_ascii_lowercase();
    let suffix = lower.strip_prefix('*').unwrap_or(&lower);
    if m {
        assert!(sni.ends_with(suffix), "{pattern:?} matched {sni:?}");
    }
    if let Some(s) = lower.strip_prefix('*') {
        assert!(!server_name_matches(&pattern, s), "{pattern:?} matched its bare suffix");
    }
}

fuzz_target!(|data: &[u8]| {
    check_peek(data);
    check_matches(data);
});
