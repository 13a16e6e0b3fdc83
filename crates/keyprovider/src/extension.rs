//! Engines the embedding binary supplies: a `quickshake.batching` provider's `engine: NAME`,
//! where NAME is none of this crate's engines, is built by the [`EngineFactory`] the binary
//! registered under NAME ([`ExtraEngines`], in [`ProviderOptions`](crate::ProviderOptions)).
//! The factory reads its own settings block, `typed_config.NAME`, and names the field of every
//! error in it.
//!
//! The release `quickshake` registers none. The test-only `quickshake-test` registers the
//! fault-injecting engine (`engine: fault`, in `quickshake-test-support`), so a test double
//! never ships in the product; a release binary refuses such a config at load
//! ([`unknown_engine`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::engine::Engine;
use crate::error::ProviderError;

/// Builds one provider's engine of a kind this crate does not hold.
pub trait EngineFactory: Send + Sync {
    /// A new engine for one provider. `settings` is the provider's `typed_config.NAME` block
    /// (`None` when the config has none) and `path` that block's field path: every error in
    /// it names its field under `path`, and unknown fields are errors.
    fn build(&self, settings: Option<&Value>, path: &str)
        -> Result<Arc<dyn Engine>, ProviderError>;
}

/// The engines the embedding binary adds, by the name `engine:` selects them with.
#[derive(Clone, Default)]
pub struct ExtraEngines {
    by_name: BTreeMap<String, Arc<dyn EngineFactory>>,
}

impl ExtraEngines {
    /// These engines and `factory` as `name` (replacing one of that name).
    pub fn with(mut self, name: &str, factory: Arc<dyn EngineFactory>) -> Self {
        self.by_name.insert(name.to_owned(), factory);
        self
    }

    /// The factory registered as `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn EngineFactory>> {
        self.by_name.get(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

impl fmt::Debug for ExtraEngines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// The same names, each with the same factory.
impl PartialEq for ExtraEngines {
    fn eq(&self, other: &Self) -> bool {
        self.by_name.len() == other.by_name.len()
            && self
                .by_name
                .iter()
                .zip(&other.by_name)
                .all(|((a, fa), (b, fb))| a == b && Arc::ptr_eq(fa, fb))
    }
}

impl Eq for ExtraEngines {}

/// Engines that exist only in test binaries, with where they are.
const TEST_ENGINES: [(&str, &str); 1] = [("fault", "quickshake-test")];

/// The error for `engine: NAME` (at `path`) that neither this crate nor `extra` has.
pub fn unknown_engine(name: &str, path: String, extra: &ExtraEngines) -> ProviderError {
    let mut known = crate::config::BUILT_IN_ENGINES.to_owned();
    for n in extra.names() {
        known.push_str(", ");
        known.push_str(n);
    }
    let reason = match TEST_ENGINES.iter().find(|(n, _)| *n == name) {
        Some((n, binary)) => format!(
            "'{n}' is a test engine: it is built only into the test-only `{binary}` binary, \
             not into this one (expected {known})"
        ),
        None => format!("unknown engine '{name}' (expected {known})"),
    };
    ProviderError::Invalid {
        field: path,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_engine_is_refused_naming_its_field_and_binary() {
        let err = unknown_engine(
            "fault",
            "p.typed_config.engine".into(),
            &ExtraEngines::default(),
        )
        .to_string();
        assert!(
            err.starts_with("p.typed_config.engine: 'fault' is a test engine")
                && err.contains("`quickshake-test`"),
            "{err}"
        );
        let err = unknown_engine("bogus", "e".into(), &ExtraEngines::default()).to_string();
        assert!(
            err.starts_with("e: unknown engine 'bogus' (expected auto, "),
            "{err}"
        );
    }
}
