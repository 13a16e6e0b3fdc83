//! Against Debian's `openssl s_server -www`: full handshakes by default, resumption
//! detected when sessions are offered.

mod common;

use std::time::Duration;

use common::{bench, fake_stats, make_certs, page, path_str, s_server};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn full_handshakes_without_tickets() {
    let certs = make_certs();
    let (_srv, port) = s_server(&certs, &["-no_ticket", "-num_tickets", "0"]);
    let url = format!("https://localhost:{port}/");
    let run = bench(
        &[
            "-c",
            "4",
            "-d",
            "1s",
            "--json",
            "--cacert",
            path_str(&certs.cert),
            &url,
        ],
        LIMIT,
    );
    let v = run.success_json();
    assert!(v["handshakes"].as_u64().unwrap_or(0) > 0, "{v}");
    assert_eq!(v["resumed"], 0, "{v}");
    assert_eq!(v["errors"]["total"], 0, "{v}");
    assert_eq!(v["negotiated"]["group"], "X25519", "{v}");
    assert!(v["client_cpu_us_per_handshake"].as_f64().unwrap_or(0.0) > 0.0);
}

#[test]
fn resumption_counted_when_allowed_and_fatal_otherwise() {
    let certs = make_certs();
    // Tickets on (s_server's default).
    let (_srv, port) = s_server(&certs, &[]);
    let url = format!("https://localhost:{port}/");
    let run = bench(
        &[
            "-c",
            "2",
            "-d",
            "1s",
            "--json",
            "-k",
            "--allow-resumption",
            &url,
        ],
        LIMIT,
    );
    let v = run.success_json();
    assert!(v["resumed"].as_u64().unwrap_or(0) > 0, "{v}");
    assert_eq!(v["ok"], true);

    // Same server, sessions offered but resumption not allowed: the run must fail loudly.
    let run = bench(
        &[
            "-c",
            "2",
            "-d",
            "1s",
            "--json",
            "-k",
            "--offer-sessions",
            &url,
        ],
        LIMIT,
    );
    assert_ne!(run.code, Some(0), "stdout:\n{}", run.stdout);
    assert!(run.stderr.contains("resum"), "stderr:\n{}", run.stderr);
    let v = run.json();
    assert!(v["resumed"].as_u64().unwrap_or(0) > 0, "{v}");
    assert_eq!(v["ok"], false);

    // Default flags never offer a session, so even a ticket-issuing server does full handshakes.
    let run = bench(&["-c", "2", "-d", "1s", "--json", "-k", &url], LIMIT);
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    assert_eq!(run.json()["resumed"], 0);
}

#[test]
fn tls12_and_group_choice() {
    let certs = make_certs();
    let (_srv, port) = s_server(&certs, &["-no_ticket", "-num_tickets", "0"]);
    let url = format!("https://localhost:{port}/");
    let run = bench(
        &[
            "-n",
            "20",
            "-c",
            "2",
            "--json",
            "-k",
            "--tls",
            "1.2",
            "--groups",
            "P-256",
            "--sigalgs",
            "rsa_pss_rsae_sha256",
            &url,
        ],
        LIMIT,
    );
    let v = run.success_json();
    assert_eq!(v["negotiated"]["version"], "TLSv1.2", "{v}");
    assert_eq!(v["negotiated"]["group"], "P-256", "{v}");
    assert_eq!(v["requests"], 20, "{v}");
}

#[test]
fn verification_failure_is_a_tls_error() {
    let certs = make_certs();
    let (_srv, port) = s_server(&certs, &["-no_ticket", "-num_tickets", "0"]);
    // No --cacert and no -k: the self-signed certificate must be rejected.
    let url = format!("https://localhost:{port}/");
    let run = bench(&["-n", "3", "-c", "1", "--json", &url], LIMIT);
    assert_ne!(run.code, Some(0));
    let v = run.json();
    assert_eq!(v["handshakes"], 0);
    assert!(v["errors"]["tls"].as_u64().unwrap_or(0) >= 1, "{v}");
}

#[test]
fn server_stats_are_read_and_checked() {
    let certs = make_certs();
    let (_srv, port) = s_server(&certs, &["-no_ticket", "-num_tickets", "0"]);
    let url = format!("https://localhost:{port}/");

    let stats = fake_stats(vec![page(1000, 7), page(1100, 7)]);
    let admin = format!("http://127.0.0.1:{stats}");
    let run = bench(
        &[
            "-c",
            "2",
            "-d",
            "500ms",
            "--json",
            "-k",
            "--server-stats",
            &admin,
            "--server-cpu",
            "0",
            &url,
        ],
        LIMIT,
    );
    let v = run.success_json();
    assert_eq!(v["server"]["handshakes"], 100, "{v}");
    assert_eq!(v["server"]["session_reused"], 0, "{v}");
    assert!(
        v["server"]["handshakes_per_sec"].as_f64().unwrap_or(0.0) > 0.0,
        "{v}"
    );
    assert!(v["server"]["cpu_us_per_handshake"].is_number(), "{v}");
    assert_eq!(v["server"]["curves"]["X25519"], 100, "{v}");

    // The server's own session_reused counter moved: the run fails even though the client
    // saw no resumption.
    let stats = fake_stats(vec![page(1000, 7), page(1100, 9)]);
    let admin = format!("http://127.0.0.1:{stats}");
    let run = bench(
        &[
            "-c",
            "2",
            "-d",
            "500ms",
            "--json",
            "-k",
            "--server-stats",
            &admin,
            &url,
        ],
        LIMIT,
    );
    assert_ne!(run.code, Some(0), "stdout:\n{}", run.stdout);
    assert!(
        run.stderr.contains("session_reused"),
        "stderr:\n{}",
        run.stderr
    );
}
