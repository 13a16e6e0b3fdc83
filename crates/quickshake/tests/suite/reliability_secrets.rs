//! Private keys never leave the process: with `-l trace`, neither `/config_dump` nor the other
//! admin endpoints, the logs, the stats, the access log nor the error messages of rejected
//! configurations contain the key, in any of its forms: a PEM block, a base64 line of its DER,
//! the hex (colon-separated or not) or decimal digits of d, p and q. And key files readable by
//! group or others (through a symlink too) produce a warning.
//!
//! Positive controls: the scanner flags the key in each form it searches for, and flags the
//! access log of a gateway configured to print one line of the key. See docs/reliability.md.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::support;
use crate::support::providers::batching_cert;
use crate::support::*;

/// Everything of one key that must never be printed.
struct Secrets {
    pem_lines: Vec<String>,
    /// d, p, q as lower-case hex without separators or leading zeros.
    hex: Vec<(&'static str, String)>,
    decimal: Vec<(&'static str, String)>,
}

fn normalise_hex(s: &str) -> String {
    let h: String = s
        .chars()
        .filter(|c| c.is_ascii_hexdigit())
        .collect::<String>()
        .to_lowercase();
    h.trim_start_matches('0').to_string()
}

fn secrets_of(key: &Path) -> Secrets {
    let pem = std::fs::read_to_string(key).expect("key");
    let pem_lines = pem
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 40)
        .map(str::to_string)
        .collect();
    let out = Command::new("openssl")
        .args(["rsa", "-noout", "-text", "-in"])
        .arg(key)
        .output()
        .expect("openssl rsa");
    assert!(out.status.success(), "openssl rsa -text");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    // Blocks: "privateExponent:\n    00:ab:...\n    ...\nprime1:\n ..."
    let block = |name: &str| {
        let start = text.find(&format!("{name}:")).expect(name) + name.len() + 1;
        let rest = &text[start..];
        let end = rest
            .lines()
            .skip(1)
            .position(|l| !l.starts_with(' '))
            .map(|n| rest.lines().take(n + 1).map(|l| l.len() + 1).sum())
            .unwrap_or(rest.len());
        normalise_hex(&rest[..end])
    };
    let hex = vec![
        ("d", block("privateExponent")),
        ("p", block("prime1")),
        ("q", block("prime2")),
    ];
    let decimal = hex
        .iter()
        .map(|(n, h)| {
            let out = Command::new("python3")
                .args(["-c", &format!("print(int('{h}', 16))")])
                .output()
                .expect("python3");
            (*n, String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .collect();
    let s = Secrets {
        pem_lines,
        hex,
        decimal,
    };
    assert!(s.pem_lines.len() >= 20, "PEM body lines");
    for (n, h) in &s.hex {
        assert!(h.len() >= 250, "{n}: {} hex digits", h.len());
    }
    for (n, d) in &s.decimal {
        assert!(d.len() >= 150, "{n}: {} decimal digits", d.len());
    }
    s
}

/// What of the key `text` contains (empty when nothing).
fn leaks(text: &str, s: &Secrets) -> Vec<String> {
    let mut found = Vec::new();
    for l in text.lines() {
        if l.contains("-----BEGIN") && l.contains("PRIVATE KEY") {
            found.push(format!("PEM block: {l}"));
        }
    }
    for (i, l) in s.pem_lines.iter().enumerate() {
        // Whole lines, and the middle 32 characters (a line split or re-wrapped differently).
        if text.contains(l.as_str()) || text.contains(&l[8..40]) {
            found.push(format!("base64 line {i} of the key"));
        }
    }
    let compact: String = text
        .chars()
        .filter(|c| c.is_ascii_hexdigit())
        .collect::<String>()
        .to_lowercase();
    for (n, h) in &s.hex {
        for at in [0, h.len() / 2, h.len() - 32] {
            if compact.contains(&h[at..at + 32]) {
                found.push(format!("hex of {n} (at digit {at})"));
            }
        }
    }
    let digits: String = text.chars().filter(|c| c.is_ascii_digit()).collect();
    for (n, d) in &s.decimal {
        for at in [0, d.len() / 2, d.len() - 32] {
            if digits.contains(&d[at..at + 32]) {
                found.push(format!("decimal of {n} (at digit {at})"));
            }
        }
    }
    found.dedup();
    found
}

fn rsa_key() -> std::path::PathBuf {
    certs_dir().join("rsa2048.key.pem")
}

/// Positive controls: the scanner flags every form it looks for.
#[test]
fn scanner_flags_the_key_in_every_form() {
    let _lock = support::shared();
    let key = rsa_key();
    let s = secrets_of(&key);
    let pem = std::fs::read_to_string(&key).expect("key");
    assert!(!leaks(&pem, &s).is_empty(), "the PEM itself");
    let headless: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    assert!(!leaks(&headless, &s).is_empty(), "base64 without PEM lines");
    let text = Command::new("openssl")
        .args(["rsa", "-noout", "-text", "-in"])
        .arg(&key)
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    let f = leaks(&text, &s);
    for n in ["d", "p", "q"] {
        assert!(
            f.iter().any(|x| x.starts_with(&format!("hex of {n} "))),
            "hex with colons of {n}: {f:?}"
        );
    }
    for (n, d) in &s.decimal {
        let f = leaks(&format!("value={d};"), &s);
        assert!(
            f.iter().any(|x| x.starts_with(&format!("decimal of {n} "))),
            "decimal {n}"
        );
    }
    for (n, h) in &s.hex {
        assert!(
            !leaks(&format!("0x{}", h.to_uppercase()), &s).is_empty(),
            "upper-case hex {n}"
        );
    }
    // And not a false alarm on the certificate (public material only).
    let cert = std::fs::read_to_string(certs_dir().join("rsa2048.cert.pem")).expect("cert");
    assert!(leaks(&cert, &s).is_empty(), "{:?}", leaks(&cert, &s));
}

/// Everything a running gateway says: admin endpoints, the log, the access log.
fn everything(gw: &Gateway) -> String {
    let mut all = String::new();
    for path in [
        "/config_dump",
        "/config_dump?include_eds",
        "/stats",
        "/stats?format=json",
        "/stats/prometheus",
        "/server_info",
        "/certs",
        "/help",
        "/",
    ] {
        let (code, body) = gw.admin_get(path);
        all.push_str(&format!("\n== {path} ({code})\n{body}"));
    }
    let access = gw.dir.path().join("access.log");
    all.push_str(&std::fs::read_to_string(access).unwrap_or_default());
    all.push_str(&gw.log_text());
    all
}

fn traffic(gw: &Gateway) {
    assert_eq!(support::curl_code(&gw.url("/"), "rsa2048.cert.pem"), "200");
    let _ = support::tls_client::handshake(gw.port, &Default::default());
    // A failed handshake too (garbage), so that error paths log.
    let _ = s_client(
        &[
            "-connect",
            &format!("127.0.0.1:{}", gw.port),
            "-tls1_2",
            "-cipher",
            "NULL-SHA",
        ],
        "",
    );
}

fn access_log(format: &str) -> String {
    format!(
        "          access_log:\n          - name: envoy.access_loggers.file\n            typed_config:\n              \"@type\": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog\n              path: {{{{DIR}}}}/access.log\n{format}"
    )
}

/// The key as a flow-style inline data source (`\n` escapes in a double-quoted string).
fn inline_key_yaml() -> String {
    let pem = std::fs::read_to_string(rsa_key()).expect("key");
    format!("{{ inline_string: \"{}\" }}", pem.replace('\n', "\\n"))
}

#[test]
fn running_gateway_never_shows_the_key() {
    let _lock = support::shared();
    let s = secrets_of(&rsa_key());
    let inline = inline_key_yaml();
    let configs = [
        ("plain key file", plain_cert("rsa2048")),
        (
            "inline key",
            format!(
                "            - certificate_chain: {{ filename: {{{{CERTS}}}}/rsa2048.cert.pem }}\n              private_key: {inline}"
            ),
        ),
        (
            "batching provider, key file",
            batching_cert("rsa2048", &[("engine", "software")]),
        ),
        (
            "batching provider, inline key",
            batching_cert("rsa2048", &[])
                .replace("{ filename: {{CERTS}}/rsa2048.key.pem }", &inline),
        ),
    ];
    for (what, certs) in configs {
        let template = direct_response_config(&certs, "", &access_log(""));
        let gw = Gateway::start(&template, &["-l", "trace", "--concurrency", "1"]);
        traffic(&gw);
        let all = everything(&gw);
        assert!(
            all.contains("rsa2048") || all.contains("inline"),
            "{what}: the config dump shows the certificate entry"
        );
        let f = leaks(&all, &s);
        eprintln!("{what}: scanned {} bytes, findings {f:?}", all.len());
        assert!(f.is_empty(), "{what}: the key leaked: {f:?}");
    }
}

/// Positive control with the gateway itself printing: an access log whose format holds one
/// line of the key is flagged.
#[test]
fn scanner_flags_a_key_line_the_gateway_prints() {
    let _lock = support::shared();
    let s = secrets_of(&rsa_key());
    let line = &s.pem_lines[3];
    let template = direct_response_config(
        &plain_cert("rsa2048"),
        "",
        &access_log(&format!(
            "              log_format: {{ text_format_source: {{ inline_string: \"%RESPONSE_CODE% {line}\\n\" }} }}\n"
        )),
    );
    let gw = Gateway::start(&template, &["--concurrency", "1"]);
    traffic(&gw);
    eventually("the access log is written", || {
        std::fs::read_to_string(gw.dir.path().join("access.log"))
            .map(|t| t.contains("200"))
            .unwrap_or(false)
    });
    let log = std::fs::read_to_string(gw.dir.path().join("access.log")).expect("access log");
    let f = leaks(&log, &s);
    assert!(
        f.iter().any(|x| x == "base64 line 3 of the key"),
        "control: not flagged: {f:?}"
    );
}

#[test]
fn rejected_configurations_never_show_the_key() {
    let _lock = support::shared();
    let s = secrets_of(&rsa_key());
    let dir = tempfile::tempdir().expect("tempdir");
    let pem = std::fs::read_to_string(rsa_key()).expect("key");
    let half = dir.path().join("half.key.pem");
    std::fs::write(&half, &pem[..pem.len() / 2]).expect("write");
    let garbled = dir.path().join("garbled.key.pem");
    std::fs::write(&garbled, pem.replace("MII", "M!I")).expect("write");
    let key = rsa_key().display().to_string();
    let inline = inline_key_yaml();
    let entry = |chain: &str, key: &str| {
        format!(
            "            - certificate_chain: {{ filename: {chain} }}\n              private_key: {key}"
        )
    };
    let cert_file = cert("rsa2048.cert.pem");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "key that does not match the certificate",
            direct_response_config(
                &entry(
                    &cert_file,
                    &format!("{{ filename: {} }}", cert("mismatch.key.pem")),
                ),
                "",
                "",
            ),
            "mismatch.key.pem",
        ),
        (
            "inline key that does not match the certificate",
            direct_response_config(&entry(&cert("other.cert.pem"), &inline), "", ""),
            "",
        ),
        (
            "key file given as the certificate chain",
            direct_response_config(&entry(&key, &format!("{{ filename: {key} }}")), "", ""),
            "rsa2048.key.pem",
        ),
        (
            "truncated key file",
            direct_response_config(
                &entry(&cert_file, &format!("{{ filename: {} }}", half.display())),
                "",
                "",
            ),
            "half.key.pem",
        ),
        (
            "garbled key file",
            direct_response_config(
                &entry(
                    &cert_file,
                    &format!("{{ filename: {} }}", garbled.display()),
                ),
                "",
                "",
            ),
            "garbled.key.pem",
        ),
        (
            "inline key with an unknown sibling field",
            direct_response_config(
                &format!(
                    "{}\n              bogus_field: 1",
                    entry(&cert_file, &inline)
                ),
                "",
                "",
            ),
            "",
        ),
        (
            "provider with an inline key and an unknown field",
            direct_response_config(
                &format!(
                    "{}                  bogus_field: 1\n",
                    batching_cert("rsa2048", &[]).replace(
                        "private_key: { filename: {{CERTS}}/rsa2048.key.pem }",
                        &format!("private_key: {inline}")
                    )
                ),
                "",
                "",
            ),
            "",
        ),
        (
            "inline key, then invalid YAML",
            format!(
                "{}  bad: [\n",
                direct_response_config(&entry(&cert_file, &inline), "", "")
            ),
            "",
        ),
        (
            "inline key as a certificate chain",
            direct_response_config(
                &format!(
                    "            - certificate_chain: {inline}\n              private_key: {inline}"
                ),
                "",
                "",
            ),
            "",
        ),
    ];
    for (what, template, mentions) in cases {
        let (code, stderr) = start_expect_failure(&template, &["-l", "trace"], &[]);
        let f = leaks(&stderr, &s);
        let first = stderr.lines().rev().find(|l| !l.trim().is_empty());
        eprintln!("{what}: exit {code}; {first:?}; findings {f:?}");
        assert_ne!(code, 0, "{what}: accepted");
        assert!(
            stderr.contains(mentions),
            "{what}: the error does not mention {mentions}: {stderr}"
        );
        assert!(f.is_empty(), "{what}: the key leaked: {f:?}\n{stderr}");
    }
}

const WARNING: &str = "readable by group or others";

/// A copy of the key in a fresh directory with `mode`, reached directly or through a symlink;
/// the gateway's log after starting on it with `cert` (a `tls_certificates` entry template with
/// `KEY` in place of the key file name).
fn log_with_key(mode: u32, symlink: bool, entry: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("real.key.pem");
    std::fs::copy(rsa_key(), &real).expect("copy");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(mode)).expect("chmod");
    let path = if symlink {
        let link = dir.path().join("link.key.pem");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        link
    } else {
        real
    };
    let entry = entry.replace("KEY", &path.display().to_string());
    let gw = Gateway::start(
        &direct_response_config(&entry, "", ""),
        &["--concurrency", "1"],
    );
    gw.log_text()
}

fn provider_entry() -> String {
    batching_cert("rsa2048", &[("engine", "software")]).replace("{{CERTS}}/rsa2048.key.pem", "KEY")
}

fn plain_entry() -> String {
    plain_cert("rsa2048").replace("{{CERTS}}/rsa2048.key.pem", "KEY")
}

#[test]
fn provider_key_readable_by_others_warns_through_symlinks() {
    let _lock = support::shared();
    // Positive control first: a 0644 file reached through a symlink is flagged.
    let log = log_with_key(0o644, true, &provider_entry());
    assert!(log.contains(WARNING), "0644 through a symlink: {log}");
    assert!(log.contains("0644"), "the mode is named: {log}");
    let log = log_with_key(0o640, false, &provider_entry());
    assert!(log.contains(WARNING), "0640: {log}");
    let log = log_with_key(0o600, true, &provider_entry());
    assert!(!log.contains(WARNING), "0600 through a symlink: {log}");
    let log = log_with_key(0o400, false, &provider_entry());
    assert!(!log.contains(WARNING), "0400: {log}");
}

#[test]
fn plain_key_readable_by_others_warns_through_symlinks() {
    let _lock = support::shared();
    let log = log_with_key(0o600, true, &plain_entry());
    assert!(!log.contains(WARNING), "0600 through a symlink: {log}");
    let log = log_with_key(0o644, true, &plain_entry());
    assert!(log.contains(WARNING), "0644 through a symlink: {log}");
}
