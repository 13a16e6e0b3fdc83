//! `quickshake_wire::ocsp` on arbitrary bytes: what an `ocsp_staple` file (or SDS secret) holds,
//! parsed at every configuration load and certificate rotation.
//!
//! Properties: no panic; an accepted response's serial number lies inside the input and is a
//! minimal DER INTEGER, its times are within years 0000..=9999, and any byte appended makes it
//! a `TrailingData` refusal; the same bytes read as a certificate
//! (`certificate_must_staple`) and as a GeneralizedTime do not panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quickshake_wire::der::is_minimal_integer;
use quickshake_wire::ocsp::{certificate_must_staple, parse, parse_generalized_time, OcspError};

/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:60Z in seconds since the epoch.
const MIN_TIME: i64 = -62_167_219_200;
const MAX_TIME: i64 = 253_402_300_800;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse(data) {
        let start = r.serial.as_ptr() as usize - data.as_ptr() as usize;
        assert!(start + r.serial.len() <= data.len(), "serial outside the input");
        assert!(is_minimal_integer(r.serial), "serial {:?}", r.serial);
        for t in std::iter::once(r.this_update).chain(r.next_update) {
            assert!((MIN_TIME..=MAX_TIME).contains(&t), "time {t}");
        }
        let mut longer = data.to_vec();
        longer.push(0);
        assert_eq!(parse(&longer), Err(OcspError::TrailingData));
    }
    let _ = certificate_must_staple(data);
    if let Ok(t) = parse_generalized_time(data) {
        assert!((MIN_TIME..=MAX_TIME).contains(&t), "time {t}");
    }
});
