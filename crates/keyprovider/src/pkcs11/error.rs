//! Why a `pkcs11` provider cannot start: the module, the token, the key check, the pool.

use std::path::PathBuf;

use crate::key_error::KeyError;
use crate::padding::PaddingError;

/// Why [`super::build`] failed (the registry names the config field).
#[derive(Debug, thiserror::Error)]
pub enum Pkcs11Error {
    #[error("PKCS#11 module table poisoned")]
    ModuleTablePoisoned,
    #[error("cannot load PKCS#11 module {}: {source}", module.display())]
    LoadModule {
        module: PathBuf,
        #[source]
        source: cryptoki::error::Error,
    },
    /// `C_Initialize` failed (the call and its `CKR_*` name).
    #[error("PKCS#11 module {}: C_Initialize failed: {source}", module.display())]
    Initialize {
        module: PathBuf,
        #[source]
        source: TokenError,
    },
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error(
        "token '{token}' offers no RSA signing mechanism (CKM_RSA_PKCS_PSS, CKM_RSA_PKCS \
         or CKM_RSA_X_509 with CKF_SIGN)"
    )]
    NoRsaMechanism { token: String },
    #[error("key {key} on token '{token}' does not match the certificate: {source}")]
    Mismatch {
        key: String,
        token: String,
        #[source]
        source: MismatchError,
    },
    /// The certificate's own key (for `fallback`) or its public key is not one providers take.
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("cannot start PKCS#11 pool thread: {0}")]
    PoolThread(#[source] std::io::Error),
}

/// Why the token's key does not match the certificate (the start-up test signature).
#[derive(Debug, thiserror::Error)]
pub enum MismatchError {
    #[error("the certificate's key is not {0}, the token's is")]
    CertificateKeyType(&'static str),
    #[error("different RSA modulus")]
    Modulus,
    #[error("the test signature does not verify")]
    DoesNotVerify,
    #[error("{0}")]
    Hash(#[source] PaddingError),
    #[error("padding: {0}")]
    Padding(#[source] PaddingError),
    #[error(transparent)]
    Boring(#[from] boring::error::ErrorStack),
    #[error(transparent)]
    Token(#[from] TokenError),
}

/// Why a token call failed; `session_lost` says the session must be reopened (the token went
/// away, the session closed, the login was lost).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    pub message: String,
    pub session_lost: bool,
}

impl TokenError {
    pub(super) fn new(message: impl Into<String>) -> Self {
        TokenError {
            message: message.into(),
            session_lost: true,
        }
    }
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TokenError {}
