//! `DownstreamTlsContext` and `UpstreamTlsContext`: certificates (inline, parsed by
//! `certificate`, or SDS references, parsed by `sds`), TLS parameters, ALPN, client certificate
//! validation and session resumption settings. Files are not read here.

use crate::certificate::tls_certificate;
use crate::duration::duration;
use crate::model::{
    DataSource, DownstreamTls, OcspStaplePolicy, SanMatcher, SdsSecretRef, TlsCertificate,
    TlsParams, TlsVersion, UpstreamTls, ValidationContext,
};
use crate::sds::{secret_ref, SecretRef};
use crate::static_secrets::{
    static_session_ticket_keys, static_tls_certificate, static_trusted_ca,
};
use crate::ticket_keys::session_ticket_keys;
use crate::validation::validation_context;
use crate::walk::{Node, Obj, Result};

const DOWNSTREAM_TLS_CONTEXT: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";
pub(crate) const UPSTREAM_TLS_CONTEXT: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";

pub(crate) fn downstream_tls_context(node: &Node<'_>) -> Result<DownstreamTls> {
    downstream_tls_fields(node, true)
}

/// A `DownstreamTlsContext` embedded as a plain message (no `@type`), as
/// `QuicDownstreamTransport.downstream_tls_context` is.
pub(crate) fn embedded_downstream_tls_context(node: &Node<'_>) -> Result<DownstreamTls> {
    downstream_tls_fields(node, false)
}

fn downstream_tls_fields(node: &Node<'_>, typed: bool) -> Result<DownstreamTls> {
    let fields: &[&str] = &[
        "common_tls_context",
        "require_client_certificate",
        "session_ticket_keys",
        "disable_stateless_session_resumption",
        "disable_stateful_session_resumption",
        "session_ticket_keys_sds_secret_config",
        "prefer_client_ciphers",
        "session_timeout",
        "ocsp_staple_policy",
    ];
    let unsupported: &[&str] = &["require_sni", "full_scan_certs_on_sni_mismatch"];
    let o = if typed {
        node.typed(DOWNSTREAM_TLS_CONTEXT, fields, unsupported)?
    } else {
        node.obj_with(fields, unsupported)?
    };
    let require_client_certificate = o.bool_or_false("require_client_certificate")?;
    let prefer_client_ciphers = o.bool_or_false("prefer_client_ciphers")?;
    let session_timeout = match o.get("session_timeout") {
        Some(n) => {
            let d = duration(&n)?;
            if d.as_secs() > u64::from(u32::MAX) {
                return Err(n.err("must be less than 2^32 seconds"));
            }
            Some(d)
        }
        None => None,
    };
    let disable_stateless_session_resumption =
        o.bool_or_false("disable_stateless_session_resumption")?;
    let disable_stateful_session_resumption =
        o.bool_or_false("disable_stateful_session_resumption")?;
    let ocsp_staple_policy = match o.get("ocsp_staple_policy") {
        Some(p) => ocsp_staple_policy(&p)?,
        None => OcspStaplePolicy::default(),
    };

    // Envoy's oneof `session_ticket_keys_type`: keys inline, keys from SDS, or tickets off.
    let ticket_fields: Vec<&str> = o
        .present(&[
            "session_ticket_keys",
            "session_ticket_keys_sds_secret_config",
            "disable_stateless_session_resumption",
        ])
        .into_iter()
        .filter(|k| o.get(k).is_some_and(|n| n.v.as_bool() != Some(false)))
        .collect();
    if let [first, second, ..] = ticket_fields.as_slice() {
        return Err(o.req(second)?.err(format!(
            "cannot be combined with {} (one of session_ticket_keys, \
             session_ticket_keys_sds_secret_config, disable_stateless_session_resumption)",
            o.req(first)?.path
        )));
    }
    let mut session_ticket_keys = match o.get("session_ticket_keys") {
        Some(stk) => session_ticket_keys(&stk)?,
        None => Vec::new(),
    };
    let mut session_ticket_keys_sds = None;
    if let Some(n) = o.get("session_ticket_keys_sds_secret_config") {
        match secret_ref(&n)? {
            SecretRef::Sds(r) => session_ticket_keys_sds = Some(r),
            SecretRef::Static(name) => session_ticket_keys = static_session_ticket_keys(&n, &name)?,
        }
    }

    let ctx_node = o.req("common_tls_context")?;
    let ctx = common_tls_context(&ctx_node)?;
    if require_client_certificate && ctx.trusted_ca.is_none() {
        return Err(o
            .req("require_client_certificate")?
            .err("requires common_tls_context.validation_context.trusted_ca"));
    }
    Ok(DownstreamTls {
        path: node.path.clone(),
        certificates: ctx.certificates,
        sds_certificates: ctx.sds_certificates,
        params: ctx.params,
        alpn_protocols: ctx.alpn_protocols,
        require_client_certificate,
        trusted_ca: ctx.trusted_ca,
        san_matchers: ctx.san_matchers,
        session_ticket_keys,
        session_ticket_keys_sds,
        prefer_client_ciphers,
        session_timeout,
        disable_stateless_session_resumption,
        disable_stateful_session_resumption,
        ocsp_staple_policy,
        quic: false,
    })
}

/// `ocsp_staple_policy`: the enum's name (any case, as Envoy's JSON parser takes it) or number.
fn ocsp_staple_policy(node: &Node<'_>) -> Result<OcspStaplePolicy> {
    let policy = match (node.v.as_str(), node.v.as_u64()) {
        (Some(name), _) => match name.to_ascii_uppercase().as_str() {
            "LENIENT_STAPLING" => Some(OcspStaplePolicy::LenientStapling),
            "STRICT_STAPLING" => Some(OcspStaplePolicy::StrictStapling),
            "MUST_STAPLE" => Some(OcspStaplePolicy::MustStaple),
            _ => None,
        },
        (None, Some(0)) => Some(OcspStaplePolicy::LenientStapling),
        (None, Some(1)) => Some(OcspStaplePolicy::StrictStapling),
        (None, Some(2)) => Some(OcspStaplePolicy::MustStaple),
        _ => None,
    };
    policy.ok_or_else(|| {
        node.err(format!(
            "expected LENIENT_STAPLING, STRICT_STAPLING or MUST_STAPLE, got {}",
            node.v
        ))
    })
}

struct CommonTlsContext {
    certificates: Vec<TlsCertificate>,
    sds_certificates: Vec<SdsSecretRef>,
    params: TlsParams,
    alpn_protocols: Vec<String>,
    trusted_ca: Option<DataSource>,
    san_matchers: Vec<SanMatcher>,
}

/// Real `CommonTlsContext` fields quickshake does not implement ("not supported yet").
const COMMON_TLS_NOT_SUPPORTED: &[&str] = &[
    "tls_certificate_provider_instance",
    "tls_certificate_certificate_provider",
    "tls_certificate_certificate_provider_instance",
    "custom_tls_certificate_selector",
    "combined_validation_context",
    "validation_context_certificate_provider",
    "validation_context_certificate_provider_instance",
    "custom_handshaker",
    "key_log",
];

fn common_tls_context(node: &Node<'_>) -> Result<CommonTlsContext> {
    let o = node.obj_with(
        &[
            "tls_certificates",
            "tls_certificate_sds_secret_configs",
            "tls_params",
            "alpn_protocols",
            "validation_context",
            "validation_context_sds_secret_config",
        ],
        COMMON_TLS_NOT_SUPPORTED,
    )?;
    let mut certificates = Vec::new();
    for c in o.items("tls_certificates") {
        certificates.push(tls_certificate(&c)?);
    }
    let mut sds_certificates = Vec::new();
    for c in o.items("tls_certificate_sds_secret_configs") {
        match secret_ref(&c)? {
            SecretRef::Sds(r) => sds_certificates.push(r),
            SecretRef::Static(name) => certificates.push(static_tls_certificate(&c, &name)?),
        }
    }
    if certificates.is_empty() && sds_certificates.is_empty() {
        return Err(match o.get("tls_certificates") {
            Some(n) => n.err("at least one certificate is required"),
            None => node.err("needs tls_certificates or tls_certificate_sds_secret_configs"),
        });
    }
    let params = match o.get("tls_params") {
        Some(p) => tls_params(&p)?,
        None => TlsParams::default(),
    };
    let alpn_protocols = match o.get("alpn_protocols") {
        Some(a) => alpn(&a)?,
        None => Vec::new(),
    };
    let mut validation = match o.get("validation_context") {
        Some(v) => validation_context(&v)?,
        None => None,
    };
    if let Some(vs) = o.get("validation_context_sds_secret_config") {
        if let Some(v) = o.get("validation_context") {
            return Err(vs.err(format!("cannot be combined with {}", v.path)));
        }
        // A downstream validation context from a static secret only (not from SDS yet).
        match secret_ref(&vs)? {
            SecretRef::Static(name) => validation = Some(static_trusted_ca(&vs, &name)?),
            SecretRef::Sds(_) => {
                return Err(Node::new(vs.v, format!("{}.sds_config", vs.path))
                    .unsupported(Some("a static secret (no sds_config)")))
            }
        }
    }
    Ok(CommonTlsContext {
        certificates,
        sds_certificates,
        params,
        alpn_protocols,
        trusted_ca: validation.as_ref().map(|v| v.trusted_ca.clone()),
        san_matchers: validation.map(|v| v.san_matchers).unwrap_or_default(),
    })
}

fn tls_params(node: &Node<'_>) -> Result<TlsParams> {
    let o = node.obj_with(
        &[
            "tls_minimum_protocol_version",
            "tls_maximum_protocol_version",
            "cipher_suites",
            "ecdh_curves",
        ],
        &["signature_algorithms", "compliance_policies"],
    )?;
    let min_version = version(&o, "tls_minimum_protocol_version")?;
    let max_version = version(&o, "tls_maximum_protocol_version")?;
    if let (Some(min), Some(max)) = (min_version, max_version) {
        if min > max {
            return Err(o
                .req("tls_maximum_protocol_version")?
                .err("is lower than tls_minimum_protocol_version"));
        }
    }
    Ok(TlsParams {
        min_version,
        max_version,
        cipher_suites: o.str_list("cipher_suites")?,
        ecdh_curves: o.str_list("ecdh_curves")?,
    })
}

fn version(o: &Obj<'_>, key: &str) -> Result<Option<TlsVersion>> {
    let Some(n) = o.get(key) else {
        return Ok(None);
    };
    Ok(match n.as_str()? {
        "TLS_AUTO" => None,
        "TLSv1_0" => Some(TlsVersion::Tls1_0),
        "TLSv1_1" => Some(TlsVersion::Tls1_1),
        "TLSv1_2" => Some(TlsVersion::Tls1_2),
        "TLSv1_3" => Some(TlsVersion::Tls1_3),
        other => {
            return Err(n.err(format!(
                "expected TLS_AUTO, TLSv1_0, TLSv1_1, TLSv1_2 or TLSv1_3, got \"{other}\""
            )))
        }
    })
}

/// `alpn_protocols`: a list, or (older Envoy) one comma-separated string.
fn alpn(node: &Node<'_>) -> Result<Vec<String>> {
    let protocols: Vec<String> = match node.v.as_str() {
        Some(s) => s.split(',').map(|p| p.trim().to_owned()).collect(),
        None => node
            .items()
            .iter()
            .map(|n| n.as_str().map(str::to_owned))
            .collect::<Result<_>>()?,
    };
    for (i, p) in protocols.iter().enumerate() {
        if p.is_empty() || p.len() > 255 {
            return Err(node.err(format!(
                "protocol {i} must be 1..=255 bytes long, got {}",
                p.len()
            )));
        }
    }
    Ok(protocols)
}

/// An upstream secret reference: a static secret or a file (an upstream context is built
/// once, when the cluster is).
fn file_sds(node: &Node<'_>) -> Result<SecretRef> {
    let r = secret_ref(node)?;
    if let SecretRef::Sds(r) = &r {
        if r.file().is_none() {
            return Err(Node::new(node.v, format!("{}.sds_config", node.path))
                .unsupported(Some("an upstream secret from a file (path_config_source)")));
        }
    }
    Ok(r)
}

/// An upstream `tls_params`: quickshake's client uses BoringSSL's defaults (TLS 1.2 to 1.3, its
/// cipher suites and curves), so only settings that ask for those are accepted.
fn upstream_tls_params(node: &Node<'_>) -> Result<()> {
    let p = tls_params(node)?;
    let o = node.obj_with(
        &[
            "tls_minimum_protocol_version",
            "tls_maximum_protocol_version",
        ],
        &[
            "cipher_suites",
            "ecdh_curves",
            "signature_algorithms",
            "compliance_policies",
        ],
    )?;
    if p.max_version.is_some_and(|v| v != TlsVersion::Tls1_3) {
        return Err(o
            .req("tls_maximum_protocol_version")?
            .unsupported(Some("an upstream maximum other than TLSv1_3")));
    }
    if p.min_version.is_some_and(|v| v > TlsVersion::Tls1_2) {
        return Err(o
            .req("tls_minimum_protocol_version")?
            .unsupported(Some("an upstream minimum above TLSv1_2")));
    }
    Ok(())
}

/// A cluster's `UpstreamTlsContext`.
/// An upstream `combined_validation_context` (Envoy Gateway's BackendTLSPolicy): the secret of
/// `validation_context_sds_secret_config` merged over `default_validation_context`, as Envoy
/// merges them: the secret's `trusted_ca`, the SAN matchers of both (the default's first).
fn combined_validation_context(co: &Obj<'_>, cv: &Node<'_>, tls: &mut UpstreamTls) -> Result<()> {
    for other in ["validation_context", "validation_context_sds_secret_config"] {
        if let Some(n) = co.get(other) {
            return Err(n.err(format!("cannot be combined with {}", cv.path)));
        }
    }
    let cvo = cv.obj(&[
        "default_validation_context",
        "validation_context_sds_secret_config",
    ])?;
    let (_, sans) = match cvo.get("default_validation_context") {
        Some(d) => crate::validation::validation_fields(&d, false)?,
        None => (None, Vec::new()),
    };
    tls.san_matchers = sans;
    let vs = cvo.req("validation_context_sds_secret_config")?;
    match file_sds(&vs)? {
        SecretRef::Sds(r) => tls.trusted_ca_sds = Some(r),
        SecretRef::Static(name) => {
            let v = static_trusted_ca(&vs, &name)?;
            tls.trusted_ca = Some(v.trusted_ca);
            tls.san_matchers.extend(v.san_matchers);
        }
    }
    Ok(())
}

pub(crate) fn upstream_tls_context(node: &Node<'_>) -> Result<UpstreamTls> {
    let o = node.typed(
        UPSTREAM_TLS_CONTEXT,
        &["common_tls_context", "sni"],
        &[
            "auto_host_sni",
            "auto_sni_san_validation",
            "allow_renegotiation",
            "max_session_keys",
            "enforce_rsa_key_usage",
        ],
    )?;
    let sni = match o.get("sni") {
        Some(s) => {
            let name = s.non_empty_str()?;
            if name.len() > 255 || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(s.err(format!("invalid server name \"{name}\"")));
            }
            Some(name.to_owned())
        }
        None => None,
    };
    let mut tls = UpstreamTls {
        sni,
        trusted_ca: None,
        san_matchers: Vec::new(),
        alpn_protocols: Vec::new(),
        client_certificate: None,
        client_certificate_sds: None,
        trusted_ca_sds: None,
    };
    let Some(ctx) = o.get("common_tls_context") else {
        return Ok(tls);
    };
    let not_here: Vec<&str> = COMMON_TLS_NOT_SUPPORTED
        .iter()
        .copied()
        .filter(|k| {
            ![
                "validation_context_sds_secret_config",
                "combined_validation_context",
            ]
            .contains(k)
        })
        .collect();
    let co = ctx.obj_with(
        &[
            "tls_certificates",
            "alpn_protocols",
            "validation_context",
            "tls_params",
            "tls_certificate_sds_secret_configs",
            "validation_context_sds_secret_config",
            "combined_validation_context",
        ],
        &not_here,
    )?;
    if let Some(p) = co.get("tls_params") {
        upstream_tls_params(&p)?;
    }
    let certs = co.items("tls_certificates");
    let sds = co.items("tls_certificate_sds_secret_configs");
    if certs.len() + sds.len() > 1 {
        let extra = certs.get(1).or(sds.first()).unwrap_or(&certs[0]);
        return Err(extra.err("an upstream TLS context takes at most one client certificate"));
    }
    if let Some(c) = certs.first() {
        tls.client_certificate = Some(tls_certificate(c)?);
    }
    if let Some(s) = sds.first() {
        match file_sds(s)? {
            SecretRef::Sds(r) => tls.client_certificate_sds = Some(r),
            SecretRef::Static(name) => {
                tls.client_certificate = Some(static_tls_certificate(s, &name)?)
            }
        }
    }
    if let (Some(v), Some(vs)) = (
        co.get("validation_context"),
        co.get("validation_context_sds_secret_config"),
    ) {
        return Err(vs.err(format!("cannot be combined with {}", v.path)));
    }
    if let Some(vs) = co.get("validation_context_sds_secret_config") {
        match file_sds(&vs)? {
            SecretRef::Sds(r) => tls.trusted_ca_sds = Some(r),
            SecretRef::Static(name) => {
                let v = static_trusted_ca(&vs, &name)?;
                tls.trusted_ca = Some(v.trusted_ca);
                tls.san_matchers = v.san_matchers;
            }
        }
    }
    if let Some(a) = co.get("alpn_protocols") {
        tls.alpn_protocols = alpn(&a)?;
    }
    if let Some(cv) = co.get("combined_validation_context") {
        combined_validation_context(&co, &cv, &mut tls)?;
    }
    if let Some(v) = co.get("validation_context") {
        let v: Option<ValidationContext> = validation_context(&v)?;
        if let Some(v) = v {
            tls.trusted_ca = Some(v.trusted_ca);
            tls.san_matchers = v.san_matchers;
        }
    }
    Ok(tls)
}
