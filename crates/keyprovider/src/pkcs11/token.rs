//! One PKCS#11 module and token, through `cryptoki`: loading and initialising a module once
//! per process, finding the token (label or serial) and the private key (label or id), and a
//! logged-in session that signs and decrypts with it. Calls block; callers run them off the
//! workers. Key material never leaves the token: only public attributes are read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::rsa::{PkcsMgfType, PkcsPssParams};
use cryptoki::mechanism::{Mechanism, MechanismType};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::{Limit, Slot};
use cryptoki::types::AuthPin;

use super::config::{hex, Pin, Pkcs11Config, WantedKey};
use super::error::Pkcs11Error;
pub use super::error::TokenError;
use crate::padding::{Digest, SignView};

/// `CKR_DEVICE_REMOVED`-style name of a PKCS#11 return value.
pub fn ckr(rv: RvError) -> String {
    let camel = format!("{rv:?}");
    let mut out = String::from("CKR_");
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn describe(what: &str, e: &CkError) -> TokenError {
    match e {
        CkError::Pkcs11(rv, _) => {
            // Errors about the input or the mechanism leave the session usable.
            let lost = !matches!(
                rv,
                RvError::DataLenRange
                    | RvError::DataInvalid
                    | RvError::EncryptedDataInvalid
                    | RvError::EncryptedDataLenRange
                    | RvError::MechanismInvalid
                    | RvError::KeyFunctionNotPermitted
                    | RvError::KeyTypeInconsistent
            );
            TokenError {
                message: format!("{what}: {}", ckr(*rv)),
                session_lost: lost,
            }
        }
        other => TokenError::new(format!("{what}: {other}")),
    }
}

/// The loaded modules, by path: a module is initialised once per process and never finalised
/// (finalising would close every other user's sessions).
pub fn load_module(path: &Path) -> Result<Pkcs11, Pkcs11Error> {
    static MODULES: OnceLock<Mutex<HashMap<PathBuf, Pkcs11>>> = OnceLock::new();
    let modules = MODULES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut m = modules
        .lock()
        .map_err(|_| Pkcs11Error::ModuleTablePoisoned)?;
    if let Some(ctx) = m.get(path) {
        return Ok(ctx.clone());
    }
    let ctx = Pkcs11::new(path).map_err(|source| Pkcs11Error::LoadModule {
        module: path.to_path_buf(),
        source,
    })?;
    match ctx.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
        Err(e) => {
            return Err(Pkcs11Error::Initialize {
                module: path.to_path_buf(),
                source: describe("C_Initialize", &e),
            })
        }
    }
    m.insert(path.to_path_buf(), ctx.clone());
    Ok(ctx)
}

/// The token a config names, as found.
#[derive(Debug, Clone)]
pub struct FoundToken {
    pub slot: Slot,
    pub label: String,
    pub serial: String,
    pub model: String,
    pub manufacturer: String,
    /// The most sessions the token allows (`ulMaxSessionCount`), when it says.
    pub max_sessions: Option<u64>,
}

/// Find the token by label and/or serial among the slots that hold one now.
pub fn find_token(ctx: &Pkcs11, cfg: &Pkcs11Config) -> Result<FoundToken, TokenError> {
    let slots = ctx
        .get_slots_with_token()
        .map_err(|e| describe("C_GetSlotList", &e))?;
    let mut seen = Vec::new();
    for slot in slots {
        // A token being rewritten (another process logging in) can fail to read once.
        let info = match ctx.get_token_info(slot).or_else(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            ctx.get_token_info(slot)
        }) {
            Ok(info) => info,
            Err(e) => {
                seen.push(format!(
                    "slot {}: {}",
                    slot.id(),
                    describe("C_GetTokenInfo", &e)
                ));
                continue;
            }
        };
        let label = info.label().trim().to_string();
        let serial = info.serial_number().trim().to_string();
        let label_ok = cfg.token_label.as_deref().is_none_or(|l| l == label);
        let serial_ok = cfg.token_serial.as_deref().is_none_or(|s| s == serial);
        if label_ok && serial_ok {
            return Ok(FoundToken {
                slot,
                label,
                serial,
                model: info.model().trim().to_string(),
                manufacturer: info.manufacturer_id().trim().to_string(),
                max_sessions: match info.max_session_count() {
                    Limit::Max(n) if n > 0 => Some(n),
                    _ => None,
                },
            });
        }
        seen.push(format!("'{label}' (serial {serial})"));
    }
    Err(TokenError::new(format!(
        "no token with {} in module {} (tokens present: {})",
        cfg.token_name(),
        cfg.module.display(),
        if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", ")
        }
    )))
}

/// The key found in the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenKeyType {
    Rsa { bits: u32 },
    EcdsaP256,
}

impl std::fmt::Display for TokenKeyType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenKeyType::Rsa { bits } => write!(f, "RSA-{bits}"),
            TokenKeyType::EcdsaP256 => f.write_str("ECDSA P-256"),
        }
    }
}

/// DER of the P-256 OID, as `CKA_EC_PARAMS` holds it.
const P256_PARAMS: [u8; 10] = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// What the token says about the key (public attributes only).
#[derive(Debug, Clone)]
pub struct KeyInfo {
    pub key_type: TokenKeyType,
    pub label: String,
    pub id: String,
    /// RSA modulus (to match the certificate); empty for EC.
    pub modulus: Vec<u8>,
    pub extractable: bool,
    pub sensitive: bool,
}

/// A logged-in session with the configured key.
pub struct TokenSession {
    session: Session,
    key: ObjectHandle,
    pub info: KeyInfo,
}

impl TokenSession {
    /// Open a session on the token, log in (once per token: already logged in is fine) and
    /// find the key.
    pub fn open(ctx: &Pkcs11, cfg: &Pkcs11Config, pin: &Pin) -> Result<TokenSession, TokenError> {
        let token = find_token(ctx, cfg)?;
        Self::open_on(ctx, cfg, pin, &token)
    }

    pub fn open_on(
        ctx: &Pkcs11,
        cfg: &Pkcs11Config,
        pin: &Pin,
        token: &FoundToken,
    ) -> Result<TokenSession, TokenError> {
        let session = ctx
            .open_ro_session(token.slot)
            .map_err(|e| describe("C_OpenSession", &e))?;
        let auth = AuthPin::from(pin.expose().to_string());
        match session.login(UserType::User, Some(&auth)) {
            Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => {}
            Err(CkError::Pkcs11(RvError::PinIncorrect, _)) => {
                return Err(TokenError::new(format!(
                    "C_Login on token '{}': CKR_PIN_INCORRECT (wrong user PIN; {} gives it)",
                    token.label, cfg.pin_field
                )))
            }
            Err(e) => return Err(describe(&format!("C_Login on token '{}'", token.label), &e)),
        }
        let mut template = vec![Attribute::Class(ObjectClass::PRIVATE_KEY)];
        if let Some(l) = &cfg.key_label {
            template.push(Attribute::Label(l.as_bytes().to_vec()));
        }
        if let Some(id) = &cfg.key_id {
            template.push(Attribute::Id(id.clone()));
        }
        let found = session
            .find_objects(&template)
            .map_err(|e| describe("C_FindObjects", &e))?;
        let key = match found.as_slice() {
            [one] => *one,
            [] => {
                return Err(TokenError::new(format!(
                    "no private key with {} on token '{}'",
                    cfg.key_name(),
                    token.label
                )))
            }
            many => {
                return Err(TokenError::new(format!(
                    "{} private keys match {} on token '{}': give key_id too",
                    many.len(),
                    cfg.key_name(),
                    token.label
                )))
            }
        };
        let info = key_info(&session, key)?;
        match (cfg.key_type, &info.key_type) {
            (Some(WantedKey::Rsa), TokenKeyType::EcdsaP256)
            | (Some(WantedKey::Ecdsa), TokenKeyType::Rsa { .. }) => {
                return Err(TokenError::new(format!(
                    "key {} on token '{}' is {}, not the key_type configured",
                    cfg.key_name(),
                    token.label,
                    info.key_type
                )))
            }
            _ => {}
        }
        Ok(TokenSession { session, key, info })
    }

    /// Raw RSA (`CKM_RSA_X_509`) signature of an already padded block.
    pub fn rsa_sign_raw(&self, block: &[u8]) -> Result<Vec<u8>, TokenError> {
        let sig = self
            .session
            .sign(&Mechanism::RsaX509, self.key, block)
            .map_err(|e| describe("C_Sign(CKM_RSA_X_509)", &e))?;
        Ok(left_pad(sig, block.len()))
    }

    /// An RSA signature with the mechanism `mechs` chose for `view`'s scheme: the token's own
    /// PSS (`CKM_RSA_PKCS_PSS`, MGF1 with the same hash, salt length = hash length) or PKCS#1
    /// v1.5 (`CKM_RSA_PKCS` over `DigestInfo || H`), else raw RSA on `block`, the same
    /// signature padded by us. Says which mechanism signed.
    pub fn rsa_sign(
        &self,
        mechs: RsaMechanisms,
        view: &SignView,
        block: &[u8],
    ) -> Result<(Vec<u8>, RsaSignMechanism), TokenError> {
        let k = block.len();
        match mechs.choose(view.pss) {
            Some(RsaSignMechanism::Pss) => {
                let (hash_alg, mgf) = pss_params(view.digest);
                let params = PkcsPssParams {
                    hash_alg,
                    mgf,
                    s_len: (view.hash.len() as u64).into(),
                };
                let sig = self
                    .session
                    .sign(&Mechanism::RsaPkcsPss(params), self.key, &view.hash)
                    .map_err(|e| describe("C_Sign(CKM_RSA_PKCS_PSS)", &e))?;
                Ok((left_pad(sig, k), RsaSignMechanism::Pss))
            }
            Some(RsaSignMechanism::Pkcs1) => {
                let sig = self
                    .session
                    .sign(&Mechanism::RsaPkcs, self.key, &view.digest_info())
                    .map_err(|e| describe("C_Sign(CKM_RSA_PKCS)", &e))?;
                Ok((left_pad(sig, k), RsaSignMechanism::Pkcs1))
            }
            Some(RsaSignMechanism::Raw) => Ok((self.rsa_sign_raw(block)?, RsaSignMechanism::Raw)),
            None => Err(TokenError {
                message: format!(
                    "the token offers no mechanism for {} signatures ({})",
                    if view.pss { "RSA-PSS" } else { "PKCS#1 v1.5" },
                    mechs.describe()
                ),
                session_lost: false,
            }),
        }
    }

    /// Raw RSA (`CKM_RSA_X_509`) decryption: BoringSSL checks the padding itself, in constant
    /// time; the token never sees a padding check (`CKM_RSA_PKCS` would be a padding oracle).
    pub fn rsa_decrypt_raw(&self, block: &[u8]) -> Result<Vec<u8>, TokenError> {
        let out = self
            .session
            .decrypt(&Mechanism::RsaX509, self.key, block)
            .map_err(|e| describe("C_Decrypt(CKM_RSA_X_509)", &e))?;
        Ok(left_pad(out, block.len()))
    }

    /// ECDSA (`CKM_ECDSA`) over a digest; the token's `r || s` is returned as DER.
    pub fn ecdsa_sign(&self, digest: &[u8]) -> Result<Vec<u8>, TokenError> {
        let raw = self
            .session
            .sign(&Mechanism::Ecdsa, self.key, digest)
            .map_err(|e| describe("C_Sign(CKM_ECDSA)", &e))?;
        raw_to_der(&raw).map_err(|e| TokenError {
            message: e.to_string(),
            session_lost: false,
        })
    }
}

/// Some modules strip leading zero bytes from RSA results: restore the modulus length `k`.
fn left_pad(mut out: Vec<u8>, k: usize) -> Vec<u8> {
    if out.len() < k {
        let mut padded = vec![0u8; k - out.len()];
        padded.append(&mut out);
        out = padded;
    }
    out
}

/// The hash and MGF1 of a PSS signature (the TLS hash for both).
fn pss_params(d: Digest) -> (MechanismType, PkcsMgfType) {
    match d {
        Digest::Sha1 => (MechanismType::SHA1, PkcsMgfType::MGF1_SHA1),
        Digest::Sha256 => (MechanismType::SHA256, PkcsMgfType::MGF1_SHA256),
        Digest::Sha384 => (MechanismType::SHA384, PkcsMgfType::MGF1_SHA384),
        Digest::Sha512 => (MechanismType::SHA512, PkcsMgfType::MGF1_SHA512),
    }
}

/// A mechanism that made an RSA signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RsaSignMechanism {
    /// `CKM_RSA_PKCS_PSS` (the token pads, with its own salt).
    Pss,
    /// `CKM_RSA_PKCS` over `DigestInfo || H`.
    Pkcs1,
    /// `CKM_RSA_X_509` over our padded block.
    Raw,
}

/// The RSA signing mechanisms the token's mechanism list offers for signing (`CKF_SIGN`),
/// found once at start-up. The token's own padding is preferred (a token may refuse raw RSA
/// signing: Google Cloud KMS's library, many HSM policies); raw RSA is the fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RsaMechanisms {
    pub pss: bool,
    pub pkcs1: bool,
    pub raw: bool,
}

impl RsaMechanisms {
    pub fn probe(ctx: &Pkcs11, slot: Slot) -> RsaMechanisms {
        let list = ctx.get_mechanism_list(slot).unwrap_or_default();
        let signs = |t: MechanismType| {
            list.contains(&t) && ctx.get_mechanism_info(slot, t).is_ok_and(|i| i.sign())
        };
        RsaMechanisms {
            pss: signs(MechanismType::RSA_PKCS_PSS),
            pkcs1: signs(MechanismType::RSA_PKCS),
            raw: signs(MechanismType::RSA_X_509),
        }
    }

    /// The mechanism for a PSS (`pss`) or PKCS#1 v1.5 signature, if any.
    pub fn choose(self, pss: bool) -> Option<RsaSignMechanism> {
        match (pss, self.pss, self.pkcs1, self.raw) {
            (true, true, _, _) => Some(RsaSignMechanism::Pss),
            (false, _, true, _) => Some(RsaSignMechanism::Pkcs1),
            (_, _, _, true) => Some(RsaSignMechanism::Raw),
            _ => None,
        }
    }

    /// `RSA-PSS via CKM_RSA_PKCS_PSS, PKCS#1 v1.5 via CKM_RSA_PKCS`, for the log and `doctor`.
    pub fn describe(self) -> String {
        let name = |m: Option<RsaSignMechanism>| match m {
            Some(RsaSignMechanism::Pss) => "CKM_RSA_PKCS_PSS",
            Some(RsaSignMechanism::Pkcs1) => "CKM_RSA_PKCS",
            Some(RsaSignMechanism::Raw) => "CKM_RSA_X_509 (raw, padded by quickshake)",
            None => "none offered",
        };
        format!(
            "RSA-PSS via {}, PKCS#1 v1.5 via {}",
            name(self.choose(true)),
            name(self.choose(false))
        )
    }
}

/// Whether the token's mechanism list offers raw RSA decryption.
pub fn raw_rsa_decrypt_supported(ctx: &Pkcs11, slot: Slot) -> bool {
    ctx.get_mechanism_info(slot, MechanismType::RSA_X_509)
        .is_ok_and(|i| i.decrypt())
}

/// Why a token's raw ECDSA signature (`r || s`) cannot be turned into DER.
#[derive(Debug, thiserror::Error)]
enum RawSignatureError {
    #[error("token returned a {0}-byte ECDSA signature")]
    Length(usize),
    #[error(transparent)]
    Boring(#[from] boring::error::ErrorStack),
}

fn raw_to_der(raw: &[u8]) -> Result<Vec<u8>, RawSignatureError> {
    if raw.is_empty() || !raw.len().is_multiple_of(2) {
        return Err(RawSignatureError::Length(raw.len()));
    }
    let (r, s) = raw.split_at(raw.len() / 2);
    let bn = boring::bn::BigNum::from_slice;
    Ok(
        boring::ecdsa::EcdsaSig::from_private_components(bn(r)?, bn(s)?)
            .and_then(|sig| sig.to_der())?,
    )
}

fn key_info(session: &Session, key: ObjectHandle) -> Result<KeyInfo, TokenError> {
    let attrs = session
        .get_attributes(
            key,
            &[
                AttributeType::KeyType,
                AttributeType::Label,
                AttributeType::Id,
                AttributeType::Modulus,
                AttributeType::EcParams,
                AttributeType::Extractable,
                AttributeType::Sensitive,
            ],
        )
        .map_err(|e| describe("C_GetAttributeValue", &e))?;
    let mut kt = None;
    let (mut label, mut id, mut modulus, mut params) =
        (String::new(), String::new(), Vec::new(), Vec::new());
    let (mut extractable, mut sensitive) = (false, false);
    for a in attrs {
        match a {
            Attribute::KeyType(t) => kt = Some(t),
            Attribute::Label(l) => label = String::from_utf8_lossy(&l).into_owned(),
            Attribute::Id(i) => id = hex(&i),
            Attribute::Modulus(m) => modulus = m,
            Attribute::EcParams(p) => params = p,
            Attribute::Extractable(e) => extractable = e,
            Attribute::Sensitive(s) => sensitive = s,
            _ => {}
        }
    }
    let key_type = match kt {
        Some(t) if t == KeyType::RSA => {
            let skip = modulus.iter().take_while(|b| **b == 0).count();
            modulus.drain(..skip);
            TokenKeyType::Rsa {
                bits: (modulus.len() * 8) as u32,
            }
        }
        Some(t) if t == KeyType::EC && params == P256_PARAMS => TokenKeyType::EcdsaP256,
        Some(t) if t == KeyType::EC => {
            return Err(TokenError::new(
                "the token's EC key is not on P-256 (only P-256 is supported)",
            ))
        }
        _ => {
            return Err(TokenError::new(
                "the token's key is neither RSA nor EC: providers take RSA or ECDSA P-256",
            ))
        }
    };
    Ok(KeyInfo {
        key_type,
        label,
        id,
        modulus,
        extractable,
        sensitive,
    })
}
