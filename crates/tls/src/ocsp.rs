//! OCSP stapling as Envoy 1.39.3 does it: a certificate's `ocsp_staple` (a DER OCSP response,
//! parsed by [`quickshake_wire::ocsp`]) is checked when the context is built, and each
//! handshake whose ClientHello asks for certificate status (the `status_request` extension)
//! gets the staple, none, or a failed handshake by `ocsp_staple_policy` ([`staple_action`]).
//!
//! At load (Envoy's `ServerContextImpl`), in this order: a certificate with the must-staple
//! TLS feature needs a staple; `MUST_STAPLE` needs one on every certificate; a staple must parse
//! and name the certificate's serial number. An expired staple loads (it is judged per
//! handshake, against the clock then). A must-staple certificate is served as under
//! `MUST_STAPLE` whatever the policy.
//!
//! Envoy's `listener.<address>.ssl.ocsp_staple_*` counters ([`OcspStats`]) move in the
//! certificate-selection callback (`context.rs`), once per ClientHello.

use std::time::{SystemTime, UNIX_EPOCH};

use boring::x509::X509Ref;
use quickshake_config::{read_data_source, OcspStaplePolicy, TlsCertificate};
use quickshake_stats::{Counter, Store};
use quickshake_wire::ocsp;

use crate::certs::source_name;
use crate::error::TlsError;

/// What one handshake does about OCSP (Envoy's `Ssl::OcspStapleAction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StapleAction {
    /// Send the certificate's response.
    Staple,
    /// Send none (`ocsp_staple_omitted`).
    NoStaple,
    /// Fail the handshake (`ocsp_staple_failed`).
    Fail,
    /// The client did not ask: nothing is sent or counted.
    ClientNotCapable,
}

/// A certificate's staple as a handshake sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StapleState {
    Absent,
    Valid,
    /// No `nextUpdate`, or one in the past.
    Expired,
}

/// Envoy's `ocspStapleAction`: the policy (made `MUST_STAPLE` by a must-staple certificate)
/// against the staple's state, for a client that asked or not.
pub fn staple_action(
    policy: OcspStaplePolicy,
    must_staple: bool,
    state: StapleState,
    client_asked: bool,
) -> StapleAction {
    if !client_asked {
        return StapleAction::ClientNotCapable;
    }
    let policy = if must_staple {
        OcspStaplePolicy::MustStaple
    } else {
        policy
    };
    match (policy, state) {
        (_, StapleState::Valid) => StapleAction::Staple,
        (OcspStaplePolicy::LenientStapling, _) => StapleAction::NoStaple,
        (OcspStaplePolicy::StrictStapling, StapleState::Expired) => StapleAction::Fail,
        (OcspStaplePolicy::StrictStapling, StapleState::Absent) => StapleAction::NoStaple,
        (OcspStaplePolicy::MustStaple, _) => StapleAction::Fail,
    }
}

/// Envoy's `ssl.ocsp_staple_*` counters of one listener. Cheap to clone.
#[derive(Clone)]
pub struct OcspStats {
    /// ClientHellos with `status_request`.
    pub requests: Counter,
    /// Handshakes that were given a staple.
    pub responses: Counter,
    /// Handshakes that asked and were given none.
    pub omitted: Counter,
    /// Handshakes failed by the policy.
    pub failed: Counter,
}

impl OcspStats {
    /// `prefix` is the listener scope, e.g. `listener.0.0.0.0_9000.`.
    pub fn new(store: &Store, prefix: &str) -> Self {
        let c = |n: &str| store.counter(&format!("{prefix}ssl.ocsp_staple_{n}"));
        OcspStats {
            requests: c("requests"),
            responses: c("responses"),
            omitted: c("omitted"),
            failed: c("failed"),
        }
    }

    /// Count one ClientHello as Envoy's `selectTlsContext` does.
    pub(crate) fn record(&self, client_asked: bool, action: StapleAction) {
        if client_asked {
            self.requests.inc();
        }
        match action {
            StapleAction::Staple => self.responses.inc(),
            StapleAction::NoStaple => self.omitted.inc(),
            StapleAction::Fail => self.failed.inc(),
            StapleAction::ClientNotCapable => {}
        }
    }
}

/// A staple's validity window, for `/certs` (Envoy's `ocsp_details`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OcspDetails {
    /// `thisUpdate`, seconds since the Unix epoch.
    pub valid_from: i64,
    /// `nextUpdate`, seconds since the Unix epoch (Envoy shows the current time when absent).
    pub expiration: Option<i64>,
}

/// A certificate's OCSP setup, checked when its context is built.
pub(crate) struct CertOcsp {
    staple: Option<Staple>,
    must_staple: bool,
}

struct Staple {
    der: Vec<u8>,
    this_update: i64,
    next_update: Option<i64>,
}

impl CertOcsp {
    /// Read and check `cert.ocsp_staple` against the loaded leaf, under `policy`.
    pub(crate) fn load(
        cert: &TlsCertificate,
        leaf: &X509Ref,
        policy: OcspStaplePolicy,
    ) -> Result<CertOcsp, TlsError> {
        let field = format!("{}.ocsp_staple", cert.path);
        let ssl_err = |e| TlsError::Ssl {
            field: cert.path.clone(),
            source: e,
        };
        let must_staple = ocsp::certificate_must_staple(&leaf.to_der().map_err(ssl_err)?);
        // Envoy treats empty staple bytes as no staple.
        let der = match &cert.ocsp_staple {
            Some(ds) => Some(read_data_source(ds, &field)?).filter(|d| !d.is_empty()),
            None => None,
        };
        let Some(der) = der else {
            if must_staple {
                return Err(TlsError::Invalid {
                    field,
                    reason: "OCSP response is required for must-staple certificate (its TLS \
                             feature extension asks for status_request)"
                        .into(),
                });
            }
            if policy == OcspStaplePolicy::MustStaple {
                return Err(TlsError::Invalid {
                    field,
                    reason: "Required OCSP response is missing from TLS context \
                             (ocsp_staple_policy: MUST_STAPLE)"
                        .into(),
                });
            }
            return Ok(CertOcsp {
                staple: None,
                must_staple,
            });
        };
        let bad = |reason: String| TlsError::File {
            field: field.clone(),
            file: cert
                .ocsp_staple
                .as_ref()
                .map(source_name)
                .unwrap_or_default(),
            reason,
        };
        let response =
            ocsp::parse(&der).map_err(|e| bad(format!("not a usable DER OCSP response: {e}")))?;
        let serial = leaf.serial_number().to_bn().map_err(ssl_err)?;
        if response.serial_value() != (serial.is_negative(), serial.to_vec()) {
            return Err(bad(
                "OCSP response does not match its TLS certificate (another serial number)".into(),
            ));
        }
        let (this_update, next_update) = (response.this_update, response.next_update);
        if unix_now() < this_update {
            tracing::warn!(
                field,
                this_update,
                "OCSP Response thisUpdate field is set in the future"
            );
        }
        Ok(CertOcsp {
            staple: Some(Staple {
                der,
                this_update,
                next_update,
            }),
            must_staple,
        })
    }

    fn state(&self, now: i64) -> StapleState {
        match &self.staple {
            None => StapleState::Absent,
            Some(s) if ocsp::is_expired(s.next_update, now) => StapleState::Expired,
            Some(_) => StapleState::Valid,
        }
    }

    /// The action for one ClientHello at `now` (seconds since the epoch).
    pub(crate) fn action(
        &self,
        policy: OcspStaplePolicy,
        client_asked: bool,
        now: i64,
    ) -> StapleAction {
        staple_action(policy, self.must_staple, self.state(now), client_asked)
    }

    /// The response to staple.
    pub(crate) fn der(&self) -> Option<&[u8]> {
        self.staple.as_ref().map(|s| s.der.as_slice())
    }

    pub(crate) fn details(&self) -> Option<OcspDetails> {
        self.staple.as_ref().map(|s| OcspDetails {
            valid_from: s.this_update,
            expiration: s.next_update,
        })
    }
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use OcspStaplePolicy::*;
    use StapleAction::*;
    use StapleState::*;

    /// Envoy's table (`DefaultTlsCertificateSelector::ocspStapleAction`), every cell.
    #[test]
    fn policy_table() {
        let cases = [
            (LenientStapling, Valid, Staple),
            (LenientStapling, Expired, NoStaple),
            (LenientStapling, Absent, NoStaple),
            (StrictStapling, Valid, Staple),
            (StrictStapling, Expired, Fail),
            (StrictStapling, Absent, NoStaple),
            (MustStaple, Valid, Staple),
            (MustStaple, Expired, Fail),
            (MustStaple, Absent, Fail),
        ];
        for (policy, state, want) in cases {
            assert_eq!(
                staple_action(policy, false, state, true),
                want,
                "{policy:?} {state:?}"
            );
            assert_eq!(
                staple_action(policy, false, state, false),
                ClientNotCapable,
                "{policy:?} {state:?}, not asked"
            );
            // A must-staple certificate is served as under MUST_STAPLE.
            let must = cases
                .iter()
                .find(|c| c.0 == MustStaple && c.1 == state)
                .map(|c| c.2);
            assert_eq!(Some(staple_action(policy, true, state, true)), must);
        }
    }

    #[test]
    fn counters_move_as_envoys() {
        let store = Store::new();
        let stats = OcspStats::new(&store, "listener.x.");
        for (asked, action) in [
            (true, Staple),
            (true, NoStaple),
            (true, Fail),
            (false, ClientNotCapable),
        ] {
            stats.record(asked, action);
        }
        let get = |n: &str| {
            store
                .counter_value(&format!("listener.x.ssl.ocsp_staple_{n}"))
                .unwrap_or(u64::MAX)
        };
        assert_eq!(
            [
                get("requests"),
                get("responses"),
                get("omitted"),
                get("failed")
            ],
            [3, 1, 1, 1]
        );
    }
}

#[cfg(test)]
mod load_tests {
    use boring::x509::X509;
    use quickshake_config::DataSource;

    use super::*;

    const GOOD: &[u8] = include_bytes!("../../../testdata/ocsp/good-serial-1001.der");
    const PLAIN_CERT: &[u8] = include_bytes!("../../../testdata/ocsp/plain.cert.der");
    const MUST_STAPLE_CERT: &[u8] = include_bytes!("../../../testdata/ocsp/must-staple.cert.der");
    /// The good response's nextUpdate (2026-11-25T04:03:04Z).
    const NEXT_UPDATE: i64 = 1_795_579_384;

    fn load(
        cert_der: &[u8],
        staple: Option<&[u8]>,
        policy: OcspStaplePolicy,
    ) -> Result<CertOcsp, TlsError> {
        let cert = TlsCertificate {
            path: "tls_certificates[0]".into(),
            certificate_chain: DataSource::InlineString(String::new()),
            private_key: None,
            private_key_provider: None,
            watched_directory: None,
            ocsp_staple: staple.map(|s| DataSource::InlineBytes(s.to_vec())),
        };
        let leaf = X509::from_der(cert_der).expect("test certificate");
        CertOcsp::load(&cert, &leaf, policy)
    }

    fn message(r: Result<CertOcsp, TlsError>) -> String {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_matching_staple_loads_and_expires() {
        let o = load(PLAIN_CERT, Some(GOOD), OcspStaplePolicy::StrictStapling).expect("loads");
        assert_eq!(o.der(), Some(GOOD));
        assert_eq!(
            o.details(),
            Some(OcspDetails {
                valid_from: NEXT_UPDATE - 86_400,
                expiration: Some(NEXT_UPDATE)
            })
        );
        let strict = OcspStaplePolicy::StrictStapling;
        assert_eq!(o.action(strict, true, NEXT_UPDATE), StapleAction::Staple);
        assert_eq!(o.action(strict, true, NEXT_UPDATE + 1), StapleAction::Fail);
        assert_eq!(
            o.action(strict, false, NEXT_UPDATE + 1),
            StapleAction::ClientNotCapable
        );
    }

    #[test]
    fn load_errors_name_the_field() {
        let e = message(load(PLAIN_CERT, None, OcspStaplePolicy::MustStaple));
        assert!(e.starts_with("tls_certificates[0].ocsp_staple: "), "{e}");
        assert!(e.contains("Required OCSP response is missing"), "{e}");
        let e = message(load(
            MUST_STAPLE_CERT,
            None,
            OcspStaplePolicy::LenientStapling,
        ));
        assert!(
            e.contains("OCSP response is required for must-staple certificate"),
            "{e}"
        );
        let e = message(load(
            MUST_STAPLE_CERT,
            Some(GOOD),
            OcspStaplePolicy::LenientStapling,
        ));
        assert!(
            e.starts_with(
                "tls_certificates[0].ocsp_staple: <inline>: OCSP response does not match"
            ),
            "{e}"
        );
        let e = message(load(
            PLAIN_CERT,
            Some(b"garbage"),
            OcspStaplePolicy::LenientStapling,
        ));
        assert!(e.contains("not a usable DER OCSP response"), "{e}");
    }

    #[test]
    fn empty_staple_bytes_are_no_staple() {
        let o = load(PLAIN_CERT, Some(b""), OcspStaplePolicy::LenientStapling).expect("loads");
        assert_eq!(o.der(), None);
        assert_eq!(
            o.action(OcspStaplePolicy::LenientStapling, true, 0),
            StapleAction::NoStaple
        );
        assert!(load(PLAIN_CERT, Some(b""), OcspStaplePolicy::MustStaple).is_err());
    }

    #[test]
    fn a_must_staple_certificate_is_served_as_must_staple() {
        let o = CertOcsp {
            staple: None,
            must_staple: true,
        };
        assert_eq!(
            o.action(OcspStaplePolicy::LenientStapling, true, 0),
            StapleAction::Fail
        );
    }
}
