//! Keys of the committed certificates, and `quickshake.batching` provider entries as the config
//! parser produces them (for tests that drive the key provider without a gateway).

use boring::pkey::{PKey, Public};
use boring::x509::X509;
use quickshake_config::PrivateKeyProvider;

/// The public key of `testdata/certs/<name>.cert.pem`.
pub fn public_key(name: &str) -> PKey<Public> {
    let pem = crate::paths::read_cert(&format!("{name}.cert.pem"));
    X509::from_pem(&pem)
        .and_then(|c| c.public_key())
        .expect("cert public key")
}

/// A `quickshake.batching` entry of the first listener's first certificate, with `typed_config`
/// (a JSON object) and `fallback`.
pub fn batching_provider(typed_config: serde_json::Value, fallback: bool) -> PrivateKeyProvider {
    PrivateKeyProvider {
        path: "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config\
               .common_tls_context.tls_certificates[0].private_key_provider"
            .into(),
        provider_name: "quickshake.batching".into(),
        type_url: "type.googleapis.com/quickshake.private_key_providers.v1.BatchingConfig".into(),
        typed_config: typed_config
            .as_object()
            .cloned()
            .expect("typed_config is an object"),
        fallback,
    }
}
