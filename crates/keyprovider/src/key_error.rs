//! Why a key is not one providers take: a leaf the key parser, the registry's errors and the
//! `pkcs11` provider all name.

/// Why a key is not one providers take, or cannot be split into engine parts.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("unsupported key type {0:?}: providers take RSA or ECDSA P-256 keys")]
    UnsupportedType(boring::pkey::Id),
    #[error("unreadable {kind} key: {source}")]
    Unreadable {
        kind: &'static str,
        #[source]
        source: boring::error::ErrorStack,
    },
    #[error("RSA-{0} is not supported: providers take RSA 1024, 2048, 3072 or 4096")]
    RsaSize(u32),
    #[error("RSA public exponent must be 65537")]
    RsaExponent,
    #[error("RSA key lacks its CRT parameters")]
    MissingCrt,
    #[error("only the P-256 curve is supported for ECDSA keys")]
    Curve,
    /// BoringSSL failed copying the key's parts.
    #[error(transparent)]
    Boring(#[from] boring::error::ErrorStack),
}
