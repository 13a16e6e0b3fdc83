//! A backend together with its witness token, and the run-time choice of one.

use crate::error::MathError;
use crate::kind::BackendKind;
use crate::token::{Avx2Token, FmaToken, IfmaToken};

/// A backend together with the proof that this CPU can run it.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    /// Scalar code.
    Portable,
    /// AVX2 code.
    Avx2(Avx2Token),
    /// AVX2 + FMA floating-point code.
    Fma(FmaToken),
    /// AVX-512 IFMA code.
    Ifma(IfmaToken),
}

impl Backend {
    /// The backend of kind `kind`, if this CPU supports it.
    pub fn new(kind: BackendKind) -> Result<Backend, MathError> {
        let b = match kind {
            BackendKind::Portable => Some(Backend::Portable),
            BackendKind::Avx2 => Avx2Token::new().map(Backend::Avx2),
            BackendKind::Fma => FmaToken::new().map(Backend::Fma),
            BackendKind::Ifma => IfmaToken::new().map(Backend::Ifma),
        };
        b.ok_or(MathError::BackendUnavailable(kind))
    }

    /// The fastest backend this CPU supports.
    pub fn best() -> Backend {
        IfmaToken::new()
            .map(Backend::Ifma)
            .or_else(|| Avx2Token::new().map(Backend::Avx2))
            .unwrap_or(Backend::Portable)
    }

    /// The kind of this backend.
    pub fn kind(&self) -> BackendKind {
        match self {
            Backend::Portable => BackendKind::Portable,
            Backend::Avx2(_) => BackendKind::Avx2,
            Backend::Fma(_) => BackendKind::Fma,
            Backend::Ifma(_) => BackendKind::Ifma,
        }
    }
}

/// The backends this CPU can run, slowest first (always starts with
/// [`BackendKind::Portable`]).
pub fn available_backends() -> Vec<BackendKind> {
    BackendKind::ALL
        .into_iter()
        .filter(|&k| Backend::new(k).is_ok())
        .collect()
}
