//! The parts of a DER OCSP response (RFC 6960, appendix B) that OCSP stapling needs, read as
//! Envoy 1.39.3 reads them (`source/common/tls/ocsp/ocsp.cc`): the response status, and of the
//! BasicOCSPResponse's one SingleResponse the certificate's serial number, `thisUpdate` and
//! `nextUpdate`. Also the one certificate fact stapling depends on: the TLS-feature
//! ("must-staple", RFC 7633) extension.
//!
//! Envoy's rules, kept: exactly one OCSP response with no bytes after it; status `successful`
//! with a body of type `id-pkix-ocsp-basic`; exactly one SingleResponse; an explicit
//! ResponseData version is refused (DER omits v1, the only version); times are GeneralizedTime
//! `YYYYMMDDHHMMSSZ` (a lower-case `z` too, no fraction); every SingleResponse must parse. The
//! signature, the responder's certificates, the certificate status (good, revoked, unknown) and
//! extensions are not looked at: a staple comes from the operator, who is trusted (Envoy's
//! "WARNING" in `ocsp.h`).
//!
//! Pure and strict: element framing is DER's (see [`crate::der`]), every length is checked,
//! nothing panics on any input (fuzzed: `fuzz/fuzz_targets/ocsp_response.rs`), and a response
//! borrows from its input (allocations: a serial's value, an error's OID text).

use std::fmt;

use crate::der::{self, DerError, Reader};

/// `id-pkix-ocsp-basic`, 1.3.6.1.5.5.7.48.1.1, as DER content.
const ID_PKIX_OCSP_BASIC: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x01];
/// `id-pe-tlsfeature`, 1.3.6.1.5.5.7.1.24, as DER content.
const ID_PE_TLSFEATURE: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x18];
/// The TLS-feature value Envoy recognises as must-staple: `SEQUENCE { INTEGER 5 }`
/// (status_request), byte for byte.
const MUST_STAPLE_VALUE: &[u8] = &[0x30, 0x03, 0x02, 0x01, 0x05];

/// `OCSPResponseStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseStatus {
    Successful,
    MalformedRequest,
    InternalError,
    TryLater,
    SigRequired,
    Unauthorized,
}

/// The facts of a usable OCSP response (status successful, one certificate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcspResponse<'a> {
    /// The certificate's serial number: a DER INTEGER body (minimal two's complement).
    pub serial: &'a [u8],
    /// `thisUpdate`, seconds since the Unix epoch.
    pub this_update: i64,
    /// `nextUpdate`, seconds since the Unix epoch; absent means "newer information is always
    /// available", which Envoy treats as expired.
    pub next_update: Option<i64>,
}

impl OcspResponse<'_> {
    /// Envoy's `isExpired`: no `nextUpdate`, or one before `now` (seconds since the epoch).
    pub fn is_expired(&self, now: i64) -> bool {
        is_expired(self.next_update, now)
    }

    /// The serial number as a sign and a magnitude without leading zero bytes (empty for 0),
    /// the form a big-number library compares.
    pub fn serial_value(&self) -> (bool, Vec<u8>) {
        integer_value(self.serial)
    }
}

/// Envoy's `isExpired` on a `nextUpdate`: absent, or before `now`.
pub fn is_expired(next_update: Option<i64>, now: i64) -> bool {
    next_update.is_none_or(|n| n < now)
}

/// Why bytes are not a usable OCSP response. The messages follow Envoy's where Envoy has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OcspError {
    /// The DER framing of `what` is broken.
    Malformed { what: &'static str, error: DerError },
    /// Bytes follow the response.
    TrailingData,
    /// `OCSPResponseStatus` has no value or one RFC 6960 does not define.
    UnknownStatus(Option<u8>),
    /// `responseType` is not `id-pkix-ocsp-basic` (the OID in dotted form, or hex if invalid).
    UnknownResponseType(String),
    /// An explicit ResponseData version (the integer's body, hex).
    UnsupportedVersion(String),
    /// A `ResponderID` that is neither `byName` nor `byKey` (the tag found).
    UnknownResponderId(Option<u8>),
    /// A `CertStatus` that is neither good, revoked nor unknown (the tag found).
    UnknownCertStatus(Option<u8>),
    /// The serial number is not a valid DER INTEGER.
    BadSerial,
    /// A time that is not `YYYYMMDDHHMMSSZ` with a valid date.
    BadTime(&'static str),
    /// Status other than successful.
    Unsuccessful(ResponseStatus),
    /// Status successful but no `responseBytes`.
    NoBody,
    /// Not exactly one SingleResponse (how many).
    NotOneCertificate(usize),
}

impl fmt::Display for OcspError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OcspError::Malformed { what, error } => {
                write!(f, "OCSP {what} is not well-formed DER: {error}")
            }
            OcspError::TrailingData => {
                f.write_str("Data contained more than a single OCSP response")
            }
            OcspError::UnknownStatus(Some(s)) => {
                write!(f, "Unknown OCSP Response Status variant: {s}")
            }
            OcspError::UnknownStatus(None) => f.write_str("OCSP ResponseStatus is empty"),
            OcspError::UnknownResponseType(oid) => {
                write!(f, "Unknown OCSP Response type with OID: {oid}")
            }
            OcspError::UnsupportedVersion(v) => {
                write!(f, "OCSP ResponseData version 0x{v} is not supported")
            }
            OcspError::UnknownResponderId(tag) => {
                write!(f, "Unknown choice for Responder ID: {}", show_tag(*tag))
            }
            OcspError::UnknownCertStatus(tag) => {
                write!(f, "Unknown OcspCertStatus tag: {}", show_tag(*tag))
            }
            OcspError::BadSerial => f.write_str("Failed to parse ASN.1 INTEGER (serial number)"),
            OcspError::BadTime(why) => {
                write!(f, "Error parsing string of GENERALIZEDTIME format: {why}")
            }
            OcspError::Unsuccessful(s) => write!(f, "OCSP response was unsuccessful ({s:?})"),
            OcspError::NoBody => f.write_str("OCSP response has no body"),
            OcspError::NotOneCertificate(n) => write!(
                f,
                "OCSP Response must be for one certificate only (it has {n})"
            ),
        }
    }
}

impl std::error::Error for OcspError {}

fn show_tag(tag: Option<u8>) -> String {
    tag.map_or_else(|| "none".to_owned(), |t| format!("0x{t:02x}"))
}

fn malformed(what: &'static str) -> impl Fn(DerError) -> OcspError {
    move |error| OcspError::Malformed { what, error }
}

/// Parse a DER `OCSPResponse` and check it is one Envoy staples: successful, a basic response,
/// one certificate.
pub fn parse(der: &[u8]) -> Result<OcspResponse<'_>, OcspError> {
    let mut top = Reader::new(der);
    let response = top.read(der::SEQUENCE).map_err(malformed("Response"))?;
    let mut r = Reader::new(response);
    let status = response_status(&mut r)?;
    let body = match r
        .read_optional(der::context_constructed(0))
        .map_err(malformed("responseBytes"))?
    {
        Some(b) => Some(response_bytes(b)?),
        None => None,
    };
    if !top.is_empty() {
        return Err(OcspError::TrailingData);
    }
    if status != ResponseStatus::Successful {
        return Err(OcspError::Unsuccessful(status));
    }
    match body.ok_or(OcspError::NoBody)? {
        (1, Some(single)) => Ok(single),
        (n, _) => Err(OcspError::NotOneCertificate(n)),
    }
}

fn response_status(r: &mut Reader<'_>) -> Result<ResponseStatus, OcspError> {
    let v = r
        .read(der::ENUMERATED)
        .map_err(malformed("ResponseStatus"))?;
    // Envoy reads the first byte of the value (a DER ENUMERATED this small has one).
    Ok(match v.first() {
        Some(0) => ResponseStatus::Successful,
        Some(1) => ResponseStatus::MalformedRequest,
        Some(2) => ResponseStatus::InternalError,
        Some(3) => ResponseStatus::TryLater,
        Some(5) => ResponseStatus::SigRequired,
        Some(6) => ResponseStatus::Unauthorized,
        other => return Err(OcspError::UnknownStatus(other.copied())),
    })
}

/// SingleResponses: how many, and the first.
type Singles<'a> = (usize, Option<OcspResponse<'a>>);

/// `ResponseBytes ::= SEQUENCE { responseType OID, response OCTET STRING }`: the
/// SingleResponses of a BasicOCSPResponse.
fn response_bytes(explicit: &[u8]) -> Result<Singles<'_>, OcspError> {
    let seq = Reader::new(explicit)
        .read(der::SEQUENCE)
        .map_err(malformed("ResponseBytes"))?;
    let mut r = Reader::new(seq);
    let oid = r
        .read(der::OBJECT_IDENTIFIER)
        .map_err(malformed("responseType"))?;
    let response = r.read(der::OCTET_STRING).map_err(malformed("response"))?;
    if oid != ID_PKIX_OCSP_BASIC {
        return Err(OcspError::UnknownResponseType(oid_text(oid)));
    }
    // BasicOCSPResponse ::= SEQUENCE { tbsResponseData, signatureAlgorithm, signature, certs }:
    // only tbsResponseData is read.
    let basic = Reader::new(response)
        .read(der::SEQUENCE)
        .map_err(malformed("BasicOCSPResponse"))?;
    let data = Reader::new(basic)
        .read(der::SEQUENCE)
        .map_err(malformed("ResponseData"))?;
    response_data(data)
}

/// `ResponseData ::= SEQUENCE { version [0] DEFAULT v1, responderID, producedAt,
/// responses SEQUENCE OF SingleResponse, responseExtensions [1] OPTIONAL }`.
fn response_data(data: &[u8]) -> Result<Singles<'_>, OcspError> {
    let mut r = Reader::new(data);
    if let Some(v) = r
        .read_optional(der::context_constructed(0))
        .map_err(malformed("ResponseData version"))?
    {
        // Envoy accepts only a version whose hex form is "00", which no integer has: any
        // explicit version is refused (DER leaves the default v1 out).
        let int = Reader::new(v)
            .read(der::INTEGER)
            .map_err(malformed("ResponseData version"))?;
        return Err(OcspError::UnsupportedVersion(hex(int)));
    }
    let by_name = r
        .read_optional(der::context_constructed(1))
        .map_err(malformed("ResponderID"))?;
    if by_name.is_none()
        && r.read_optional(der::context_constructed(2))
            .map_err(malformed("ResponderID"))?
            .is_none()
    {
        return Err(OcspError::UnknownResponderId(r.peek_tag()));
    }
    r.read(der::GENERALIZED_TIME)
        .map_err(malformed("producedAt"))?;
    let responses = r.read(der::SEQUENCE).map_err(malformed("responses"))?;
    // Every SingleResponse must parse (as in Envoy); only the first is kept.
    let mut list = Reader::new(responses);
    let (mut count, mut first) = (0, None);
    while !list.is_empty() {
        let single = single_response(&mut list)?;
        count += 1;
        first.get_or_insert(single);
    }
    Ok((count, first))
}

/// `SingleResponse ::= SEQUENCE { certID, certStatus, thisUpdate, nextUpdate [0] OPTIONAL,
/// singleExtensions [1] OPTIONAL }`.
fn single_response<'a>(list: &mut Reader<'a>) -> Result<OcspResponse<'a>, OcspError> {
    let single = list
        .read(der::SEQUENCE)
        .map_err(malformed("SingleResponse"))?;
    let mut r = Reader::new(single);
    // CertID ::= SEQUENCE { hashAlgorithm, issuerNameHash, issuerKeyHash, serialNumber }
    let cert_id = r.read(der::SEQUENCE).map_err(malformed("CertID"))?;
    let mut c = Reader::new(cert_id);
    c.read(der::SEQUENCE).map_err(malformed("CertID"))?;
    c.read(der::OCTET_STRING).map_err(malformed("CertID"))?;
    c.read(der::OCTET_STRING).map_err(malformed("CertID"))?;
    let serial = c
        .read(der::INTEGER)
        .map_err(malformed("CertID serialNumber"))?;
    if !der::is_minimal_integer(serial) {
        return Err(OcspError::BadSerial);
    }
    // CertStatus ::= CHOICE { good [0] IMPLICIT NULL, revoked [1] IMPLICIT RevokedInfo,
    // unknown [2] IMPLICIT UnknownInfo }
    let status_tags = [
        der::context_primitive(0),
        der::context_constructed(1),
        der::context_primitive(2),
    ];
    match r.peek_tag() {
        Some(t) if status_tags.contains(&t) => {
            r.read(t).map_err(malformed("CertStatus"))?;
        }
        other => return Err(OcspError::UnknownCertStatus(other)),
    }
    let this_update = generalized_time(&mut r, "thisUpdate")?;
    let next_update = match r
        .read_optional(der::context_constructed(0))
        .map_err(malformed("nextUpdate"))?
    {
        Some(explicit) => Some(generalized_time(&mut Reader::new(explicit), "nextUpdate")?),
        None => None,
    };
    Ok(OcspResponse {
        serial,
        this_update,
        next_update,
    })
}

fn generalized_time(r: &mut Reader<'_>, what: &'static str) -> Result<i64, OcspError> {
    let text = r.read(der::GENERALIZED_TIME).map_err(malformed(what))?;
    parse_generalized_time(text).map_err(OcspError::BadTime)
}

/// `YYYYMMDDHHMMSSZ` (or `z`) to seconds since the Unix epoch. A second of 60 (a leap second)
/// is the next minute's first, as Abseil's parser has it; an impossible date is refused.
pub fn parse_generalized_time(text: &[u8]) -> Result<i64, &'static str> {
    let (digits, zone) = match text.split_last() {
        Some((z, d)) => (d, *z),
        None => return Err("empty"),
    };
    if !zone.eq_ignore_ascii_case(&b'Z') {
        return Err("GENERALIZEDTIME must be in UTC");
    }
    if digits.len() != 14 || !digits.iter().all(u8::is_ascii_digit) {
        return Err("expected YYYYMMDDHHMMSS");
    }
    let num = |range: std::ops::Range<usize>| {
        digits[range]
            .iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'))
    };
    let (year, month, day) = (num(0..4), num(4..6), num(6..8));
    let (hour, minute, second) = (num(8..10), num(10..12), num(12..14));
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err("no such date");
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err("no such time of day");
    }
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A DER INTEGER body as a sign and a magnitude without leading zero bytes (empty for 0).
pub fn integer_value(content: &[u8]) -> (bool, Vec<u8>) {
    let negative = content.first().is_some_and(|b| b & 0x80 != 0);
    let mut magnitude: Vec<u8> = if negative {
        // Two's complement: invert and add one.
        let mut m: Vec<u8> = content.iter().map(|b| !b).collect();
        for b in m.iter_mut().rev() {
            let (sum, carry) = b.overflowing_add(1);
            *b = sum;
            if !carry {
                break;
            }
        }
        m
    } else {
        content.to_vec()
    };
    let zeros = magnitude.iter().take_while(|&&b| b == 0).count();
    magnitude.drain(..zeros);
    (negative, magnitude)
}

/// Whether a DER certificate carries the TLS-feature extension with exactly the must-staple
/// value (Envoy's test, byte for byte). A certificate this reader cannot walk has none.
pub fn certificate_must_staple(cert_der: &[u8]) -> bool {
    tls_feature(cert_der).is_some_and(|v| v == MUST_STAPLE_VALUE)
}

/// The value (OCTET STRING body) of a certificate's TLS-feature extension.
fn tls_feature(cert_der: &[u8]) -> Option<&[u8]> {
    let cert = Reader::new(cert_der).read(der::SEQUENCE).ok()?;
    let tbs = Reader::new(cert).read(der::SEQUENCE).ok()?;
    let mut fields = Reader::new(tbs);
    // extensions [3] EXPLICIT SEQUENCE OF Extension, after every other TBSCertificate field.
    let extensions = loop {
        let (tag, content) = fields.read_any().ok()?;
        if tag == der::context_constructed(3) {
            break Reader::new(content).read(der::SEQUENCE).ok()?;
        }
    };
    let mut list = Reader::new(extensions);
    while !list.is_empty() {
        // Extension ::= SEQUENCE { extnID OID, critical BOOLEAN DEFAULT FALSE, extnValue }
        let mut ext = Reader::new(list.read(der::SEQUENCE).ok()?);
        let oid = ext.read(der::OBJECT_IDENTIFIER).ok()?;
        ext.read_optional(der::BOOLEAN).ok()?;
        let value = ext.read(der::OCTET_STRING).ok()?;
        if oid == ID_PE_TLSFEATURE {
            return Some(value);
        }
    }
    None
}

/// An OID's dotted form, or its bytes in hex when they are not a valid OID.
fn oid_text(oid: &[u8]) -> String {
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    let mut fresh = true;
    for &b in oid {
        if fresh && b == 0x80 || value > u64::MAX >> 7 {
            return hex(oid);
        }
        value = (value << 7) | u64::from(b & 0x7f);
        fresh = b & 0x80 == 0;
        if fresh {
            arcs.push(value);
            value = 0;
        }
    }
    let Some((&first, rest)) = arcs.split_first() else {
        return hex(oid);
    };
    if !fresh {
        return hex(oid);
    }
    let (a, b) = match first {
        0..=39 => (0, first),
        40..=79 => (1, first - 40),
        _ => (2, first - 80),
    };
    let mut out = format!("{a}.{b}");
    for arc in rest {
        out.push_str(&format!(".{arc}"));
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
