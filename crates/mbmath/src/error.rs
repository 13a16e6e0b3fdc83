//! The crate's error type.

use core::fmt;

use crate::kind::BackendKind;

/// Errors of this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MathError {
    /// Key components are malformed or inconsistent.
    InvalidKey(&'static str),
    /// The key or operand size is not supported.
    Unsupported(&'static str),
    /// The input is not smaller than the modulus (or longer than it).
    InputOutOfRange,
    /// A peer's public key is malformed (e.g. an ML-KEM encapsulation key failing FIPS 203's
    /// input checks).
    InvalidPublicKey(&'static str),
    /// The requested backend cannot run on this CPU.
    BackendUnavailable(BackendKind),
}

impl fmt::Display for MathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MathError::InvalidKey(why) => write!(f, "invalid RSA key: {why}"),
            MathError::Unsupported(why) => write!(f, "unsupported: {why}"),
            MathError::InvalidPublicKey(why) => write!(f, "invalid public key: {why}"),
            MathError::InputOutOfRange => write!(f, "input is not smaller than the modulus"),
            MathError::BackendUnavailable(k) => {
                write!(f, "backend {k} is not available on this CPU")
            }
        }
    }
}

impl std::error::Error for MathError {}
