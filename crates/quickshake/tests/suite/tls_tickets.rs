//! Session tickets as Envoy makes them, checked against Envoy 1.39.3 side by side: both
//! processes read their ticket keys from the same SDS secret file, so a ticket issued by one
//! resumes on the other; a rotated key set `[K2, K1]` still resumes tickets issued under K1
//! (without a restart: the file is replaced atomically, as Kubernetes does); a set without K1
//! does not, and quickshake counts that (`ssl.session_ticket_decrypt_failed`). TLS 1.2 and 1.3,
//! with `openssl s_client -sess_out` / `-sess_in`.

use std::path::{Path, PathBuf};

use crate::support::envoy::Envoy;
use crate::support::*;

/// Write the SDS secret file holding `keys` (in order), atomically (a rename in the same
/// directory, which Envoy's file watch and quickshake's poll both see).
fn write_keys(file: &Path, keys: &[String]) {
    let list: String = keys
        .iter()
        .map(|k| format!("    - inline_string: {k}\n"))
        .collect();
    let text = format!(
        "resources:\n- \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\n  name: ticket_keys\n  session_ticket_keys:\n    keys:\n{list}"
    );
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write secret");
    std::fs::rename(&tmp, file).expect("rename secret");
}

/// The bootstrap both run; `hcm_extra` goes into the connection manager.
fn config(secret: &Path, hcm_extra: &str) -> String {
    let tls_extra = format!(
        "          session_ticket_keys_sds_secret_config:\n            name: ticket_keys\n            sds_config: {{ path_config_source: {{ path: {} }}, resource_api_version: V3 }}\n          disable_stateful_session_resumption: true",
        secret.display()
    );
    // Envoy's SDS needs a node id and cluster.
    format!(
        "node: {{ id: tickets, cluster: tickets }}\n{}",
        direct_response_config(&plain_cert("rsa2048"), &tls_extra, hcm_extra)
    )
}

/// quickshake (one worker) and Envoy on the same direct-response listener with `tls_extra` in
/// its `DownstreamTlsContext`; Envoy's listener port.
fn side_by_side(tls_extra: &str, dir: &Path) -> (Gateway, Envoy, u16) {
    let template = |hcm: &str| direct_response_config(&plain_cert("rsa2048"), tls_extra, hcm);
    let gw = Gateway::start(&template(""), &["--concurrency", "1"]);
    let (envoy_port, envoy_admin) = (free_port(), free_port());
    let envoy = Envoy::start(
        // Envoy holds a closing connection up to 1 s for the peer's close; s_client waits.
        &render(
            &template("          delayed_close_timeout: 0s"),
            envoy_port,
            free_port(),
            envoy_admin,
            dir,
        ),
        envoy_admin,
    );
    (gw, envoy, envoy_port)
}

struct Pair {
    gw: Gateway,
    envoy: Envoy,
    envoy_port: u16,
}

impl Pair {
    /// Both processes resume `session`, or neither does (`want`); `what` says which ticket.
    fn both_resume(&self, tls: &str, session: &Path, want: bool, what: &str) {
        let q = s_client_session(self.gw.port, tls, Some(session), None);
        let e = s_client_session(self.envoy_port, tls, Some(session), None);
        assert_eq!(
            (q, e),
            (want, want),
            "{tls} {what}: (quickshake, envoy) resumed"
        );
    }

    fn envoy_counter(&self, name: &str) -> u64 {
        self.envoy
            .stats()
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Wait until both have applied the secret file's `n`th version.
    fn wait_applied(&self, n: u64) {
        let scope = self.gw.scope("127.0.0.1");
        eventually("quickshake applied the rotated keys", || {
            self.gw.counter(&format!(
                "{scope}server_ssl_socket_factory.ssl_context_update_by_sds"
            )) >= n
        });
        let envoy_scope = format!("listener.127.0.0.1_{}.", self.envoy_port);
        eventually("envoy applied the rotated keys", || {
            self.envoy_counter(&format!(
                "{envoy_scope}server_ssl_socket_factory.ssl_context_update_by_sds"
            )) >= n
        });
    }
}

#[test]
fn tickets_interchangeable_with_envoy_and_rotation_keeps_old_tickets() {
    let _lock = shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let secret: PathBuf = dir.path().join("ticket_keys.yaml");
    let (k1, k2) = (ticket_key(1), ticket_key(2));
    write_keys(&secret, std::slice::from_ref(&k1));
    let gw = Gateway::start(&config(&secret, ""), &["--concurrency", "2"]);
    let (envoy_port, envoy_admin) = (free_port(), free_port());
    let envoy = Envoy::start(
        // Envoy holds a closing connection up to 1 s for the peer's close (quickshake closes
        // once the response is written); s_client waits for the close.
        &render(
            &config(&secret, "          delayed_close_timeout: 0s"),
            envoy_port,
            free_port(),
            envoy_admin,
            dir.path(),
        ),
        envoy_admin,
    );
    let pair = Pair {
        gw,
        envoy,
        envoy_port,
    };
    let sess = |name: &str| dir.path().join(name);

    // Under [K1]: each process's ticket resumes on the other.
    for tls in ["-tls1_2", "-tls1_3"] {
        let from_q = sess(&format!("q{tls}.pem"));
        let from_e = sess(&format!("e{tls}.pem"));
        assert!(!s_client_session(pair.gw.port, tls, None, Some(&from_q)));
        assert!(!s_client_session(pair.envoy_port, tls, None, Some(&from_e)));
        pair.both_resume(tls, &from_q, true, "quickshake's K1 ticket");
        pair.both_resume(tls, &from_e, true, "envoy's K1 ticket");
    }

    // Rotated to [K2, K1] without a restart: K1 tickets still resume on both.
    write_keys(&secret, &[k2.clone(), k1]);
    pair.wait_applied(1);
    for tls in ["-tls1_2", "-tls1_3"] {
        pair.both_resume(
            tls,
            &sess(&format!("q{tls}.pem")),
            true,
            "K1 ticket on [K2, K1]",
        );
        pair.both_resume(
            tls,
            &sess(&format!("e{tls}.pem")),
            true,
            "K1 ticket on [K2, K1]",
        );
    }
    // A ticket issued now is under K2 and resumes on the other process too.
    let k2_ticket = sess("k2.pem");
    assert!(!s_client_session(
        pair.envoy_port,
        "-tls1_3",
        None,
        Some(&k2_ticket)
    ));
    pair.both_resume("-tls1_3", &k2_ticket, true, "envoy's K2 ticket");

    // K1 dropped: its tickets are full handshakes on both; quickshake counts each.
    let scope = pair.gw.scope("127.0.0.1");
    let failed = || {
        pair.gw
            .counter(&format!("{scope}ssl.session_ticket_decrypt_failed"))
    };
    let before = failed();
    write_keys(&secret, &[k2]);
    pair.wait_applied(2);
    for tls in ["-tls1_2", "-tls1_3"] {
        pair.both_resume(
            tls,
            &sess(&format!("q{tls}.pem")),
            false,
            "K1 ticket on [K2]",
        );
    }
    eventually("two tickets counted as undecryptable", || {
        failed() == before + 2
    });
    pair.both_resume("-tls1_3", &k2_ticket, true, "K2 ticket on [K2]");
    let reused = pair.gw.counter(&format!("{scope}ssl.session_reused"));
    let envoy_reused = pair.envoy_counter(&format!(
        "listener.127.0.0.1_{envoy_port}.ssl.session_reused"
    ));
    assert_eq!(reused, envoy_reused, "same resumptions counted");
}

#[test]
fn ticket_keys_never_reach_dumps_or_logs() {
    let _lock = shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let key = ticket_key(7);
    let tls_extra =
        format!("          session_ticket_keys: {{ keys: [ {{ inline_string: {key} }} ] }}");
    let template = direct_response_config(&plain_cert("rsa2048"), &tls_extra, "");
    let gw = Gateway::start(&template, &["--concurrency", "1", "--log-level", "debug"]);
    let session = dir.path().join("s.pem");
    assert!(!s_client_session(gw.port, "-tls1_3", None, Some(&session)));
    assert!(s_client_session(gw.port, "-tls1_3", Some(&session), None));
    let (_, dump) = gw.admin_get("/config_dump");
    let text = format!("{dump}\n{}", gw.log_text());
    for needle in [&key[..16], &key[16..48], &key[48..]] {
        assert!(!text.contains(needle), "a ticket key leaked");
    }
}

/// With client certificates required, Envoy's session ID context also covers the trusted CAs
/// and the validation settings: a ticket still crosses between the two, and a client
/// certificate's session resumes without sending the certificate again.
#[test]
fn mtls_tickets_cross_between_envoy_and_quickshake() {
    let _lock = shared();
    let dir = tempfile::tempdir().expect("tempdir");
    // A bundle of two: Envoy 1.39.3 hashes only the first into the session ID context.
    let bundle = dir.path().join("ca.pem");
    let certs = certs_dir();
    let mut pem = std::fs::read(certs.join("client-ca.cert.pem")).expect("client CA");
    pem.extend(std::fs::read(certs.join("other.cert.pem")).expect("other"));
    std::fs::write(&bundle, pem).expect("bundle");
    let tls_extra = format!(
        "            validation_context:\n              trusted_ca: {{ filename: {} }}\n          require_client_certificate: true\n          session_ticket_keys: {{ keys: [ {{ inline_string: {} }} ] }}",
        bundle.display(),
        ticket_key(3)
    );
    let (gw, _envoy, envoy_port) = side_by_side(&tls_extra, dir.path());
    let cert = certs.join("client.cert.pem");
    let key = certs.join("client.key.pem");
    let client = [
        "-cert",
        cert.to_str().expect("utf-8"),
        "-key",
        key.to_str().expect("utf-8"),
    ];
    for tls in ["-tls1_2", "-tls1_3"] {
        let from_q = dir.path().join(format!("q{tls}.pem"));
        let from_e = dir.path().join(format!("e{tls}.pem"));
        assert!(!s_client_session_with(
            gw.port,
            tls,
            None,
            Some(&from_q),
            &client
        ));
        assert!(!s_client_session_with(
            envoy_port,
            tls,
            None,
            Some(&from_e),
            &client
        ));
        let got = (
            s_client_session_with(envoy_port, tls, Some(&from_q), None, &client),
            s_client_session_with(gw.port, tls, Some(&from_e), None, &client),
        );
        assert_eq!(
            got,
            (true, true),
            "{tls}: (quickshake's on envoy, envoy's on quickshake)"
        );
    }
}

/// `session_timeout` bounds how long a TLS 1.2 session resumes, on both. Envoy sets it with
/// `SSL_CTX_set_timeout`, which BoringSSL applies to TLS 1.2 sessions only (TLS 1.3 tickets
/// keep BoringSSL's own PSK lifetime): quickshake does the same, and both still resume the
/// TLS 1.3 ticket.
#[test]
fn session_timeout_expires_tickets_as_envoy() {
    let _lock = shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let tls_extra = format!(
        "          session_timeout: 2s\n          session_ticket_keys: {{ keys: [ {{ inline_string: {} }} ] }}",
        ticket_key(4)
    );
    let (gw, _envoy, envoy_port) = side_by_side(&tls_extra, dir.path());
    let both = |tls: &str, sess: &Path| {
        (
            s_client_session(gw.port, tls, Some(sess), None),
            s_client_session(envoy_port, tls, Some(sess), None),
        )
    };
    let versions = ["-tls1_2", "-tls1_3"];
    for tls in versions {
        let sess = dir.path().join(format!("{tls}.pem"));
        assert!(!s_client_session(gw.port, tls, None, Some(&sess)));
        assert_eq!(both(tls, &sess), (true, true), "{tls} within the timeout");
    }
    std::thread::sleep(std::time::Duration::from_millis(2600));
    let sess = |tls: &str| dir.path().join(format!("{tls}.pem"));
    assert_eq!(
        both("-tls1_2", &sess("-tls1_2")),
        (false, false),
        "TLS 1.2 after the timeout"
    );
    assert_eq!(
        both("-tls1_3", &sess("-tls1_3")),
        (true, true),
        "TLS 1.3 after the timeout"
    );
}
