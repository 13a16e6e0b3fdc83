//! A throwaway PKI for the OCSP stapling tests (`tls_ocsp.rs`), made with the `openssl` CLI
//! once per test process: a P-256 CA, certificates for `localhost` (one with the must-staple
//! TLS feature) and OCSP responses for them (`openssl ocsp -index ... -respout`), valid, without
//! nextUpdate, and backdated.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::cert;

/// The run's CA, certificates and OCSP responses (made once per test process).
pub struct Pki {
    pub dir: PathBuf,
}

impl Pki {
    pub fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is installed (scripts/setup)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn serial_hex(dir: &Path, cert_file: &str) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-in", cert_file])
        .current_dir(dir)
        .output()
        .expect("openssl x509");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("serial=")
        .to_string()
}

/// `openssl ocsp` answering for `cert_file` from the CA's index; `-ndays` when given.
pub fn respond(dir: &Path, cert_file: &str, out: &str, ndays: Option<&str>) {
    let mut args = vec![
        "ocsp",
        "-index",
        "index.txt",
        "-rsigner",
        "ca.pem",
        "-rkey",
        "ca.key",
        "-CA",
        "ca.pem",
        "-issuer",
        "ca.pem",
        "-cert",
        cert_file,
        "-respout",
        out,
    ];
    if let Some(n) = ndays {
        args.extend(["-ndays", n]);
    }
    openssl(dir, &args);
}

/// A copy of a response whose nextUpdate is 2020-01-01 (the response is no longer validly
/// signed, which no server checks).
fn backdate(der: &[u8]) -> Vec<u8> {
    // nextUpdate [0] EXPLICIT GeneralizedTime of 15 characters.
    let marker = [0xa0, 0x11, 0x18, 0x0f];
    let at = der
        .windows(4)
        .position(|w| w == marker)
        .expect("a nextUpdate")
        + 4;
    let mut out = der.to_vec();
    out[at..at + 15].copy_from_slice(b"20200101000000Z");
    out
}

pub fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        // Under target/tmp, kept (a static is never dropped); earlier runs' are removed after an
        // hour (a run lasts seconds), so they do not pile up.
        remove_stale(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let dir = tempfile::Builder::new()
            .prefix("ocsp-pki-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("tempdir")
            .keep();
        let d = dir.as_path();
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        let mut req = vec!["req", "-x509"];
        req.extend(ec);
        req.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-subj",
            "/CN=quickshake OCSP test CA",
            "-days",
            "2",
        ]);
        openssl(d, &req);
        // srv and other: plain; must: with the must-staple TLS feature. All for localhost.
        for (name, serial, ext) in [
            ("srv", "0x1001", ""),
            ("other", "0x1002", ""),
            ("must", "0x1003", "tlsfeature=status_request\n"),
        ] {
            let (key, csr, crt) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.pem"),
            );
            let mut req = vec!["req"];
            req.extend(ec);
            req.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=localhost"]);
            openssl(d, &req);
            let extfile = format!("{name}.ext");
            std::fs::write(
                d.join(&extfile),
                format!("subjectAltName=DNS:localhost\n{ext}"),
            )
            .expect("extfile");
            openssl(
                d,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-set_serial",
                    serial,
                    "-days",
                    "2",
                    "-extfile",
                    &extfile,
                    "-out",
                    &crt,
                ],
            );
        }
        // The repository's RSA certificate gets a response from this CA too (the serial is
        // all a staple names).
        let rsa = cert("rsa2048.cert.pem");
        let mut index = String::new();
        for c in ["srv.pem", "other.pem", "must.pem", rsa.as_str()] {
            let serial = serial_hex(d, c);
            index.push_str(&format!(
                "V\t301231235959Z\t\t{serial}\tunknown\t/CN={serial}\n"
            ));
        }
        std::fs::write(d.join("index.txt"), index).expect("index");
        std::fs::write(d.join("index.txt.attr"), "unique_subject = no\n").expect("attr");
        respond(d, "srv.pem", "srv.der", Some("1"));
        respond(d, "srv.pem", "srv-nonext.der", None);
        respond(d, "other.pem", "other.der", Some("1"));
        respond(d, "must.pem", "must.der", Some("1"));
        respond(d, "must.pem", "must-nonext.der", None);
        respond(d, &rsa, "rsa.der", Some("1"));
        let good = std::fs::read(d.join("srv.der")).expect("srv.der");
        std::fs::write(d.join("srv-past.der"), backdate(&good)).expect("srv-past.der");
        std::fs::write(d.join("garbage.der"), b"not an OCSP response\n").expect("garbage");
        Pki { dir }
    })
}

/// Remove `ocsp-pki-*` directories older than an hour.
fn remove_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > 3600);
        if old && e.file_name().to_string_lossy().starts_with("ocsp-pki-") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
