//! The accepted resources as the client keeps them: by kind and name, each with its version and
//! JSON form; and the reason type of a resource the data path cannot serve.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::Value;

use crate::kind::Kind;

/// Why the data path cannot serve one resource (a [`crate::accept::Fault`]'s reason): its
/// `Display` (the whole source chain's text is the sink's to include) goes into the NACK's
/// `error_detail`.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// One accepted resource.
#[derive(Debug, Clone)]
pub struct Entry {
    pub version: String,
    /// Its JSON form (with key material: never log it; the dump redacts it).
    pub json: Value,
    pub last_updated: SystemTime,
}

/// Every accepted resource, by kind and name.
pub type Resources = BTreeMap<Kind, BTreeMap<String, Entry>>;
