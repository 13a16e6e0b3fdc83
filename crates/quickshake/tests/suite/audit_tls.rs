//! Third-party TLS audits: `sslyze` and `testssl.sh` scan a listener built on quickshake's
//! defaults (TLS 1.2–1.3, Envoy's default cipher list, X25519MLKEM768:X25519:P-256) and must
//! find nothing: no SSLv2/SSLv3/TLS 1.0/TLS 1.1, no weak suite (NULL, anonymous, EXPORT, RC4,
//! RC2, DES/3DES, IDEA, MD5, and CBC MAC-then-encrypt suites), no TLS 1.2 suite without forward
//! secrecy, no insecure or client-initiated renegotiation, no TLS compression, and (sslyze) no
//! Heartbleed, CCS injection, ROBOT, missing TLS_FALLBACK_SCSV or extended master secret.
//!
//! Positive control: the same harness functions must report the expected findings on a
//! deliberately weak listener (TLS 1.0 minimum; ECDHE-RSA-AES128-SHA and AES128-SHA).
//!
//! The tools come from `scripts/setup-audit`. A missing tool fails the test (it does not skip);
//! `QUICKSHAKE_SKIP_AUDITS=1` skips the audits. See docs/reliability-audits.md.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::support;
use crate::support::*;

/// The weak configuration of the positive control.
const WEAK_TLS_PARAMS: &str = "            tls_params:\n              tls_minimum_protocol_version: TLSv1_0\n              cipher_suites: [ECDHE-RSA-AES128-SHA, AES128-SHA]\n";

/// Wall-clock bound for one tool run (the `timeout` command enforces it).
const SSLYZE_TIMEOUT_S: u32 = 120;
const TESTSSL_TIMEOUT_S: u32 = 300;

// ---------------------------------------------------------------------------------------------
// Tools

fn skip_audits() -> bool {
    support::skip::opted_out("audits", "QUICKSHAKE_SKIP_AUDITS")
}

fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The first of `candidates` that exists, else the first of `names` on PATH; panics with the
/// setup hint when there is none.
fn require_tool(what: &str, candidates: &[PathBuf], names: &[&str]) -> PathBuf {
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .or_else(|| names.iter().find_map(|n| on_path(n)))
        .unwrap_or_else(|| {
            panic!(
                "{what} is not installed: run scripts/setup-audit \
                 (or set QUICKSHAKE_SKIP_AUDITS=1 to skip the third-party audits)"
            )
        })
}

fn sslyze_bin() -> PathBuf {
    let root = repo_root();
    require_tool(
        "sslyze",
        &[
            root.join(".venv-audit/bin/sslyze"),
            root.join(".venv/bin/sslyze"),
        ],
        &["sslyze"],
    )
}

fn testssl_bin() -> PathBuf {
    require_tool("testssl.sh", &[], &["testssl", "testssl.sh"])
}

/// Where a scan leaves its report (kept after the run, for a look when a test fails).
fn report_path(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit");
    std::fs::create_dir_all(&dir).expect("create the audit report folder");
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// Run `program args` under `timeout`; stdout+stderr. Panics on a timeout.
fn run_bounded(limit_s: u32, program: &Path, args: &[String]) -> (i32, String) {
    let started = Instant::now();
    let out = Command::new("timeout")
        .arg("--kill-after=10")
        .arg(limit_s.to_string())
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run timeout(1)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code != 124 && code != 137,
        "{} ran past its {limit_s} s bound:\n{text}",
        program.display()
    );
    eprintln!(
        "{} finished in {:.1} s",
        program.display(),
        started.elapsed().as_secs_f64()
    );
    (code, text)
}

// ---------------------------------------------------------------------------------------------
// Findings

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Finding {
    /// A protocol version older than TLS 1.2 is accepted ("SSLv2", "SSLv3", "TLS 1.0", "TLS 1.1").
    Protocol(String),
    /// A weak suite (IANA name, or a testssl.sh category) and why it is weak.
    WeakCipher { cipher: String, why: &'static str },
    /// A suite without an ephemeral key exchange (IANA name).
    NoForwardSecrecy(String),
    /// Insecure (no RFC 5746) or client-initiated renegotiation.
    Renegotiation(String),
    /// TLS-level compression (CRIME).
    Compression,
    /// Another known vulnerability the tool tests for.
    Vulnerability(String),
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Protocol(p) => write!(f, "{p} accepted"),
            Finding::WeakCipher { cipher, why } => write!(f, "weak suite {cipher} ({why})"),
            Finding::NoForwardSecrecy(c) => write!(f, "{c} has no forward secrecy"),
            Finding::Renegotiation(d) => write!(f, "renegotiation: {d}"),
            Finding::Compression => write!(f, "TLS compression accepted"),
            Finding::Vulnerability(v) => write!(f, "vulnerable: {v}"),
        }
    }
}

/// What one tool reported: findings, plus what it saw (for the log and the docs).
struct Audit {
    tool: &'static str,
    findings: BTreeSet<Finding>,
    accepted: Vec<String>,
    report: PathBuf,
}

impl Audit {
    fn describe(&self) -> String {
        let findings: Vec<String> = self.findings.iter().map(|f| format!("  - {f}")).collect();
        format!(
            "{}: {} finding(s) (report: {})\n{}\n  accepted: {}",
            self.tool,
            self.findings.len(),
            self.report.display(),
            findings.join("\n"),
            self.accepted.join(", ")
        )
    }
}

/// Why a suite (IANA name) is weak, if it is. CBC suites count as weak: they are
/// MAC-then-encrypt (Lucky13-style padding oracles), none of them is in Envoy's default list
/// or Mozilla's "intermediate" profile, and the AEAD suites every TLS 1.2 client has make
/// them unnecessary.
fn weakness(iana: &str) -> Option<&'static str> {
    let n = iana.to_ascii_uppercase();
    let has = |s: &str| n.contains(s);
    if has("_NULL_") || n.ends_with("_NULL") || has("WITH_NULL") {
        Some("NULL encryption")
    } else if has("_ANON_") {
        Some("anonymous key exchange")
    } else if has("EXPORT") {
        Some("EXPORT grade")
    } else if has("RC4") {
        Some("RC4")
    } else if has("RC2") {
        Some("RC2")
    } else if has("3DES") || has("DES_") || has("_DES") || has("DES40") {
        Some("DES/3DES (64-bit block)")
    } else if has("IDEA") {
        Some("IDEA (64-bit block)")
    } else if has("MD5") {
        Some("MD5")
    } else if has("_CBC_") {
        Some("CBC MAC-then-encrypt")
    } else {
        None
    }
}

/// Whether a suite (IANA name) has an ephemeral key exchange. TLS 1.3 suites always do.
fn forward_secret(iana: &str) -> bool {
    let n = iana.to_ascii_uppercase();
    !n.contains("_WITH_") || n.starts_with("TLS_ECDHE_") || n.starts_with("TLS_DHE_")
}

fn cipher_findings(iana: &str, findings: &mut BTreeSet<Finding>) {
    if let Some(why) = weakness(iana) {
        findings.insert(Finding::WeakCipher {
            cipher: iana.to_string(),
            why,
        });
    }
    if !forward_secret(iana) {
        findings.insert(Finding::NoForwardSecrecy(iana.to_string()));
    }
}

// ---------------------------------------------------------------------------------------------
// sslyze

const SSLYZE_PROTOCOLS: [(&str, &str); 6] = [
    ("ssl_2_0_cipher_suites", "SSLv2"),
    ("ssl_3_0_cipher_suites", "SSLv3"),
    ("tls_1_0_cipher_suites", "TLS 1.0"),
    ("tls_1_1_cipher_suites", "TLS 1.1"),
    ("tls_1_2_cipher_suites", "TLS 1.2"),
    ("tls_1_3_cipher_suites", "TLS 1.3"),
];

/// Scan 127.0.0.1:`port` with sslyze; its findings. Panics when the scan did not complete.
fn sslyze_audit(port: u16, name: &str) -> Audit {
    let bin = sslyze_bin();
    let report = report_path(&format!("sslyze-{name}.json"));
    let args: Vec<String> = [
        "--sslv2",
        "--sslv3",
        "--tlsv1",
        "--tlsv1_1",
        "--tlsv1_2",
        "--tlsv1_3",
        "--reneg",
        "--compression",
        "--fallback",
        "--ems",
        "--heartbleed",
        "--openssl_ccs",
        "--robot",
        "--mozilla_config",
        "disable",
        "--quiet",
        "--json_out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([report.display().to_string(), format!("127.0.0.1:{port}")])
    .collect();
    let (code, out) = run_bounded(SSLYZE_TIMEOUT_S, &bin, &args);
    assert_eq!(code, 0, "sslyze failed:\n{out}");
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("sslyze report: {e}\n{out}")),
    )
    .expect("sslyze report is JSON");
    let (findings, accepted) = sslyze_findings(&json);
    Audit {
        tool: "sslyze",
        findings,
        accepted,
        report,
    }
}

/// Findings and accepted "version suite" pairs from an sslyze `--json_out` document.
fn sslyze_findings(json: &Value) -> (BTreeSet<Finding>, Vec<String>) {
    let server = &json["server_scan_results"][0];
    assert_eq!(
        server["connectivity_status"], "COMPLETED",
        "sslyze could not connect: {}",
        server["connectivity_error_trace"]
    );
    assert_eq!(server["scan_status"], "COMPLETED", "sslyze: {server}");
    let scan = &server["scan_result"];
    let result = |command: &str| -> &Value {
        let c = &scan[command];
        assert_eq!(
            c["status"], "COMPLETED",
            "sslyze {command} did not complete: {} {}",
            c["error_reason"], c["error_trace"]
        );
        &c["result"]
    };
    let mut findings = BTreeSet::new();
    let mut accepted = Vec::new();
    for (command, version) in SSLYZE_PROTOCOLS {
        let r = result(command);
        let supported = r["is_tls_version_supported"]
            .as_bool()
            .unwrap_or_else(|| panic!("sslyze {command}: no is_tls_version_supported"));
        if supported && matches!(version, "SSLv2" | "SSLv3" | "TLS 1.0" | "TLS 1.1") {
            findings.insert(Finding::Protocol(version.to_string()));
        }
        for suite in r["accepted_cipher_suites"].as_array().into_iter().flatten() {
            let cs = &suite["cipher_suite"];
            let iana = cs["name"].as_str().expect("suite name");
            accepted.push(format!("{version} {iana}"));
            cipher_findings(iana, &mut findings);
            if cs["is_anonymous"].as_bool() == Some(true) {
                findings.insert(Finding::WeakCipher {
                    cipher: iana.to_string(),
                    why: "anonymous key exchange",
                });
            }
            let ephemeral = suite["ephemeral_key"]["type_name"].as_str();
            if !matches!(ephemeral, Some("ECDH" | "DH")) && version != "TLS 1.3" {
                findings.insert(Finding::NoForwardSecrecy(iana.to_string()));
            }
        }
    }
    let reneg = result("session_renegotiation");
    if reneg["supports_secure_renegotiation"] != true {
        findings.insert(Finding::Renegotiation(
            "no secure renegotiation (RFC 5746)".into(),
        ));
    }
    if reneg["is_vulnerable_to_client_renegotiation_dos"] != false {
        findings.insert(Finding::Renegotiation(
            "client-initiated renegotiation accepted".into(),
        ));
    }
    if result("tls_compression")["supports_compression"] != false {
        findings.insert(Finding::Compression);
    }
    if result("tls_fallback_scsv")["supports_fallback_scsv"] != true {
        findings.insert(Finding::Vulnerability("no TLS_FALLBACK_SCSV".into()));
    }
    if result("tls_extended_master_secret")["supports_ems_extension"] != true {
        findings.insert(Finding::Vulnerability("no extended master secret".into()));
    }
    if result("heartbleed")["is_vulnerable_to_heartbleed"] != false {
        findings.insert(Finding::Vulnerability("Heartbleed".into()));
    }
    if result("openssl_ccs_injection")["is_vulnerable_to_ccs_injection"] != false {
        findings.insert(Finding::Vulnerability("CCS injection".into()));
    }
    let robot = result("robot")["robot_result"].as_str().unwrap_or("?");
    if !robot.starts_with("NOT_VULNERABLE") {
        findings.insert(Finding::Vulnerability(format!("ROBOT: {robot}")));
    }
    (findings, accepted)
}

// ---------------------------------------------------------------------------------------------
// testssl.sh

/// Scan 127.0.0.1:`port` with testssl.sh's targeted checks (protocols, cipher categories, each
/// cipher, forward secrecy, renegotiation, compression); its findings.
fn testssl_audit(port: u16, name: &str) -> Audit {
    let bin = testssl_bin();
    let report = report_path(&format!("testssl-{name}.json"));
    let args: Vec<String> = [
        "--protocols",
        "--std",
        "--each-cipher",
        "--fs",
        "--renegotiation",
        "--compression",
        "--nodns",
        "none",
        "--connect-timeout",
        "10",
        "--openssl-timeout",
        "10",
        "--quiet",
        "--warnings",
        "off",
        "--color",
        "0",
        "--jsonfile",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([report.display().to_string(), format!("127.0.0.1:{port}")])
    .collect();
    let (code, out) = run_bounded(TESTSSL_TIMEOUT_S, &bin, &args);
    // testssl.sh's own errors are 242..=255 (ERR_BASH and friends).
    assert!(
        (0..242).contains(&code),
        "testssl.sh failed ({code}):\n{out}"
    );
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(&report)
            .unwrap_or_else(|e| panic!("testssl.sh report: {e}\n{out}")),
    )
    .unwrap_or_else(|e| panic!("testssl.sh report is not JSON: {e}\n{out}"));
    let (findings, accepted) = testssl_findings(&json);
    Audit {
        tool: "testssl.sh",
        findings,
        accepted,
        report,
    }
}

const TESTSSL_PROTOCOLS: [(&str, &str); 4] = [
    ("SSLv2", "SSLv2"),
    ("SSLv3", "SSLv3"),
    ("TLS1", "TLS 1.0"),
    ("TLS1_1", "TLS 1.1"),
];

const TESTSSL_CATEGORIES: [(&str, &str); 6] = [
    ("cipherlist_NULL", "NULL encryption"),
    ("cipherlist_aNULL", "anonymous key exchange"),
    ("cipherlist_EXPORT", "EXPORT grade"),
    ("cipherlist_LOW", "64-bit/DES/RC2/RC4"),
    ("cipherlist_3DES_IDEA", "DES/3DES (64-bit block)"),
    ("cipherlist_AVERAGE", "CBC MAC-then-encrypt"),
];

/// Findings and accepted suites from a testssl.sh `--jsonfile` (flat) document.
fn testssl_findings(json: &Value) -> (BTreeSet<Finding>, Vec<String>) {
    let entries = json.as_array().expect("testssl.sh JSON is an array");
    let has = |id: &str| entries.iter().any(|e| e["id"] == id);
    let entry = |id: &str| -> (&str, &str) {
        let e = entries
            .iter()
            .find(|e| e["id"] == id)
            .unwrap_or_else(|| panic!("testssl.sh did not report {id}: {json}"));
        let severity = e["severity"].as_str().unwrap_or("");
        let finding = e["finding"].as_str().unwrap_or("");
        assert!(
            severity != "WARN" && severity != "FATAL",
            "testssl.sh could not test {id}: {finding}"
        );
        (severity, finding)
    };
    for e in entries {
        assert!(
            e["id"] != "scanProblem" && e["severity"] != "FATAL",
            "testssl.sh scan problem: {e}"
        );
    }
    let offered = |id: &str| -> bool {
        let (_, finding) = entry(id);
        if finding.starts_with("not offered") || finding.starts_with("likely not offered") {
            false
        } else {
            // "offered", "offered (deprecated)", "offered, no cipher", "vulnerable ..."
            true
        }
    };
    let mut findings = BTreeSet::new();
    for (id, version) in TESTSSL_PROTOCOLS {
        if offered(id) {
            findings.insert(Finding::Protocol(version.to_string()));
        }
    }
    for (id, why) in TESTSSL_CATEGORIES {
        let (_, finding) = entry(id);
        assert!(
            finding.starts_with("offered") || finding.starts_with("not offered"),
            "testssl.sh {id}: unexpected finding {finding:?}"
        );
        if finding.starts_with("offered") {
            findings.insert(Finding::WeakCipher {
                cipher: format!("testssl.sh category {id}"),
                why,
            });
        }
    }
    // --each-cipher: "x2f  AES128-SHA  RSA  AES  128  TLS_RSA_WITH_AES_128_CBC_SHA".
    let mut accepted = Vec::new();
    for e in entries {
        let id = e["id"].as_str().unwrap_or("");
        if !id.starts_with("cipher_x") {
            continue;
        }
        let cols: Vec<&str> = e["finding"]
            .as_str()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        assert!(cols.len() >= 6, "testssl.sh {id}: {}", e["finding"]);
        let iana = cols[cols.len() - 1];
        let kx = cols[2];
        accepted.push(format!("{iana} (kx {kx})"));
        cipher_findings(iana, &mut findings);
        let tls13 = !iana.contains("_WITH_");
        if !tls13 && kx != "ECDH" && kx != "DH" {
            findings.insert(Finding::NoForwardSecrecy(iana.to_string()));
        }
    }
    assert!(
        !accepted.is_empty(),
        "testssl.sh --each-cipher found no suite at all: {json}"
    );
    // testssl.sh 3.0 calls it "PFS", 3.1 and later "FS".
    let (_, fs) = entry(if has("FS") { "FS" } else { "PFS" });
    if !fs.starts_with("offered") {
        findings.insert(Finding::NoForwardSecrecy(format!("testssl.sh: {fs}")));
    }
    for (id, what) in [
        ("secure_renego", "renegotiation"),
        ("secure_client_renego", "client-initiated renegotiation"),
    ] {
        let (severity, finding) = entry(id);
        if !matches!(severity, "OK" | "INFO" | "LOW") {
            findings.insert(Finding::Renegotiation(format!("{what}: {finding}")));
        }
    }
    let (severity, _) = entry("CRIME_TLS");
    if !matches!(severity, "OK" | "INFO" | "LOW") {
        findings.insert(Finding::Compression);
    }
    (findings, accepted)
}

// ---------------------------------------------------------------------------------------------
// The tests

fn default_gateway() -> Gateway {
    Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), "", ""),
        &["--concurrency", "2"],
    )
}

fn weak_gateway() -> Gateway {
    Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), WEAK_TLS_PARAMS, ""),
        &["--concurrency", "2"],
    )
}

fn assert_clean(audit: &Audit) {
    eprintln!("{}", audit.describe());
    assert!(
        audit.findings.is_empty(),
        "the default configuration fails the {} audit:\n{}",
        audit.tool,
        audit.describe()
    );
}

/// The findings the weak configuration must produce, whichever tool looks: TLS 1.0 and 1.1,
/// both CBC-SHA1 suites weak, and AES128-SHA (RSA key exchange) without forward secrecy.
fn assert_weak_flagged(audit: &Audit) {
    eprintln!("{}", audit.describe());
    let f = &audit.findings;
    let mut missing = Vec::new();
    let mut expect = |ok: bool, what: &str| {
        if !ok {
            missing.push(what.to_string());
        }
    };
    expect(
        f.contains(&Finding::Protocol("TLS 1.0".into())),
        "TLS 1.0 accepted",
    );
    expect(
        f.contains(&Finding::Protocol("TLS 1.1".into())),
        "TLS 1.1 accepted",
    );
    for suite in [
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA",
    ] {
        expect(
            f.contains(&Finding::WeakCipher {
                cipher: suite.into(),
                why: "CBC MAC-then-encrypt",
            }),
            &format!("{suite} weak (CBC)"),
        );
    }
    expect(
        f.contains(&Finding::NoForwardSecrecy(
            "TLS_RSA_WITH_AES_128_CBC_SHA".into(),
        )),
        "TLS_RSA_WITH_AES_128_CBC_SHA without forward secrecy",
    );
    expect(
        !f.contains(&Finding::NoForwardSecrecy(
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA".into(),
        )),
        "no forward-secrecy finding for the ECDHE suite",
    );
    // Nothing the weak configuration does not have: no SSL, no renegotiation or compression
    // finding, no other vulnerability.
    for other in f {
        let expected = match other {
            Finding::Protocol(p) => p == "TLS 1.0" || p == "TLS 1.1",
            Finding::WeakCipher { why, .. } => *why == "CBC MAC-then-encrypt",
            Finding::NoForwardSecrecy(c) => c == "TLS_RSA_WITH_AES_128_CBC_SHA",
            _ => false,
        };
        expect(expected, &format!("no unexpected finding ({other})"));
    }
    assert!(
        missing.is_empty(),
        "{} misjudges the weak configuration; wanted: {}\n{}",
        audit.tool,
        missing.join("; "),
        audit.describe()
    );
}

#[test]
fn sslyze_default_config_has_no_findings() {
    let _lock = support::shared();
    if skip_audits() {
        return;
    }
    let gw = default_gateway();
    assert_clean(&sslyze_audit(gw.port, "default"));
}

#[test]
fn testssl_default_config_has_no_findings() {
    let _lock = support::shared();
    if skip_audits() {
        return;
    }
    let gw = default_gateway();
    assert_clean(&testssl_audit(gw.port, "default"));
}

/// Positive control: the same harness functions flag a deliberately weak listener.
#[test]
fn sslyze_flags_the_weak_config() {
    let _lock = support::shared();
    if skip_audits() {
        return;
    }
    let gw = weak_gateway();
    assert_weak_flagged(&sslyze_audit(gw.port, "weak"));
}

#[test]
fn testssl_flags_the_weak_config() {
    let _lock = support::shared();
    if skip_audits() {
        return;
    }
    let gw = weak_gateway();
    assert_weak_flagged(&testssl_audit(gw.port, "weak"));
}

/// The classification the two tools share.
#[test]
fn suite_classification() {
    let _lock = support::shared();
    for weak in [
        "TLS_RSA_WITH_RC4_128_SHA",
        "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_RSA_WITH_NULL_SHA256",
        "TLS_DH_anon_WITH_AES_128_GCM_SHA256",
        "TLS_RSA_EXPORT_WITH_RC4_40_MD5",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    ] {
        assert!(weakness(weak).is_some(), "{weak}");
    }
    for strong in [
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
    ] {
        assert!(weakness(strong).is_none(), "{strong}");
        assert!(forward_secret(strong), "{strong}");
    }
    for no_fs in [
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDH_ECDSA_WITH_AES_128_GCM_SHA256",
        "TLS_DH_RSA_WITH_AES_128_GCM_SHA256",
    ] {
        assert!(!forward_secret(no_fs), "{no_fs}");
    }
    assert!(forward_secret("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256"));
}
