//! Responses made by `openssl ocsp` (testdata/ocsp, see its README) and hand-built
//! DER for every rule of the parser.

use super::*;

const GOOD: &[u8] = include_bytes!("../../../../testdata/ocsp/good-serial-1001.der");
const NO_NEXT_UPDATE: &[u8] = include_bytes!("../../../../testdata/ocsp/no-next-update.der");
const MUST_STAPLE_CERT: &[u8] = include_bytes!("../../../../testdata/ocsp/must-staple.cert.der");
const PLAIN_CERT: &[u8] = include_bytes!("../../../../testdata/ocsp/plain.cert.der");

/// 2026-11-24T04:03:04Z and a day later: the openssl responses' thisUpdate and nextUpdate.
const THIS_UPDATE: i64 = 1_795_492_984;
const NEXT_UPDATE: i64 = 1_795_579_384;

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

fn time(t: &str) -> Vec<u8> {
    tlv(0x18, t.as_bytes())
}

/// A hand-built response; each field can be changed.
struct Build {
    status: Vec<u8>,
    body: bool,
    oid: Vec<u8>,
    version: Option<Vec<u8>>,
    responder: Vec<u8>,
    serial: Vec<u8>,
    cert_status: Vec<u8>,
    this_update: Vec<u8>,
    next_update: Option<Vec<u8>>,
    singles: usize,
    trailing: Vec<u8>,
}

impl Default for Build {
    fn default() -> Self {
        Build {
            status: tlv(0x0a, &[0]),
            body: true,
            oid: ID_PKIX_OCSP_BASIC.to_vec(),
            version: None,
            responder: tlv(0xa1, &seq(&[])),
            serial: tlv(0x02, &[0x10, 0x01]),
            cert_status: tlv(0x80, &[]),
            this_update: time("20200101000000Z"),
            next_update: Some(time("20301231000000Z")),
            singles: 1,
            trailing: Vec::new(),
        }
    }
}

impl Build {
    fn der(&self) -> Vec<u8> {
        let sha1 = seq(&[tlv(0x06, &[0x2b, 0x0e, 0x03, 0x02, 0x1a]), tlv(0x05, &[])]);
        let cert_id = seq(&[
            sha1,
            tlv(0x04, &[0; 20]),
            tlv(0x04, &[0; 20]),
            self.serial.clone(),
        ]);
        let mut single = vec![cert_id, self.cert_status.clone(), self.this_update.clone()];
        if let Some(n) = &self.next_update {
            single.push(tlv(0xa0, n));
        }
        let single = seq(&single);
        let mut data = Vec::new();
        if let Some(v) = &self.version {
            data.push(tlv(0xa0, v));
        }
        data.push(self.responder.clone());
        data.push(time("20200101000000Z"));
        data.push(seq(&vec![single; self.singles]));
        let basic = seq(&[
            seq(&data),
            seq(&[tlv(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02])]),
            tlv(0x03, &[0]),
        ]);
        let mut top = vec![self.status.clone()];
        if self.body {
            top.push(tlv(0xa0, &seq(&[tlv(0x06, &self.oid), tlv(0x04, &basic)])));
        }
        let mut out = seq(&top);
        out.extend_from_slice(&self.trailing);
        out
    }

    fn parse(&self) -> Result<(Vec<u8>, i64, Option<i64>), OcspError> {
        let der = self.der();
        parse(&der).map(|r| (r.serial.to_vec(), r.this_update, r.next_update))
    }
}

#[test]
fn openssl_responses() {
    let r = parse(GOOD).expect("good response");
    assert_eq!(r.serial, &[0x10, 0x01]);
    assert_eq!(r.serial_value(), (false, vec![0x10, 0x01]));
    assert_eq!(r.this_update, THIS_UPDATE);
    assert_eq!(r.next_update, Some(NEXT_UPDATE));
    assert!(!r.is_expired(NEXT_UPDATE));
    assert!(r.is_expired(NEXT_UPDATE + 1));

    let r = parse(NO_NEXT_UPDATE).expect("response without nextUpdate");
    assert_eq!(r.this_update, THIS_UPDATE);
    assert_eq!(r.next_update, None);
    assert!(r.is_expired(0), "no nextUpdate is always expired");
}

#[test]
fn hand_built_response_parses() {
    let (serial, this, next) = Build::default().parse().expect("parses");
    assert_eq!(serial, [0x10, 0x01]);
    assert_eq!(this, 1_577_836_800);
    assert_eq!(next, Some(1_924_905_600));
    // byKey responder, revoked and unknown statuses, a lower-case zone: all accepted.
    for b in [
        Build {
            responder: tlv(0xa2, &tlv(0x04, &[1; 20])),
            ..Build::default()
        },
        Build {
            cert_status: tlv(0xa1, &time("20200101000000Z")),
            ..Build::default()
        },
        Build {
            cert_status: tlv(0x82, &[]),
            next_update: Some(time("20301231000000z")),
            ..Build::default()
        },
    ] {
        b.parse().expect("accepted");
    }
}

#[test]
fn envoys_refusals() {
    let err = |b: Build| b.parse().expect_err("refused");
    assert_eq!(
        err(Build {
            status: tlv(0x0a, &[2]),
            body: false,
            ..Build::default()
        }),
        OcspError::Unsuccessful(ResponseStatus::InternalError)
    );
    assert_eq!(
        err(Build {
            body: false,
            ..Build::default()
        }),
        OcspError::NoBody
    );
    assert_eq!(
        err(Build {
            status: tlv(0x0a, &[4]),
            ..Build::default()
        }),
        OcspError::UnknownStatus(Some(4))
    );
    assert_eq!(
        err(Build {
            status: tlv(0x0a, &[]),
            ..Build::default()
        }),
        OcspError::UnknownStatus(None)
    );
    assert_eq!(
        err(Build {
            singles: 2,
            ..Build::default()
        }),
        OcspError::NotOneCertificate(2)
    );
    assert_eq!(
        err(Build {
            singles: 0,
            ..Build::default()
        }),
        OcspError::NotOneCertificate(0)
    );
    assert_eq!(
        err(Build {
            oid: vec![0x29, 0x01, 0x01, 0x01, 0x01, 0x01],
            ..Build::default()
        }),
        OcspError::UnknownResponseType("1.1.1.1.1.1.1".into())
    );
    assert_eq!(
        err(Build {
            version: Some(tlv(0x02, &[0])),
            ..Build::default()
        }),
        OcspError::UnsupportedVersion("00".into())
    );
    assert_eq!(
        err(Build {
            responder: tlv(0x03, &[0]),
            ..Build::default()
        }),
        OcspError::UnknownResponderId(Some(0x03))
    );
    assert_eq!(
        err(Build {
            cert_status: tlv(0x83, &[]),
            ..Build::default()
        }),
        OcspError::UnknownCertStatus(Some(0x83))
    );
    for serial in [vec![], vec![0x00, 0x10, 0x01], vec![0xff, 0x80]] {
        assert_eq!(
            err(Build {
                serial: tlv(0x02, &serial),
                ..Build::default()
            }),
            OcspError::BadSerial,
            "{serial:?}"
        );
    }
    assert_eq!(
        err(Build {
            trailing: vec![0x05, 0x00],
            ..Build::default()
        }),
        OcspError::TrailingData
    );
    let mut two = GOOD.to_vec();
    two.extend_from_slice(NO_NEXT_UPDATE);
    assert_eq!(parse(&two), Err(OcspError::TrailingData));
    assert!(matches!(
        err(Build {
            next_update: Some(time("20300230000000Z")),
            ..Build::default()
        }),
        OcspError::BadTime(_)
    ));
    let mut wrong_tag = GOOD.to_vec();
    wrong_tag[0] = 0x04;
    assert!(matches!(
        parse(&wrong_tag),
        Err(OcspError::Malformed {
            what: "Response",
            ..
        })
    ));
}

#[test]
fn generalized_times() {
    let t = |s: &str| parse_generalized_time(s.as_bytes());
    assert_eq!(t("20261124040304Z"), Ok(THIS_UPDATE));
    assert_eq!(t("20000229000000Z"), Ok(951_782_400));
    assert_eq!(t("19500615123045Z"), Ok(-616_850_955));
    // A leap second is the next minute's first.
    assert_eq!(t("20301231235960Z"), Ok(1_924_992_000));
    for bad in [
        "",
        "Z",
        "20301231000000",
        "20301231000000+0100",
        "20301231000000.5Z",
        "2030123100000Z",
        "2030123100000aZ",
        "20301301000000Z",
        "20300230000000Z",
        "21000229000000Z",
        "20301200000000Z",
        "20301231240000Z",
        "20301231006000Z",
        "20301231000061Z",
    ] {
        assert!(t(bad).is_err(), "{bad}");
    }
}

#[test]
fn integer_values() {
    assert_eq!(integer_value(&[0x00]), (false, vec![]));
    assert_eq!(integer_value(&[0x00, 0x80]), (false, vec![0x80]));
    assert_eq!(integer_value(&[0x10, 0x01]), (false, vec![0x10, 0x01]));
    assert_eq!(integer_value(&[0xff]), (true, vec![0x01]));
    assert_eq!(integer_value(&[0x80]), (true, vec![0x80]));
    assert_eq!(integer_value(&[0xff, 0x7f]), (true, vec![0x81]));
    assert_eq!(integer_value(&[0xff, 0x00]), (true, vec![0x01, 0x00]));
}

#[test]
fn must_staple_extension() {
    assert!(certificate_must_staple(MUST_STAPLE_CERT));
    assert!(!certificate_must_staple(PLAIN_CERT));
    assert!(!certificate_must_staple(GOOD));
    assert!(!certificate_must_staple(&[]));
    for cut in 0..MUST_STAPLE_CERT.len() {
        assert!(!certificate_must_staple(&MUST_STAPLE_CERT[..cut]));
    }
}

#[test]
fn oid_texts() {
    assert_eq!(oid_text(ID_PKIX_OCSP_BASIC), "1.3.6.1.5.5.7.48.1.1");
    assert_eq!(oid_text(&[0x2a, 0x86, 0x48]), "1.2.840");
    assert_eq!(oid_text(&[0x88, 0x37]), "2.999");
    assert_eq!(oid_text(&[]), "");
    assert_eq!(oid_text(&[0x2a, 0x86]), "2a86", "unfinished arc");
    assert_eq!(oid_text(&[0x2a, 0x80, 0x01]), "2a8001", "non-minimal arc");
}

/// No input panics; every prefix and every single-byte change of the real responses is
/// either refused or parsed to a response whose serial lies inside the input.
#[test]
fn mutations_never_panic() {
    for base in [GOOD, NO_NEXT_UPDATE, MUST_STAPLE_CERT] {
        for cut in 0..base.len() {
            assert!(parse(&base[..cut]).is_err(), "prefix {cut} parsed");
        }
        let mut m = base.to_vec();
        for i in 0..m.len() {
            for x in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let old = m[i];
                m[i] = x;
                if let Ok(r) = parse(&m) {
                    let start = r.serial.as_ptr() as usize - m.as_ptr() as usize;
                    assert!(start + r.serial.len() <= m.len());
                }
                let _ = certificate_must_staple(&m);
                m[i] = old;
            }
        }
    }
}
