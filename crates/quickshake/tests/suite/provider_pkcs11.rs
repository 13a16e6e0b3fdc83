//! The `pkcs11` provider with SoftHSM2 keys generated inside the token (non-extractable):
//! handshakes over TLS 1.2 and 1.3 with RSA and ECDSA keys from real clients (`openssl
//! s_client`, curl), the TLS 1.2 RSA key exchange, Envoy's `sgx` shape, clear start-up errors
//! (wrong PIN, missing token), a token that fails or stalls while serving (through the
//! `p11wrap` module: only the waiting handshakes fail, nothing hangs, sessions reopen), PINs
//! never in logs (trace level), stats or `/config_dump`, and `quickshake doctor`.

use std::time::{Duration, Instant};

use crate::support::softhsm::{hsm, refs, Hsm, IMPORTED, PIN_TOKEN, SO_PIN, TOKEN, USER_PIN};
use crate::support::tls_client::{handshake, ClientOpts};
use crate::support::{self, direct_response_config, eventually, s_client, Gateway};

const PKCS11_TYPE: &str = "type.googleapis.com/quickshake.private_key_providers.v1.Pkcs11Config";

/// A `tls_certificates` entry whose key is `label` in the token, through the wrapper module.
fn token_cert(h: &Hsm, label: &str, extra: &str) -> String {
    format!(
        r#"            - certificate_chain: {{ filename: {cert} }}
              private_key_provider:
                provider_name: pkcs11
                typed_config:
                  "@type": {PKCS11_TYPE}
                  module: {module}
                  token_label: {TOKEN}
                  key_label: {label}
                  user_pin: {{ filename: {pin} }}
{extra}"#,
        cert = h.cert(label).display(),
        module = h.wrapper.display(),
        pin = h.pin_file.display(),
    )
}

fn start(h: &Hsm, label: &str, extra: &str, control: &str, args: &[&str]) -> Gateway {
    Gateway::start_with_env(
        &direct_response_config(&token_cert(h, label, extra), "", ""),
        args,
        &refs(&h.env(control)),
    )
}

fn counter(gw: &Gateway, name: &str) -> u64 {
    gw.counter(&format!("{}pkcs11.{name}", gw.scope("127.0.0.1")))
}

fn s_client_ok(gw: &Gateway, args: &[&str]) -> String {
    let port = format!("127.0.0.1:{}", gw.port);
    let mut all = vec![
        "-connect",
        port.as_str(),
        "-servername",
        "localhost",
        "-ign_eof",
    ];
    all.extend_from_slice(args);
    let out = s_client(
        &all,
        "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("hello from quickshake"),
        "s_client {args:?}: {text}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log_text()
    );
    text
}

#[test]
fn rsa_key_from_the_token_over_tls12_tls13_and_rsa_key_exchange() {
    let _lock = support::shared();
    let h = hsm();
    let control = h.dir.join("control-rsa").display().to_string();
    // Envoy's default suites have no RSA key exchange: name one.
    let gw = Gateway::start_with_env(
        &direct_response_config(
            &token_cert(h, "rsa2048", ""),
            "            tls_params: { cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256, AES128-SHA] }",
            "",
        ),
        &["--concurrency", "1"],
        &refs(&h.env(&control)),
    );
    assert!(
        gw.log_text().contains("token 'qs-test'") && gw.log_text().contains("RSA-2048"),
        "start-up says what it found: {}",
        gw.log_text()
    );
    assert!(
        gw.log_text()
            .contains("RSA-PSS via CKM_RSA_PKCS_PSS, PKCS#1 v1.5 via CKM_RSA_PKCS"),
        "the token's own signature mechanisms are chosen: {}",
        gw.log_text()
    );
    let t13 = s_client_ok(&gw, &["-tls1_3"]);
    assert!(
        t13.contains("TLSv1.3") && t13.contains("Server public key is 2048 bit"),
        "{t13}"
    );
    // PSS and PKCS#1 v1.5 signatures under TLS 1.2 (ECDHE).
    s_client_ok(&gw, &["-tls1_2", "-sigalgs", "RSA-PSS+SHA256"]);
    s_client_ok(&gw, &["-tls1_2", "-sigalgs", "RSA+SHA384"]);
    // The RSA key exchange: the token decrypts with raw RSA.
    let kx = s_client_ok(&gw, &["-tls1_2", "-cipher", "AES128-SHA"]);
    assert!(kx.contains("Cipher is AES128-SHA"), "{kx}");
    assert_eq!(counter(&gw, "rsa_decrypt"), 1);
    assert!(counter(&gw, "rsa_sign") >= 3);
    // curl, and the quickshake client, repeatedly.
    let out = support::curl(&["-k", &gw.url("/")]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hello"),
        "{out:?}"
    );
    for _ in 0..4 {
        handshake(gw.port, &ClientOpts::default()).expect("handshake");
    }
    assert_eq!(counter(&gw, "token_error"), 0);
    assert!(counter(&gw, "session_opened") >= 1);
    // TLS 1.3 and `RSA-PSS+SHA256` through CKM_RSA_PKCS_PSS, `RSA+SHA384` through CKM_RSA_PKCS.
    assert!(counter(&gw, "rsa_sign_pss") >= 2);
    assert!(counter(&gw, "rsa_sign_pkcs1") >= 1);
    assert_eq!(counter(&gw, "rsa_sign_raw"), 0);
}

/// One gateway on the RSA-2048 key with `hide` hidden by the wrapper; the start-up log.
fn start_hiding(h: &Hsm, label: &str, hide: &str, control: &str) -> Gateway {
    let mut env = h.env(control);
    env.push(("P11WRAP_HIDE", hide.into()));
    Gateway::start_with_env(
        &direct_response_config(&token_cert(h, label, ""), "", ""),
        &["--concurrency", "1"],
        &refs(&env),
    )
}

#[test]
fn rsa_signatures_use_what_the_token_offers_and_raw_rsa_only_as_fallback() {
    let _lock = support::shared();
    let h = hsm();
    // A token that refuses raw RSA (Google Cloud KMS's library, many HSM policies): the token
    // pads, PSS and PKCS#1 v1.5 both; no RSA key exchange.
    let control = h.dir.join("control-noraw-sign").display().to_string();
    let gw = start_hiding(h, "rsa2048", "CKM_RSA_X_509", &control);
    let log = gw.log_text();
    assert!(
        log.contains("RSA-PSS via CKM_RSA_PKCS_PSS, PKCS#1 v1.5 via CKM_RSA_PKCS")
            && log.contains("RSA key exchange turned off"),
        "{log}"
    );
    s_client_ok(&gw, &["-tls1_3"]);
    s_client_ok(&gw, &["-tls1_2", "-sigalgs", "RSA-PSS+SHA384"]);
    s_client_ok(&gw, &["-tls1_2", "-sigalgs", "RSA+SHA256"]);
    assert!(counter(&gw, "rsa_sign_pss") >= 2);
    assert!(counter(&gw, "rsa_sign_pkcs1") >= 1);
    assert_eq!(counter(&gw, "rsa_sign_raw"), 0);
    assert_eq!(counter(&gw, "token_error"), 0);
    drop(gw);

    // A token with raw RSA only: quickshake pads, the token exponentiates.
    let control = h.dir.join("control-raw-only").display().to_string();
    let gw = start_hiding(h, "rsa2048", "CKM_RSA_PKCS_PSS,CKM_RSA_PKCS", &control);
    let log = gw.log_text();
    assert!(
        log.contains(
            "RSA-PSS via CKM_RSA_X_509 (raw, padded by quickshake), PKCS#1 v1.5 via CKM_RSA_X_509"
        ),
        "{log}"
    );
    s_client_ok(&gw, &["-tls1_3"]);
    s_client_ok(&gw, &["-tls1_2", "-sigalgs", "RSA-PSS+SHA256"]);
    s_client_ok(&gw, &["-tls1_2", "-sigalgs", "RSA+SHA512"]);
    assert!(counter(&gw, "rsa_sign_raw") >= 3);
    assert_eq!(
        counter(&gw, "rsa_sign_pss") + counter(&gw, "rsa_sign_pkcs1"),
        0
    );
    drop(gw);

    // No RSA signing mechanism at all: start-up says so.
    let mut env = h.env(&control);
    env.push((
        "P11WRAP_HIDE",
        "CKM_RSA_PKCS_PSS,CKM_RSA_PKCS,CKM_RSA_X_509".into(),
    ));
    let (code, err) = support::start_expect_failure(
        &direct_response_config(&token_cert(h, "rsa2048", ""), "", ""),
        &[],
        &refs(&env),
    );
    assert_ne!(code, 0);
    assert!(err.contains("offers no RSA signing mechanism"), "{err}");

    // RSA-4096, once.
    let control = h.dir.join("control-4096").display().to_string();
    let gw = start_hiding(h, "rsa4096", "", &control);
    let out = s_client_ok(&gw, &["-tls1_3"]);
    assert!(out.contains("Server public key is 4096 bit"), "{out}");
    assert!(counter(&gw, "rsa_sign_pss") >= 1);
}

#[test]
fn a_token_without_raw_rsa_decryption_turns_rsa_key_exchange_off() {
    let _lock = support::shared();
    let h = hsm();
    let control = h.dir.join("control-noraw").display().to_string();
    let mut env = h.env(&control);
    env.push(("P11WRAP_NO_RAW_DECRYPT", "1".into()));
    let gw = Gateway::start_with_env(
        &direct_response_config(
            &token_cert(h, "rsa2048", ""),
            "            tls_params: { cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256, AES128-SHA] }",
            "",
        ),
        &["--concurrency", "1"],
        &refs(&env),
    );
    assert!(
        gw.log_text().contains("RSA key exchange turned off"),
        "{}",
        gw.log_text()
    );
    let port = format!("127.0.0.1:{}", gw.port);
    let out = s_client(&["-connect", &port, "-tls1_2", "-cipher", "AES128-SHA"], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Cipher is (NONE)"),
        "no RSA key exchange: {text}"
    );
    s_client_ok(&gw, &["-tls1_2"]);
    assert_eq!(counter(&gw, "rsa_decrypt"), 0);
}

#[test]
fn ecdsa_key_from_the_token_and_the_sgx_shape() {
    let _lock = support::shared();
    let h = hsm();
    let control = h.dir.join("control-ec").display().to_string();
    // The PIN from an environment variable this time.
    let cert = token_cert(h, "ec256", "").replace(
        &format!("{{ filename: {} }}", h.pin_file.display()),
        "{ environment_variable: QS_TEST_TOKEN_PIN }",
    );
    let mut env = h.env(&control);
    env.push(("QS_TEST_TOKEN_PIN", USER_PIN.into()));
    let gw = Gateway::start_with_env(
        &direct_response_config(&cert, "", ""),
        &["--concurrency", "1"],
        &refs(&env),
    );
    for v in ["-tls1_2", "-tls1_3"] {
        let out = s_client_ok(&gw, &[v]);
        assert!(out.contains("Server public key is 256 bit"), "{out}");
    }
    assert!(counter(&gw, "ecdsa_sign") >= 2);
    drop(gw);

    // Envoy's contrib `sgx` provider config, on an RSA-3072 key: inline PINs, redacted.
    let cert = format!(
        r#"            - certificate_chain: {{ filename: {cert} }}
              private_key_provider:
                provider_name: sgx
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.private_key_providers.sgx.v3alpha.SgxPrivateKeyMethodConfig
                  sgx_library: {module}
                  key_label: rsa3072
                  usr_pin: "{USER_PIN}"
                  so_pin: "{SO_PIN}"
                  token_label: {TOKEN}
                  key_type: rsa"#,
        cert = h.cert("rsa3072").display(),
        module = h.wrapper.display(),
    );
    let gw = Gateway::start_with_env(
        &direct_response_config(&cert, "", ""),
        &["--concurrency", "1", "--log-level", "trace"],
        &refs(&h.env(&control)),
    );
    let out = s_client_ok(&gw, &["-tls1_3"]);
    assert!(out.contains("Server public key is 3072 bit"), "{out}");
    s_client_ok(&gw, &["-tls1_2"]);
    let (_, dump) = gw.admin_get("/config_dump");
    let (_, stats) = gw.admin_get("/stats");
    for (what, text) in [
        ("log", gw.log_text()),
        ("/config_dump", dump.clone()),
        ("/stats", stats),
    ] {
        for secret in [USER_PIN, SO_PIN] {
            assert!(!text.contains(secret), "a PIN in the {what}");
        }
        assert!(!text.contains("PRIVATE KEY"), "key material in the {what}");
    }
    assert!(
        dump.contains("rsa3072") && dump.contains("[redacted]"),
        "{dump}"
    );
}

#[test]
fn wrong_pin_and_missing_token_fail_start_up_clearly() {
    let _lock = support::shared();
    let h = hsm();
    let control = h.dir.join("control-start").display().to_string();
    let env = h.env(&control);
    let wrong = h.dir.join("wrong.pin");
    std::fs::write(&wrong, "not-the-pin-4242").expect("pin");
    let cert = token_cert(h, "rsa2048", "")
        .replace(
            &h.pin_file.display().to_string(),
            &wrong.display().to_string(),
        )
        .replace(
            &format!("token_label: {TOKEN}"),
            &format!("token_label: {PIN_TOKEN}"),
        );
    let (code, err) =
        support::start_expect_failure(&direct_response_config(&cert, "", ""), &[], &refs(&env));
    assert_ne!(code, 0);
    assert!(
        err.contains("CKR_PIN_INCORRECT") && err.contains("user_pin"),
        "{err}"
    );
    assert!(
        !err.contains("not-the-pin-4242"),
        "the PIN in an error: {err}"
    );

    let cert = token_cert(h, "rsa2048", "").replace(
        &format!("token_label: {TOKEN}"),
        "token_label: absent-token",
    );
    let (code, err) =
        support::start_expect_failure(&direct_response_config(&cert, "", ""), &[], &refs(&env));
    assert_ne!(code, 0);
    assert!(
        err.contains("no token with label 'absent-token'") && err.contains("qs-test"),
        "{err}"
    );

    let cert = token_cert(h, "rsa2048", "").replace("key_label: rsa2048", "key_label: nokey");
    let (_, err) =
        support::start_expect_failure(&direct_response_config(&cert, "", ""), &[], &refs(&env));
    assert!(err.contains("no private key with label 'nokey'"), "{err}");
    // The token's key must be the certificate's.
    let cert = token_cert(h, "rsa2048", "").replace("key_label: rsa2048", "key_label: rsa3072");
    let (_, err) =
        support::start_expect_failure(&direct_response_config(&cert, "", ""), &[], &refs(&env));
    assert!(err.contains("does not match the certificate"), "{err}");
}

/// Handshakes from `n` threads at once; how many succeeded, and the longest one took.
fn concurrent(gw: &Gateway, n: usize) -> (usize, Duration) {
    let port = gw.port;
    let threads: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                let t = Instant::now();
                let ok = handshake(port, &ClientOpts::default()).is_ok();
                (ok, t.elapsed())
            })
        })
        .collect();
    let mut ok = 0;
    let mut longest = Duration::ZERO;
    for t in threads {
        let (o, d) = t.join().expect("thread");
        ok += usize::from(o);
        longest = longest.max(d);
    }
    (ok, longest)
}

#[test]
fn a_removed_token_fails_only_waiting_handshakes_and_sessions_reopen() {
    let _lock = support::shared();
    let h = hsm();
    let control = h.dir.join("control-removed").display().to_string();
    std::fs::write(&control, "ok").expect("control");
    let gw = start(
        h,
        "ec256",
        "                  pool_size: 2\n",
        &control,
        &["--concurrency", "1"],
    );
    assert_eq!(concurrent(&gw, 4).0, 4, "{}", gw.log_text());
    std::fs::write(&control, "removed").expect("control");
    let (ok, longest) = concurrent(&gw, 6);
    assert_eq!(ok, 0, "the token is gone");
    assert!(longest < Duration::from_secs(3), "failed fast: {longest:?}");
    assert!(counter(&gw, "token_error") + counter(&gw, "session_open_failed") >= 6);
    // The gateway keeps serving other things meanwhile.
    assert_eq!(
        support::http_get(gw.admin, "/ready").map(|r| r.0).ok(),
        Some(200)
    );
    let opened = counter(&gw, "session_opened");
    std::fs::write(&control, "ok").expect("control");
    assert_eq!(concurrent(&gw, 4).0, 4, "{}", gw.log_text());
    // The threads whose session the failure closed open a new one on their next operation.
    eventually("sessions reopened", || {
        let _ = handshake(gw.port, &ClientOpts::default());
        counter(&gw, "session_opened") > opened
    });
    let log = gw.log_text();
    assert_eq!(
        log.matches("engine pkcs11 failed").count(),
        1,
        "logged once per burst: {log}"
    );
    assert!(
        log.contains("CKR_DEVICE_REMOVED") || log.contains("CKR_TOKEN_NOT_PRESENT"),
        "{log}"
    );
    assert!(log.contains("token is back"), "{log}");
}

#[test]
fn a_stalled_token_hits_the_deadline_and_nothing_hangs() {
    let _lock = support::shared();
    let h = hsm();
    let control = h.dir.join("control-stall").display().to_string();
    std::fs::write(&control, "ok").expect("control");
    let gw = start(
        h,
        "rsa2048",
        "                  pool_size: 2\n                  deadline: 0.3s\n",
        &control,
        &["--concurrency", "1"],
    );
    assert_eq!(concurrent(&gw, 2).0, 2, "{}", gw.log_text());
    std::fs::write(&control, "stall").expect("control");
    let started = Instant::now();
    let (ok, longest) = concurrent(&gw, 5);
    assert_eq!(ok, 0);
    assert!(
        longest < Duration::from_secs(3),
        "the deadline ends the wait: {longest:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // Admin and stats answer while the token stalls.
    // (A thread that had no session yet stalls in C_OpenSession, before it counts.)
    eventually("in_flight shows the stalled calls", || {
        counter(&gw, "in_flight") >= 1
    });
    std::fs::write(&control, "ok").expect("control");
    eventually("the stalled calls return", || {
        counter(&gw, "in_flight") == 0
    });
    assert_eq!(concurrent(&gw, 3).0, 3, "{}", gw.log_text());
}

#[test]
fn doctor_reports_module_token_key_and_rate() {
    let _lock = support::shared();
    let h = hsm();
    let control = h.dir.join("control-doctor").display().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("config.yaml");
    // The key by CKA_ID this time (ec256 is id 03).
    let cert = token_cert(h, "ec256", "").replace("key_label: ec256", "key_id: \"03\"");
    let text = support::render(
        &direct_response_config(&cert, "", ""),
        support::free_port(),
        support::free_port(),
        support::free_port(),
        dir.path(),
    );
    std::fs::write(&cfg, text).expect("config");
    let mut cmd = std::process::Command::new(support::binary());
    cmd.arg("doctor").arg("-c").arg(&cfg);
    for (k, v) in h.env(&control) {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "libp11wrap.so",
        "token 'qs-test'",
        "ECDSA P-256",
        "non-extractable",
        "signatures/s measured",
    ] {
        assert!(text.contains(want), "{want} in: {text}");
    }
    assert!(!text.contains(USER_PIN));
}

#[test]
fn fallback_needs_the_certificates_own_key() {
    let _lock = support::shared();
    let h = hsm();
    let control = h.dir.join("control-fallback").display().to_string();
    std::fs::write(&control, "ok").expect("control");
    // testdata's rsa2048 key, in the token and as the certificate's plain key.
    let cert = token_cert(h, IMPORTED, "")
        .replace(
            &h.cert(IMPORTED).display().to_string(),
            &support::testdata("certs/rsa2048.cert.pem").display().to_string(),
        )
        .replace(
            "              private_key_provider:",
            &format!(
                "              private_key: {{ filename: {} }}\n              private_key_provider:\n                fallback: true",
                support::testdata("certs/rsa2048.key.pem").display()
            ),
        );
    let gw = Gateway::start_with_env(
        &direct_response_config(&cert, "", ""),
        &["--concurrency", "1"],
        &refs(&h.env(&control)),
    );
    assert_eq!(concurrent(&gw, 2).0, 2, "{}", gw.log_text());
    std::fs::write(&control, "removed").expect("control");
    assert_eq!(
        concurrent(&gw, 3).0,
        3,
        "redone with the plain key: {}",
        gw.log_text()
    );
    let retried = gw.counter(&format!("{}cryptomb.software_retry", gw.scope("127.0.0.1")));
    assert_eq!(retried, 3);
    std::fs::write(&control, "ok").expect("control");
}
