//! What the binary tells this crate: typed options, read once from the command line (with
//! environment fallbacks) by `quickshake` and passed down. Nothing in this crate reads the
//! environment.

use std::path::PathBuf;

/// Which engines may be detected, and where crypto_mb is looked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineOptions {
    /// Engine names to treat as absent (case-insensitive; `all` hides every engine). Tests
    /// and comparisons use it to run the no-engine path on a machine that has the engine.
    pub hide: Vec<String>,
    /// The directory holding the crypto_mb libraries (in it or its `lib/`): the only place
    /// they are loaded from. `None`: the system loader's path (a plain `dlopen` of the SONAME).
    pub crypto_mb_dir: Option<PathBuf>,
}

impl EngineOptions {
    /// Options hiding the engines of a comma-separated list (`crypto_mb,ifma`, `all`).
    pub fn hiding(list: &str) -> Self {
        EngineOptions {
            hide: parse_hide_list(list),
            ..Default::default()
        }
    }

    /// Whether `name` is hidden.
    pub fn hides(&self, name: &str) -> bool {
        self.hide
            .iter()
            .any(|x| x.eq_ignore_ascii_case(name) || x.eq_ignore_ascii_case("all"))
    }

    /// The reason given for a hidden engine.
    pub fn hidden_reason(name: &str) -> String {
        format!("{name} is hidden by QUICKSHAKE_HIDE_ENGINES (--hide-engines)")
    }
}

/// Split a comma-separated hide list; blanks are dropped.
pub fn parse_hide_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// Options of the provider registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderOptions {
    pub engines: EngineOptions,
    /// CPU engines compute on one lower-priority (nice 10) batch thread per worker instead of
    /// on the worker (`--batch-threads`); offload engines always wait off the worker.
    pub batch_threads: bool,
    /// Measure each PKCS#11 token's signatures per second at setup (`quickshake doctor`).
    pub measure_tokens: bool,
    /// Engines the embedding binary adds (`engine: NAME`); none in the release binary.
    pub extra_engines: crate::extension::ExtraEngines,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hide_list_parsing() {
        let o = EngineOptions::hiding("software, crypto_mb");
        assert!(o.hides("crypto_mb") && o.hides("CRYPTO_MB") && o.hides("software"));
        assert!(!o.hides("ifma"));
        assert!(EngineOptions::hiding("ALL").hides("crypto_mb"));
        assert!(!EngineOptions::hiding("software").hides("crypto_mb"));
        assert!(!EngineOptions::hiding("").hides("crypto_mb"));
        assert!(!EngineOptions::default().hides("crypto_mb"));
        assert_eq!(parse_hide_list(" a,,b ,"), vec!["a", "b"]);
    }
}
