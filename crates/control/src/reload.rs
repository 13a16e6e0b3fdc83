//! Certificate rotation without restarts. A watcher thread polls the files each listener's TLS
//! contexts were built from (certificate chains, keys, OCSP staples, provider keys, trusted CAs,
//! session ticket keys, SDS secret files, `watched_directory` entries such as Kubernetes'
//! `..data` symlink) and, when one changes, rebuilds that listener's filter chains and swaps
//! them in. Open connections keep the
//! contexts they started with; queued provider operations keep their key. A new pair that does
//! not load (unreadable, half-written, mismatched) is rejected with a log line and a counter,
//! and the old one keeps serving.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use quickshake_config::{
    load_sds_session_ticket_keys, load_sds_tls_certificate, DataSource, Listener, TlsCertificate,
};
use quickshake_keyprovider::Providers;
use quickshake_listener::ListenerShared;
use quickshake_stats::{Counter, Store};
use quickshake_upstream::ClusterManager;

/// What a file looks like now: enough to notice a rewrite or a symlink swap.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileSig {
    modified: Option<std::time::SystemTime>,
    len: u64,
    inode: u64,
    link: Option<PathBuf>,
}

fn signature(path: &Path) -> Option<FileSig> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    // For a watched directory, Kubernetes swaps the `..data` symlink atomically.
    let link = std::fs::read_link(path.join("..data")).ok();
    Some(FileSig {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: meta.ino(),
        link,
    })
}

fn file_of(ds: &DataSource) -> Option<PathBuf> {
    match ds {
        DataSource::Filename(p) => Some(p.clone()),
        _ => None,
    }
}

fn cert_files(cert: &TlsCertificate, out: &mut Vec<PathBuf>) {
    out.extend(file_of(&cert.certificate_chain));
    out.extend(cert.private_key.as_ref().and_then(file_of));
    out.extend(cert.watched_directory.clone());
    out.extend(cert.ocsp_staple.as_ref().and_then(file_of));
    if let Some(p) = &cert.private_key_provider {
        out.extend(quickshake_keyprovider::key_files(p));
    }
}

/// Every file a listener's TLS contexts depend on (SDS secrets resolved as they are now).
pub(crate) fn watched_files(listener: &Listener) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for chain in &listener.filter_chains {
        let Some(tls) = &chain.tls else { continue };
        for cert in &tls.certificates {
            cert_files(cert, &mut out);
        }
        for sds in &tls.sds_certificates {
            out.extend(sds.file().map(Path::to_path_buf));
            if let Ok(cert) = load_sds_tls_certificate(sds) {
                cert_files(&cert, &mut out);
            }
        }
        out.extend(tls.trusted_ca.as_ref().and_then(file_of));
        out.extend(tls.session_ticket_keys.iter().filter_map(file_of));
        if let Some(sds) = &tls.session_ticket_keys_sds {
            out.extend(sds.file().map(Path::to_path_buf));
            if let Ok(keys) = load_sds_session_ticket_keys(sds) {
                out.extend(keys.iter().filter_map(file_of));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

struct Watched {
    cfg: Listener,
    shared: Arc<ListenerShared>,
    sigs: HashMap<PathBuf, Option<FileSig>>,
    success: Counter,
    rejected: Counter,
    sds_updates: Counter,
}

impl Watched {
    fn snapshot(&mut self) {
        self.sigs = watched_files(&self.cfg)
            .into_iter()
            .map(|p| (p.clone(), signature(&p)))
            .collect();
    }

    /// Whether any file of the last snapshot changed. The file list itself only changes when
    /// a watched file (an SDS secret file naming other files) changes, so it is not re-derived
    /// (and SDS files not re-parsed) on every poll.
    fn changed(&self) -> bool {
        self.sigs.iter().any(|(p, old)| *old != signature(p))
    }
}

/// Start the watcher thread for the given listeners, checking their files every `interval`.
/// It runs for the life of the process.
pub fn spawn(
    listeners: Vec<(Listener, Arc<ListenerShared>)>,
    store: Store,
    providers: Arc<Providers>,
    clusters: ClusterManager,
    interval: Duration,
) {
    let mut watched: Vec<Watched> = listeners
        .into_iter()
        .filter(|(cfg, _)| cfg.filter_chains.iter().any(|c| c.tls.is_some()))
        .map(|(cfg, shared)| {
            let c = |n: &str| store.counter(&format!("{}{n}", shared.scope));
            let mut w = Watched {
                success: c("ssl.context_reload_success"),
                rejected: c("ssl.context_reload_rejected"),
                sds_updates: c("server_ssl_socket_factory.ssl_context_update_by_sds"),
                cfg,
                shared,
                sigs: HashMap::new(),
            };
            w.snapshot();
            w
        })
        .collect();
    if watched.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("qs-reload".into())
        .spawn(move || loop {
            std::thread::sleep(interval);
            for w in &mut watched {
                if w.changed() {
                    reload(w, &store, &providers, &clusters);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the certificate watcher; rotation needs a restart");
    }
}

fn reload(w: &mut Watched, store: &Store, providers: &Providers, clusters: &ClusterManager) {
    // Remember what we saw first: a half-written file that fails now is retried when it changes
    // again (its writer finishing changes its size or time).
    w.snapshot();
    match w.shared.build_update(&w.cfg, store, providers, clusters) {
        Ok(update) => {
            w.shared.update(update);
            w.success.inc();
            if w.cfg.filter_chains.iter().any(|c| {
                c.tls.as_ref().is_some_and(|t| {
                    !t.sds_certificates.is_empty() || t.session_ticket_keys_sds.is_some()
                })
            }) {
                w.sds_updates.inc();
            }
            tracing::info!(listener = %w.shared.name, "certificates reloaded; new handshakes use them");
        }
        Err(e) => {
            w.rejected.inc();
            tracing::error!(listener = %w.shared.name, error = %e, "certificate reload rejected; the previous certificates keep serving");
        }
    }
}
