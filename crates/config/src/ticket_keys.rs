//! Envoy's `TlsSessionTicketKeys` (`{keys: [DataSource, ...]}`), as it appears inline in a
//! `DownstreamTlsContext` and inside an SDS `Secret`. Files are not read here: a key given
//! inline is checked for Envoy's 80 bytes now, one in a file when the context is built.

use crate::model::DataSource;
use crate::source::data_source;
use crate::walk::{Node, Result};

/// Envoy requires session ticket keys of exactly 80 bytes: a 16-byte name, a 32-byte HMAC-SHA256
/// secret and a 32-byte AES-256 secret.
pub const SESSION_TICKET_KEY_LEN: usize = 80;

/// Parse a `TlsSessionTicketKeys` message: at least one key.
pub(crate) fn session_ticket_keys(node: &Node<'_>) -> Result<Vec<DataSource>> {
    let so = node.obj(&["keys"])?;
    let keys = so.req("keys")?;
    let mut out = Vec::new();
    for k in keys.items() {
        let ds = data_source(&k)?;
        let len = match &ds {
            DataSource::InlineString(s) => Some(s.len()),
            DataSource::InlineBytes(b) => Some(b.len()),
            DataSource::Filename(_) => None,
        };
        if let Some(len) = len {
            if len != SESSION_TICKET_KEY_LEN {
                return Err(k.err(format!(
                    "a session ticket key must be {SESSION_TICKET_KEY_LEN} bytes, got {len}"
                )));
            }
        }
        out.push(ds);
    }
    if out.is_empty() {
        return Err(keys.err("at least one key is required"));
    }
    Ok(out)
}
