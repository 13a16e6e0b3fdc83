//! Building BoringSSL server contexts for one filter chain's `DownstreamTlsContext`.
//!
//! Envoy's design, kept: one `SSL_CTX` per certificate, configured identically; the first is the
//! one a connection starts on, and BoringSSL's early (select-certificate) callback switches to
//! another certificate's context when the ClientHello says the client cannot use the first
//! (an ECDSA certificate for a client that offers no ECDSA signature algorithm, and the reverse).
//! The same callback does OCSP stapling (`ocsp.rs`): a certificate whose staple the policy would
//! fail the handshake on is passed over for one that can serve, as Envoy's selector does.

use std::sync::Arc;

use boring::pkey::{PKey, Private};
use boring::ssl::{
    AlpnError, ClientHello, ExtensionType, SelectCertError, Ssl, SslContext, SslContextBuilder,
    SslMethod, SslOptions, SslSessionCacheMode, SslVerifyMode, SslVersion,
};
use boring::x509::store::X509StoreBuilder;
use boring::x509::{X509Ref, X509};
use quickshake_config::{
    read_data_source, DownstreamTls, OcspStaplePolicy, SanMatcher, TlsCertificate, TlsVersion,
};
use quickshake_keyprovider::{KeySetup, ProviderMethod, Providers};

use crate::alpn::select_alpn;
use crate::certs::{
    ca_store_from_pem, load_chain, load_key, source_name, CertInfo, KeyKind, PemError,
};
use crate::error::TlsError;
use crate::key_share::{u16_list, KeyShareBatching};
use crate::ocsp::{unix_now, CertOcsp, OcspDetails, OcspStats, StapleAction};
use crate::session_id::{pem_certificates, session_context_id, SessionContextId};
use crate::tickets::{configured_ticket_keys, QuicTickets, TicketKeys};

/// Envoy's default downstream cipher list for TLS 1.2 (TLS 1.3 suites are not configurable).
pub const DEFAULT_CIPHERS: &str = "[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]:\
[ECDHE-RSA-AES128-GCM-SHA256|ECDHE-RSA-CHACHA20-POLY1305]:\
ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384";
/// Default key-exchange groups: what current browsers and curl offer.
pub const DEFAULT_CURVES: &str = "X25519MLKEM768:X25519:P-256";

const ECDSA_SECP256R1_SHA256: u16 = 0x0403;
const SECP256R1: u16 = 23;

/// One certificate as loaded, for `/certs` and `/config_dump`.
#[derive(Debug, Clone)]
pub struct LoadedCert {
    pub info: CertInfo,
    /// `None` for an in-process key; else the provider's description (name, engine, fallback).
    pub provider: Option<String>,
    /// The `ocsp_staple`'s validity window, when it has one.
    pub ocsp: Option<OcspDetails>,
}

/// The TLS side of one filter chain: ready to create a server `Ssl` per connection.
pub struct ChainTls {
    primary: SslContext,
    /// The early callback's state, shared with the primary context's callback so a QUIC
    /// listener's dispatching context can run it too ([`ChainTls::select_quic`]).
    selector: Arc<Selector>,
    /// The key-exchange groups (`ecdh_curves`), for a QUIC connection's `Ssl`, which takes
    /// them from the dispatching context it was created from.
    curves: String,
    /// The client certificate's SAN matchers, for a QUIC connection's `Ssl` (see
    /// [`ChainTls::select_quic`]).
    san_matchers: Option<Arc<[SanMatcher]>>,
    pub certs: Vec<LoadedCert>,
}

impl ChainTls {
    /// A fresh server-side `Ssl` for one connection.
    pub fn new_ssl(&self) -> Result<Ssl, boring::error::ErrorStack> {
        let mut ssl = Ssl::new(&self.primary)?;
        crate::tickets::prepare_ssl(&mut ssl);
        Ok(ssl)
    }

    /// Serve a QUIC connection's ClientHello with this chain (its filter chain was chosen by
    /// SNI): switch the connection to this chain's contexts, then pick the certificate as
    /// [`ChainTls::new_ssl`]'s connections do.
    ///
    /// Switching the context brings its certificates, keys and client-certificate trust store
    /// (BoringSSL copies the context's `CERT`), not what an `Ssl` copies from its context when
    /// it is created: the groups, the verify mode (`require_client_certificate`) and the session
    /// tickets' keys (read from the context the `Ssl` was created from, the dispatcher's) are
    /// set here from the chain; the tickets' keys are the chain's through its contexts' ticket
    /// key callbacks (`tickets::QuicTickets`).
    pub(crate) fn select_quic(&self, hello: &mut ClientHello<'_>) -> Result<(), SelectCertError> {
        let ssl = hello.ssl_mut();
        ssl.set_ssl_context(&self.primary)
            .map_err(|_| SelectCertError::ERROR)?;
        ssl.set_curves_list(&self.curves)
            .map_err(|_| SelectCertError::ERROR)?;
        // `set_verify` replaces the verify callback too: the SAN matchers' comes back with it.
        match &self.san_matchers {
            Some(m) => ssl.set_verify_callback(
                self.primary.verify_mode(),
                crate::san::verify_callback(m.clone()),
            ),
            None => ssl.set_verify(self.primary.verify_mode()),
        }
        self.selector.select(hello)
    }
}

impl std::fmt::Debug for ChainTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainTls")
            .field("certs", &self.certs)
            .finish()
    }
}

/// Build the contexts for one `DownstreamTlsContext`; `server_names` are its filter chain's
/// `filter_chain_match.server_names` (part of the session ID context, as in Envoy); handshakes
/// count OCSP stapling in `ocsp_stats`.
pub fn build_chain_tls(
    tls: &DownstreamTls,
    server_names: &[String],
    providers: &Providers,
    stat_scope: &str,
    ocsp_stats: &OcspStats,
) -> Result<ChainTls, TlsError> {
    // Ticket keys are read once for the chain (files, SDS file) and shared by its contexts.
    let keys = if tls.disable_stateless_session_resumption {
        None
    } else {
        configured_ticket_keys(tls)?
    };
    let tickets = keys.as_ref();
    let mut built = Vec::with_capacity(tls.certificates.len());
    for cert in &tls.certificates {
        built.push(build_cert_context(
            tls, cert, tickets, providers, stat_scope,
        )?);
    }
    for sds in &tls.sds_certificates {
        let cert = quickshake_config::load_sds_tls_certificate(sds)?;
        built.push(build_cert_context(
            tls, &cert, tickets, providers, stat_scope,
        )?);
    }
    if built.is_empty() {
        return Err(TlsError::Invalid {
            field: format!("{}.common_tls_context.tls_certificates", tls.path),
            reason: "a DownstreamTlsContext needs at least one certificate".into(),
        });
    }
    let session_id = chain_session_id(tls, &built, server_names)?;
    for b in &mut built {
        b.builder
            .set_session_id_context(&session_id)
            .map_err(|e| TlsError::Ssl {
                field: tls.path.clone(),
                source: e,
            })?;
    }
    let certs: Vec<LoadedCert> = built.iter().map(|b| b.loaded.clone()).collect();
    let mut iter = built.into_iter();
    let first = iter.next().ok_or_else(|| TlsError::Invalid {
        field: tls.path.clone(),
        reason: "no certificate".into(),
    })?;
    let mut candidates = vec![Candidate {
        kind: first.loaded.info.key_kind,
        ctx: None,
        ocsp: first.ocsp,
    }];
    candidates.extend(iter.map(|b| Candidate {
        kind: b.loaded.info.key_kind,
        ctx: Some(b.builder.build()),
        ocsp: b.ocsp,
    }));
    // Always installed, even for one certificate without a staple: Envoy counts every
    // ClientHello that asks for a staple (`ocsp_staple_requests`, `ocsp_staple_omitted`).
    let selector = Arc::new(Selector {
        candidates,
        policy: tls.ocsp_staple_policy,
        stats: ocsp_stats.clone(),
    });
    let mut primary = first.builder;
    let own = selector.clone();
    // TLS 1.3 over TCP: the first certificate's provider may batch the key exchange too
    // (`key_share`); QUIC connections run the dispatching context's callback instead.
    let tls13 = tls.params.max_version.unwrap_or(TlsVersion::Tls1_3) == TlsVersion::Tls1_3;
    let kex = first
        .kex
        .as_ref()
        .filter(|_| tls13 && !tls.quic)
        .and_then(|m| KeyShareBatching::new(m, &curves_list(tls), !tls.prefer_client_ciphers));
    match kex {
        Some(kex) => primary
            .set_async_select_certificate_callback(kex.callback(move |hello| own.select(hello))),
        None => primary.set_select_certificate_callback(move |mut hello| own.select(&mut hello)),
    }
    Ok(ChainTls {
        primary: primary.build(),
        selector,
        curves: curves_list(tls),
        san_matchers: san_matchers(tls),
        certs,
    })
}

struct BuiltCert {
    builder: SslContextBuilder,
    /// The certificate's provider, for batching the key exchange (`key_share`).
    kex: Option<ProviderMethod>,
    leaf: X509,
    loaded: LoadedCert,
    ocsp: CertOcsp,
}

/// Envoy's session ID context for the chain (see [`crate::session_id`]).
fn chain_session_id(
    tls: &DownstreamTls,
    built: &[BuiltCert],
    server_names: &[String],
) -> Result<SessionContextId, TlsError> {
    let ca = match &tls.trusted_ca {
        Some(ds) => {
            let field = format!(
                "{}.common_tls_context.validation_context.trusted_ca",
                tls.path
            );
            Some(pem_certificates(&read_data_source(ds, &field)?))
        }
        None => None,
    };
    let leaves: Vec<&X509Ref> = built.iter().map(|b| b.leaf.as_ref()).collect();
    let id = session_context_id(&leaves, ca.as_deref(), server_names, &tls.path)?;
    if tls.san_matchers.is_empty() {
        return Ok(id);
    }
    // Envoy hashes each SAN matcher (its protobuf's hash) into the context too, so a session
    // is not resumed past other matchers; quickshake hashes their description instead (the
    // value then differs from Envoy's, which only matters within one process anyway).
    let mut text = id.to_vec();
    text.extend(format!("{:?}", tls.san_matchers).bytes());
    let digest = boring::hash::hash(boring::hash::MessageDigest::sha256(), &text).map_err(|e| {
        TlsError::Ssl {
            field: tls.path.clone(),
            source: e,
        }
    })?;
    let mut out = [0u8; 32];
    out.copy_from_slice(&digest);
    Ok(out)
}

fn build_cert_context(
    tls: &DownstreamTls,
    cert: &TlsCertificate,
    tickets: Option<&Arc<TicketKeys>>,
    providers: &Providers,
    stat_scope: &str,
) -> Result<BuiltCert, TlsError> {
    let ssl_err = |e: boring::error::ErrorStack| TlsError::Ssl {
        field: cert.path.clone(),
        source: e,
    };
    let chain = load_chain(
        &cert.certificate_chain,
        &format!("{}.certificate_chain", cert.path),
    )?;
    let public = chain.leaf.public_key().map_err(ssl_err)?;
    let ocsp = CertOcsp::load(cert, &chain.leaf, tls.ocsp_staple_policy)?;
    let mut b = SslContextBuilder::new(SslMethod::tls()).map_err(ssl_err)?;
    configure_common(&mut b, tls, tickets)?;
    b.set_certificate(&chain.leaf).map_err(ssl_err)?;
    for extra in chain.intermediates {
        b.add_extra_chain_cert(extra).map_err(ssl_err)?;
    }
    let mut kex = None;
    let provider = match &cert.private_key_provider {
        None => {
            let key = plain_key(cert, &public)?;
            b.set_private_key(&key).map_err(ssl_err)?;
            None
        }
        Some(cfg) => {
            let outer = match &cert.private_key {
                Some(ds) => Some(load_key(
                    ds,
                    &format!("{}.private_key", cert.path),
                    &public,
                )?),
                None => None,
            };
            // A QUIC chain joins the provider of a TCP listener on the same address.
            let setup = if tls.quic {
                providers.setup_joining(cfg, outer, &public, stat_scope)?
            } else {
                providers.setup(cfg, outer, &public, stat_scope)?
            };
            match setup {
                KeySetup::Inline { key, description } => {
                    b.set_private_key(&key).map_err(ssl_err)?;
                    Some(description)
                }
                KeySetup::Provider {
                    method,
                    description,
                } => {
                    if !method.rsa_key_exchange() {
                        // The key's token cannot decrypt with raw RSA (a PKCS#11 provider
                        // said so, logged): this certificate offers no RSA key exchange.
                        b.set_cipher_list(&without_rsa_key_exchange(&cipher_list(tls)))
                            .map_err(ssl_err)?;
                    }
                    kex = Some(method.clone());
                    b.set_async_private_key_method(method);
                    Some(description)
                }
            }
        }
    };
    Ok(BuiltCert {
        builder: b,
        kex,
        leaf: chain.leaf,
        loaded: LoadedCert {
            info: chain.info,
            provider,
            ocsp: ocsp.details(),
        },
        ocsp,
    })
}

fn plain_key(
    cert: &TlsCertificate,
    public: &PKey<boring::pkey::Public>,
) -> Result<PKey<Private>, TlsError> {
    let ds = cert.private_key.as_ref().ok_or_else(|| TlsError::Invalid {
        field: format!("{}.private_key", cert.path),
        reason: "missing: a certificate needs private_key or private_key_provider".into(),
    })?;
    load_key(ds, &format!("{}.private_key", cert.path), public)
}

/// The configured TLS 1.2 cipher list (`tls_params.cipher_suites`, else Envoy's default).
fn cipher_list(tls: &DownstreamTls) -> String {
    if tls.params.cipher_suites.is_empty() {
        DEFAULT_CIPHERS.to_string()
    } else {
        tls.params.cipher_suites.join(":")
    }
}

/// A cipher list without the RSA key exchange suites. BoringSSL refuses `!kRSA` beside
/// equal-preference groups (`[A|B]`), so a list with groups loses its non-ECDHE names instead.
fn without_rsa_key_exchange(list: &str) -> String {
    if !list.contains('[') {
        return format!("{list}:!kRSA");
    }
    let keep = |name: &str| name.starts_with("ECDHE") || name.contains("PSK");
    list.split(':')
        .filter_map(
            |item| match item.strip_prefix('[').and_then(|g| g.strip_suffix(']')) {
                Some(group) => {
                    let names: Vec<&str> = group.split('|').filter(|n| keep(n)).collect();
                    (!names.is_empty()).then(|| format!("[{}]", names.join("|")))
                }
                None => keep(item).then(|| item.to_string()),
            },
        )
        .collect::<Vec<_>>()
        .join(":")
}

/// Settings shared by every certificate's context of a chain; `tickets` are the chain's session
/// ticket keys.
fn configure_common(
    b: &mut SslContextBuilder,
    tls: &DownstreamTls,
    tickets: Option<&Arc<TicketKeys>>,
) -> Result<(), TlsError> {
    let field = |name: &str| format!("{}.common_tls_context.{name}", tls.path);
    let bad = |name: &str, e: boring::error::ErrorStack| TlsError::Invalid {
        field: field(name),
        reason: format!("rejected by BoringSSL: {e}"),
    };
    let p = &tls.params;
    b.set_min_proto_version(Some(version(p.min_version.unwrap_or(TlsVersion::Tls1_2))))
        .map_err(|e| bad("tls_params.tls_minimum_protocol_version", e))?;
    b.set_max_proto_version(Some(version(p.max_version.unwrap_or(TlsVersion::Tls1_3))))
        .map_err(|e| bad("tls_params.tls_maximum_protocol_version", e))?;
    let ciphers = cipher_list(tls);
    b.set_cipher_list(&ciphers)
        .map_err(|e| bad("tls_params.cipher_suites", e))?;
    if !tls.prefer_client_ciphers {
        // Envoy's default: the server's order (equal-preference groups `[A|B]` still follow the
        // client within the group). Sessions resume only under the cipher they were made with,
        // so a fleet of Envoy and quickshake must choose alike.
        b.set_options(SslOptions::CIPHER_SERVER_PREFERENCE);
    }
    b.set_curves_list(&curves_list(tls))
        .map_err(|e| bad("tls_params.ecdh_curves", e))?;
    if tls.quic {
        // QUIC is TLS 1.3 and HTTP/3 only (RFC 9001 section 4.2, RFC 9114 section 3.1).
        b.set_min_proto_version(Some(SslVersion::TLS1_3))
            .map_err(|e| bad("tls_params.tls_minimum_protocol_version", e))?;
        let alpn = if tls.alpn_protocols.is_empty() {
            vec!["h3".to_string()]
        } else {
            tls.alpn_protocols.clone()
        };
        configure_alpn(b, &alpn);
    } else {
        configure_alpn(b, &tls.alpn_protocols);
    }
    configure_resumption(b, tls, tickets);
    configure_client_auth(b, tls)?;
    Ok(())
}

/// The chain's key-exchange groups: `ecdh_curves`, else [`DEFAULT_CURVES`].
fn curves_list(tls: &DownstreamTls) -> String {
    if tls.params.ecdh_curves.is_empty() {
        DEFAULT_CURVES.to_string()
    } else {
        tls.params.ecdh_curves.join(":")
    }
}

fn version(v: TlsVersion) -> SslVersion {
    match v {
        TlsVersion::Tls1_0 => SslVersion::TLS1,
        TlsVersion::Tls1_1 => SslVersion::TLS1_1,
        TlsVersion::Tls1_2 => SslVersion::TLS1_2,
        TlsVersion::Tls1_3 => SslVersion::TLS1_3,
    }
}

fn configure_alpn(b: &mut SslContextBuilder, protocols: &[String]) {
    if protocols.is_empty() {
        return;
    }
    let ours: Vec<Vec<u8>> = protocols.iter().map(|p| p.as_bytes().to_vec()).collect();
    b.set_alpn_select_callback(move |_ssl, client| {
        select_alpn(&ours, client).ok_or(AlpnError::NOACK)
    });
}

/// Session cache and tickets. The session ID context is set once every certificate of the
/// chain is loaded ([`chain_session_id`]).
fn configure_resumption(
    b: &mut SslContextBuilder,
    tls: &DownstreamTls,
    tickets: Option<&Arc<TicketKeys>>,
) {
    if tls.disable_stateful_session_resumption {
        b.set_session_cache_mode(SslSessionCacheMode::OFF);
    } else {
        b.set_session_cache_mode(SslSessionCacheMode::SERVER);
    }
    if let Some(timeout) = tls.session_timeout {
        crate::tickets::set_session_timeout(b, timeout);
    }
    if tls.quic {
        // Every QUIC chain context has one (see `QuicTickets`), even without configured keys.
        let quic = match tickets {
            _ if tls.disable_stateless_session_resumption => QuicTickets::Off,
            Some(keys) => QuicTickets::Keys(Arc::clone(keys)),
            None => QuicTickets::Process,
        };
        crate::tickets::install_quic_tickets(b, quic);
    }
    if tls.disable_stateless_session_resumption {
        b.set_options(SslOptions::NO_TICKET);
    } else if let Some(keys) = tickets.filter(|_| !tls.quic) {
        crate::tickets::install_ticket_keys(b, keys);
    }
}

fn configure_client_auth(b: &mut SslContextBuilder, tls: &DownstreamTls) -> Result<(), TlsError> {
    let Some(ca) = &tls.trusted_ca else {
        if tls.require_client_certificate {
            return Err(TlsError::Invalid {
                field: format!("{}.require_client_certificate", tls.path),
                reason: "needs common_tls_context.validation_context.trusted_ca".into(),
            });
        }
        return Ok(());
    };
    let field = format!(
        "{}.common_tls_context.validation_context.trusted_ca",
        tls.path
    );
    let pem = read_data_source(ca, &field)?;
    let store = match ca_store_from_pem(&pem) {
        Ok(store) => store,
        // A list with no certificate has always been accepted here (an empty store: every
        // client certificate fails verification). Refusing it at load, as the upstream side
        // does, would be a behaviour change of its own.
        Err(PemError::NoCertificate) => X509StoreBuilder::new()
            .map(X509StoreBuilder::build)
            .map_err(|e| TlsError::Ssl {
                field: field.clone(),
                source: e,
            })?,
        Err(PemError::Parse(e)) => {
            return Err(TlsError::File {
                field: field.clone(),
                file: source_name(ca),
                reason: format!("not a PEM certificate list: {e}"),
            })
        }
        Err(PemError::Store(e)) => {
            return Err(TlsError::Ssl {
                field: field.clone(),
                source: e,
            })
        }
    };
    b.set_verify_cert_store(store)
        .map_err(|e| TlsError::Ssl { field, source: e })?;
    let mode = if tls.require_client_certificate {
        SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT
    } else {
        SslVerifyMode::PEER
    };
    match san_matchers(tls) {
        Some(m) => b.set_verify_callback(mode, crate::san::verify_callback(m)),
        None => b.set_verify(mode),
    }
    Ok(())
}

/// The client certificate's SAN matchers (`match_typed_subject_alt_names`), when any.
fn san_matchers(tls: &DownstreamTls) -> Option<Arc<[SanMatcher]>> {
    (tls.trusted_ca.is_some() && !tls.san_matchers.is_empty())
        .then(|| tls.san_matchers.clone().into())
}

/// One certificate a connection can be served with: the primary (`ctx: None`, the context the
/// connection starts on) or an alternative.
struct Candidate {
    kind: KeyKind,
    ctx: Option<SslContext>,
    ocsp: CertOcsp,
}

/// The early (select-certificate) callback's state.
struct Selector {
    candidates: Vec<Candidate>,
    policy: OcspStaplePolicy,
    stats: OcspStats,
}

impl Selector {
    /// Pick the certificate for this ClientHello, count and apply its OCSP action.
    fn select(&self, hello: &mut ClientHello<'_>) -> Result<(), SelectCertError> {
        let wants_ecdsa = client_offers_ecdsa(hello);
        let asked = hello.get_extension(ExtensionType::STATUS_REQUEST).is_some();
        let now = if asked { unix_now() } else { 0 };
        let action = |c: &Candidate| c.ocsp.action(self.policy, asked, now);
        let i = choose_certificate(&self.candidates, wants_ecdsa, |c| {
            (c.kind, action(c) != StapleAction::Fail)
        });
        let Some(chosen) = self.candidates.get(i) else {
            return Err(SelectCertError::ERROR);
        };
        let act = action(chosen);
        self.stats.record(asked, act);
        if act == StapleAction::Fail {
            return Err(SelectCertError::ERROR);
        }
        let ssl = hello.ssl_mut();
        if let Some(ctx) = &chosen.ctx {
            // Before the staple: switching contexts replaces the connection's certificate
            // settings, the OCSP response with them.
            ssl.set_ssl_context(ctx)
                .map_err(|_| SelectCertError::ERROR)?;
        }
        if act == StapleAction::Staple {
            if let Some(der) = chosen.ocsp.der() {
                ssl.set_ocsp_status(der)
                    .map_err(|_| SelectCertError::ERROR)?;
            }
        }
        Ok(())
    }
}

/// Which certificate (an index into `certs`, the primary first) serves a client, given each
/// one's key kind and whether its OCSP action lets it serve (`usable`):
/// 1. the first usable certificate of the kind the client prefers (ECDSA P-256 when it can use
///    it, else RSA);
/// 2. else the primary, if usable;
/// 3. else, for an ECDSA-capable client, the first usable RSA certificate (Envoy's fallback
///    candidate);
/// 4. else the primary, whose OCSP action then fails the handshake.
///
/// Without OCSP every certificate is usable and this is the plain key-kind choice: the primary
/// unless the client cannot use it and an alternative of the kind it prefers exists.
fn choose_certificate<T>(
    certs: &[T],
    wants_ecdsa: bool,
    facts: impl Fn(&T) -> (KeyKind, bool),
) -> usize {
    let preferred = if wants_ecdsa {
        KeyKind::EcdsaP256
    } else {
        KeyKind::Rsa
    };
    let first = |want: &dyn Fn(KeyKind) -> bool| {
        certs.iter().position(|c| {
            let (kind, usable) = facts(c);
            usable && want(kind)
        })
    };
    if let Some(i) = first(&|k| k == preferred) {
        return i;
    }
    if certs.first().is_some_and(|c| facts(c).1) {
        return 0;
    }
    if wants_ecdsa {
        if let Some(i) = first(&|k| k == KeyKind::Rsa) {
            return i;
        }
    }
    0
}

/// Does the ClientHello allow an ECDSA P-256 certificate? It must list
/// `ecdsa_secp256r1_sha256` among its signature algorithms, and either offer TLS 1.3 or, for
/// TLS 1.2, an ECDHE-ECDSA cipher suite (a client offering only RSA key exchange or ECDHE-RSA
/// suites needs the RSA certificate).
fn client_offers_ecdsa(hello: &ClientHello<'_>) -> bool {
    let Some(ext) = hello.get_extension(ExtensionType::SIGNATURE_ALGORITHMS) else {
        return false;
    };
    if !u16_list(ext).any(|alg| alg == ECDSA_SECP256R1_SHA256) {
        return false;
    }
    let tls13 = hello
        .get_extension(ExtensionType::SUPPORTED_VERSIONS)
        .and_then(|v| v.split_first())
        .is_some_and(|(_, versions)| versions.chunks_exact(2).any(|c| c == [0x03, 0x04]));
    if tls13 {
        return true;
    }
    // TLS 1.2 also needs the client to accept P-256 (RFC 8422 section 5.1).
    let p256 = hello
        .get_extension(ExtensionType::SUPPORTED_GROUPS)
        .is_some_and(|g| u16_list(g).any(|group| group == SECP256R1));
    p256 && hello
        .ciphers()
        .chunks_exact(2)
        .any(|c| is_ecdhe_ecdsa(u16::from_be_bytes([c[0], c[1]])))
}

/// The entries of a TLS `u16` list with a two-byte length prefix.
/// TLS 1.2 ECDHE-ECDSA cipher suites BoringSSL implements.
fn is_ecdhe_ecdsa(suite: u16) -> bool {
    matches!(
        suite,
        0xc009 | 0xc00a | 0xc02b | 0xc02c | 0xcca9 | 0xc023 | 0xc024
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use KeyKind::{EcdsaP256 as Ec, Rsa};

    fn choose(certs: &[(KeyKind, bool)], wants_ecdsa: bool) -> usize {
        choose_certificate(certs, wants_ecdsa, |c| *c)
    }

    #[test]
    fn rsa_key_exchange_is_left_out() {
        assert_eq!(
            without_rsa_key_exchange("ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA"),
            "ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA:!kRSA"
        );
        assert_eq!(
            without_rsa_key_exchange("[ECDHE-RSA-AES128-GCM-SHA256|AES128-GCM-SHA256]:[AES128-SHA]:ECDHE-PSK-AES128-CBC-SHA"),
            "[ECDHE-RSA-AES128-GCM-SHA256]:ECDHE-PSK-AES128-CBC-SHA"
        );
    }

    #[test]
    fn key_kind_choice_without_ocsp() {
        assert_eq!(choose(&[(Rsa, true)], true), 0);
        assert_eq!(choose(&[(Rsa, true), (Ec, true)], true), 1);
        assert_eq!(choose(&[(Rsa, true), (Ec, true)], false), 0);
        assert_eq!(choose(&[(Ec, true), (Rsa, true)], false), 1);
        assert_eq!(choose(&[(Ec, true), (Rsa, true)], true), 0);
        assert_eq!(choose(&[(KeyKind::Other, true), (Rsa, true)], true), 0);
    }

    #[test]
    fn a_certificate_whose_staple_fails_is_passed_over() {
        // An ECDSA-capable client: the RSA certificate when the ECDSA one cannot serve.
        assert_eq!(choose(&[(Ec, false), (Rsa, true)], true), 1);
        assert_eq!(choose(&[(Rsa, false), (Ec, false), (Rsa, true)], true), 2);
        // The other ECDSA certificate before any RSA one.
        assert_eq!(choose(&[(Rsa, true), (Ec, false), (Ec, true)], true), 2);
        // An RSA-only client cannot take the ECDSA one: the primary, which fails.
        assert_eq!(choose(&[(Rsa, false), (Ec, true)], false), 0);
        // Nothing can serve: the primary.
        assert_eq!(choose(&[(Ec, false), (Rsa, false)], true), 0);
        assert_eq!(choose(&[], true), 0);
    }
}
