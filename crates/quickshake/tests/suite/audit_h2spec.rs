//! Third-party HTTP/2 audit: h2spec (strict mode, over TLS with ALPN h2) against the default
//! listener. Every failing case must be listed, with its reason, in
//! testdata/h2spec-expected-failures.txt; any other failure fails the test. A listed case that
//! passes is printed and does not fail (several listed cases depend on timing).
//!
//! h2spec comes from `scripts/setup-audit`. A missing h2spec fails the test (it does not skip);
//! `QUICKSHAKE_SKIP_AUDITS=1` skips the audit. See docs/reliability-audits.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::support;
use crate::support::*;

/// Wall-clock bound for one h2spec run (the `timeout` command enforces it).
const H2SPEC_TIMEOUT_S: u32 = 180;
/// h2spec 2.2.1 has 146 cases in strict mode; fewer means it did not run them all.
const MIN_CASES: usize = 140;

fn skip_audits() -> bool {
    support::skip::opted_out("audits", "QUICKSHAKE_SKIP_AUDITS")
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// h2spec on PATH, else in Go's bin folder (`go install` puts it there).
fn h2spec_bin() -> PathBuf {
    if let Some(p) = on_path("h2spec") {
        return p;
    }
    let mut dirs = Vec::new();
    if let Some(gobin) = std::env::var_os("GOBIN") {
        dirs.push(PathBuf::from(gobin));
    }
    if let Ok(out) = Command::new("go").args(["env", "GOPATH"]).output() {
        let gopath = String::from_utf8_lossy(&out.stdout).trim().to_string();
        for p in std::env::split_paths(&gopath) {
            dirs.push(p.join("bin"));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join("go/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("h2spec"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "h2spec is not installed: run scripts/setup-audit \
                 (or set QUICKSHAKE_SKIP_AUDITS=1 to skip the third-party audits)"
            )
        })
}

/// One h2spec case from the JUnit report.
#[derive(Debug)]
struct Case {
    desc: String,
    failed: bool,
    skipped: bool,
    detail: String,
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(unescape(&tag[start..start + len]))
}

fn unescape(s: &str) -> String {
    s.replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#xA;", "\n")
        .replace("&#x9;", "\t")
        .replace("&amp;", "&")
}

/// Parse h2spec's JUnit report into `id -> case`, where the id is what h2spec takes on its
/// command line: `<suite package>/<1-based position in the suite>` (`http2/6.9.1/2`).
/// (h2spec numbers a group's cases in order, strict ones last, and the report lists them in
/// that order; with `--strict` every case runs, so positions and numbers agree.)
fn parse_junit(xml: &str) -> BTreeMap<String, Case> {
    let mut cases = BTreeMap::new();
    for suite in xml.split("<testsuite ").skip(1) {
        let head = &suite[..suite.find('>').expect("testsuite tag")];
        let package = attr(head, "package").expect("testsuite package");
        let declared: usize = attr(head, "tests")
            .and_then(|n| n.parse().ok())
            .expect("testsuite tests");
        let body = &suite[..suite.find("</testsuite>").unwrap_or(suite.len())];
        let mut n = 0;
        for case in body.split("<testcase ").skip(1) {
            n += 1;
            let tag = &case[..case.find('>').expect("testcase tag")];
            let inner = &case[tag.len()..case.find("</testcase>").unwrap_or(case.len())];
            let failed = inner.contains("<failure") || inner.contains("<error");
            let detail = if failed {
                unescape(
                    inner
                        .trim_start_matches('>')
                        .replace("<failure>", "")
                        .replace("</failure>", "")
                        .replace("<error>", "")
                        .replace("</error>", "")
                        .trim(),
                )
            } else {
                String::new()
            };
            cases.insert(
                format!("{package}/{n}"),
                Case {
                    desc: attr(tag, "classname").unwrap_or_default(),
                    failed,
                    skipped: inner.contains("<skipped"),
                    detail,
                },
            );
        }
        assert_eq!(
            n, declared,
            "h2spec suite {package}: {n} cases, {declared} declared"
        );
    }
    cases
}

/// `id -> reason` from testdata/h2spec-expected-failures.txt (`# comments`, blank lines).
fn expected_failures() -> BTreeMap<String, String> {
    let path = testdata("h2spec-expected-failures.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (id, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        assert!(
            !reason.trim().is_empty(),
            "{}:{}: {id} needs a reason",
            path.display(),
            i + 1
        );
        assert!(
            out.insert(id.to_string(), reason.trim().to_string())
                .is_none(),
            "{}:{}: {id} listed twice",
            path.display(),
            i + 1
        );
    }
    out
}

/// What the run means against the expected-failure list.
struct Verdict {
    /// What fails the test: unlisted failures, listed ids h2spec does not have.
    problems: Vec<String>,
    /// What is only printed: listed cases that failed, listed cases that passed this time.
    notes: Vec<String>,
}

fn judge(cases: &BTreeMap<String, Case>, expected: &BTreeMap<String, String>) -> Verdict {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    for id in expected.keys() {
        match cases.get(id) {
            None => problems.push(format!(
                "{id} is listed in testdata/h2spec-expected-failures.txt but h2spec has no such case"
            )),
            Some(c) if c.failed => notes.push(format!("{id} failed, as expected ({})", c.desc)),
            Some(c) => notes.push(format!(
                "expected failure {id} PASSED this run ({}); it stays listed in \
                 testdata/h2spec-expected-failures.txt while it is timing-dependent",
                c.desc
            )),
        }
    }
    for (id, c) in cases {
        if c.failed && !expected.contains_key(id) {
            problems.push(format!(
                "{id} failed and is not in testdata/h2spec-expected-failures.txt: {}\n{}",
                c.desc, c.detail
            ));
        }
    }
    Verdict { problems, notes }
}

#[test]
fn judge_fails_only_on_unlisted_failures() {
    let _lock = support::shared();
    let case = |failed: bool| Case {
        desc: "d".into(),
        failed,
        skipped: false,
        detail: "why".into(),
    };
    let cases: BTreeMap<String, Case> = [
        ("http2/1/1".to_string(), case(false)),
        ("http2/1/2".to_string(), case(true)),
        ("http2/1/3".to_string(), case(false)),
    ]
    .into_iter()
    .collect();
    let listed = |ids: &[&str]| -> BTreeMap<String, String> {
        ids.iter()
            .map(|i| (i.to_string(), "reason".to_string()))
            .collect()
    };
    // Listed failure: fine. Listed pass: printed only.
    let v = judge(&cases, &listed(&["http2/1/2", "http2/1/3"]));
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert!(
        v.notes.iter().any(|n| n.contains("http2/1/3 PASSED")),
        "{:?}",
        v.notes
    );
    // Unlisted failure: fails.
    let v = judge(&cases, &listed(&[]));
    assert_eq!(v.problems.len(), 1, "{:?}", v.problems);
    assert!(v.problems[0].starts_with("http2/1/2 failed"));
    // A listed id h2spec does not have: fails (a typo would hide nothing).
    let v = judge(&cases, &listed(&["http2/1/2", "http2/9/9"]));
    assert_eq!(v.problems.len(), 1, "{:?}", v.problems);
}

#[test]
fn expected_failures_file_parses() {
    let _lock = support::shared();
    let expected = expected_failures();
    for id in expected.keys() {
        let mut parts = id.split('/');
        let ok = matches!(parts.next(), Some("generic" | "http2" | "hpack"))
            && parts.next().is_some()
            && parts.next().is_some_and(|n| n.parse::<u32>().is_ok())
            && parts.next().is_none();
        assert!(ok, "not an h2spec case id: {id}");
    }
}

#[test]
fn junit_ids_follow_h2spec_numbering() {
    let _lock = support::shared();
    let xml = r#"<testsuites>
  <testsuite name="6.9.1. The Flow-Control Window" package="http2/6.9.1" id="6.9.1" tests="3" skipped="0" failures="1" errors="0">
    <testcase package="http2/6.9.1" classname="a" time="0.0001"></testcase>
    <testcase package="http2/6.9.1" classname="b &#34;x&#34;" time="0.0001"><error>Expect:
boom</error></testcase>
    <testcase package="http2/6.9.1" classname="c" time="0.0001"></testcase>
  </testsuite>
</testsuites>"#;
    let cases = parse_junit(xml);
    assert_eq!(cases.len(), 3);
    assert!(!cases["http2/6.9.1/1"].failed);
    assert!(cases["http2/6.9.1/2"].failed);
    assert_eq!(cases["http2/6.9.1/2"].desc, "b \"x\"");
    assert!(cases["http2/6.9.1/2"].detail.contains("boom"));
}

#[test]
fn h2spec_default_listener() {
    let _lock = support::shared();
    if skip_audits() {
        return;
    }
    let bin = h2spec_bin();
    let expected = expected_failures();
    let gw = Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), "", ""),
        &["--concurrency", "2"],
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit");
    std::fs::create_dir_all(&dir).expect("create the audit report folder");
    let report = dir.join("h2spec-default.xml");
    let _ = std::fs::remove_file(&report);
    let started = Instant::now();
    let out = Command::new("timeout")
        .arg("--kill-after=10")
        .arg(H2SPEC_TIMEOUT_S.to_string())
        .arg(&bin)
        .args(["--tls", "--insecure", "--strict", "--timeout", "2"])
        .args(["--host", "127.0.0.1", "--port", &gw.port.to_string()])
        .arg("--junit-report")
        .arg(&report)
        .stdin(Stdio::null())
        .output()
        .expect("run timeout(1)");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code != 124 && code != 137,
        "h2spec ran past its {H2SPEC_TIMEOUT_S} s bound:\n{text}"
    );
    let xml = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("h2spec wrote no report ({}): {e}\n{text}", out.status));
    let cases = parse_junit(&xml);
    assert!(
        cases.len() >= MIN_CASES,
        "h2spec ran only {} cases:\n{text}",
        cases.len()
    );

    let failed: Vec<&String> = cases
        .iter()
        .filter(|(_, c)| c.failed)
        .map(|(id, _)| id)
        .collect();
    let skipped = cases.values().filter(|c| c.skipped).count();
    eprintln!(
        "h2spec {}: {} cases, {} passed, {} failed, {} skipped in {:.1} s (report: {})",
        bin.display(),
        cases.len(),
        cases.len() - failed.len() - skipped,
        failed.len(),
        skipped,
        started.elapsed().as_secs_f64(),
        report.display()
    );
    let verdict = judge(&cases, &expected);
    for line in &verdict.notes {
        eprintln!("h2spec: {line}");
    }
    assert!(
        verdict.problems.is_empty(),
        "h2spec audit failed:\n{}\n\nh2spec output:\n{text}",
        verdict.problems.join("\n\n")
    );
    // The listener still serves after the fuzzing.
    let ca = cert("rsa2048.cert.pem");
    let out = curl(&["--http2", "--cacert", &ca, &gw.url("/")]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello from quickshake",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
