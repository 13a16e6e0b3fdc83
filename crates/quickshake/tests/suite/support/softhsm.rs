//! A SoftHSM2 token for the `pkcs11` provider tests, made once per test process: a token
//! directory of its own (`SOFTHSM2_CONF`), keys generated inside the token through `cryptoki`
//! as sensitive and non-extractable, certificates for their public keys signed by a throwaway
//! CA, and the failure-injecting wrapper module (`testdata/pkcs11/p11wrap.c`) compiled with
//! `cc`. Gateways get `SOFTHSM2_CONF` (and the wrapper's variables) through their environment.
//! The directory (`/tmp/qs-softhsm-<pid>`) is removed when the test process exits, and those
//! left by earlier processes that no longer run (killed runs) are removed when it is made.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use boring::asn1::Asn1Time;
use boring::bn::BigNum;
use boring::ec::{EcGroup, EcKey, EcPoint};
use boring::hash::MessageDigest;
use boring::nid::Nid;
use boring::pkey::{PKey, Public};
use boring::rsa::Rsa;
use boring::x509::extension::SubjectAlternativeName;
use boring::x509::{X509NameBuilder, X509};
use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::types::AuthPin;

pub const SOFTHSM: &str = "/usr/lib/softhsm/libsofthsm2.so";
pub const TOKEN: &str = "qs-test";
/// An empty token for wrong-PIN tests (same PINs).
pub const PIN_TOKEN: &str = "qs-pin";
/// Distinctive, so the tests can search logs and dumps for them.
pub const USER_PIN: &str = "u53r-PIN-9f3b1c";
pub const SO_PIN: &str = "s0-PIN-77aa01";

/// The keys in the token: (label, CKA_ID hex).
pub const KEYS: [(&str, &str); 4] = [
    ("rsa2048", "01"),
    ("rsa3072", "02"),
    ("ec256", "03"),
    ("rsa4096", "04"),
];
/// testdata's `rsa2048` key imported into the token (label `imported`): the one key a test can
/// also hold as a plain `private_key`, for `fallback`.
pub const IMPORTED: &str = "imported";

pub struct Hsm {
    pub dir: PathBuf,
    /// The wrapper module (forwards to SoftHSM2; fails, stalls or slows down on command).
    pub wrapper: PathBuf,
    /// A file holding the user PIN.
    pub pin_file: PathBuf,
}

impl Hsm {
    /// The certificate of a key of [`KEYS`].
    pub fn cert(&self, label: &str) -> PathBuf {
        self.dir.join(format!("{label}.cert.pem"))
    }

    /// Environment for a gateway using the token, with the wrapper's control file `control`.
    /// Each control file gets its own copy of the token directory (made on first use): SoftHSM2
    /// rewrites a token's files on login, and a gateway of another test reading the same files
    /// at that moment would not find the token.
    pub fn env(&self, control: &str) -> Vec<(&'static str, String)> {
        let tokens = format!("{control}.tokens");
        let conf = format!("{control}.conf");
        if !Path::new(&tokens).exists() {
            let cp = Command::new("cp")
                .arg("-a")
                .arg(self.dir.join("tokens"))
                .arg(&tokens)
                .status()
                .expect("cp runs");
            assert!(cp.success(), "copy the token directory");
            std::fs::write(
                &conf,
                format!("directories.tokendir = {tokens}\nobjectstore.backend = file\nlog.level = ERROR\n"),
            )
            .expect("softhsm2.conf");
        }
        vec![
            ("SOFTHSM2_CONF", conf),
            ("P11WRAP_MODULE", SOFTHSM.to_string()),
            ("P11WRAP_CONTROL", control.to_string()),
        ]
    }
}

/// `(name, value)` pairs as `Gateway::start_with_env` takes them.
pub fn refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The token, made on first use.
pub fn hsm() -> &'static Hsm {
    static HSM: OnceLock<Hsm> = OnceLock::new();
    HSM.get_or_init(make)
}

fn make() -> Hsm {
    assert!(
        Path::new(SOFTHSM).exists(),
        "SoftHSM2 is not installed (scripts/setup installs softhsm2)"
    );
    remove_stale_dirs();
    let dir = hsm_dir();
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: `remove_at_exit` is an `extern "C" fn()` that touches only the file system; libc
    // runs it once from `exit`, which the test harness calls when the tests end.
    unsafe {
        libc::atexit(remove_at_exit);
    }
    let tokens = dir.join("tokens");
    std::fs::create_dir_all(&tokens).expect("token dir");
    let conf = dir.join("softhsm2.conf");
    std::fs::write(
        &conf,
        format!(
            "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
            tokens.display()
        ),
    )
    .expect("softhsm2.conf");
    // SoftHSM2 reads its configuration from this variable only; it is set once, before any
    // PKCS#11 call of this process, to a directory no other process uses.
    std::env::set_var("SOFTHSM2_CONF", &conf);
    let pin_file = dir.join("user.pin");
    std::fs::write(&pin_file, format!("{USER_PIN}\n")).expect("pin file");
    let wrapper = dir.join("libp11wrap.so");
    let src = super::testdata("pkcs11/p11wrap.c");
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-I/usr/include/p11-kit-1"])
        .arg(&src)
        .arg("-o")
        .arg(&wrapper)
        .args(["-ldl", "-lpthread"])
        .output()
        .expect("cc runs");
    assert!(
        cc.status.success(),
        "cc p11wrap.c: {}",
        String::from_utf8_lossy(&cc.stderr)
    );

    let ctx = Pkcs11::new(SOFTHSM).expect("load SoftHSM2");
    ctx.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
        .expect("C_Initialize");
    let slot = ctx
        .get_all_slots()
        .expect("slots")
        .into_iter()
        .find(|s| ctx.get_token_info(*s).is_ok_and(|t| !t.token_initialized()))
        .expect("a free slot");
    let so = AuthPin::from(SO_PIN.to_string());
    let init = |slot, label: &str| {
        ctx.init_token(slot, &so, label).expect("C_InitToken");
        let session = ctx.open_rw_session(slot).expect("session");
        session.login(UserType::So, Some(&so)).expect("SO login");
        session
            .init_pin(&AuthPin::from(USER_PIN.to_string()))
            .expect("C_InitPIN");
    };
    init(slot, TOKEN);
    // A second, empty token for wrong-PIN logins: SoftHSM2 rewrites a token's files on a failed
    // login, which a gateway reading the main token at that moment could trip over.
    let spare = ctx
        .get_all_slots()
        .expect("slots")
        .into_iter()
        .find(|s| ctx.get_token_info(*s).is_ok_and(|t| !t.token_initialized()))
        .expect("a free slot");
    init(spare, PIN_TOKEN);
    let slot = ctx
        .get_slots_with_initialized_token()
        .expect("slots")
        .into_iter()
        .find(|s| ctx.get_token_info(*s).is_ok_and(|t| t.label() == TOKEN))
        .expect("the new token");
    let session = ctx.open_rw_session(slot).expect("session");
    session
        .login(UserType::User, Some(&AuthPin::from(USER_PIN.to_string())))
        .expect("user login");
    let (ca_key, ca_cert) = ca();
    for (label, id) in KEYS {
        let public = generate(&session, label, id);
        let cert = leaf(&public, &ca_key, &ca_cert);
        std::fs::write(dir.join(format!("{label}.cert.pem")), cert).expect("cert");
    }
    import_rsa(&session, &super::testdata("certs/rsa2048.key.pem"));
    drop(session);
    ctx.finalize().expect("C_Finalize");
    Hsm {
        dir,
        wrapper,
        pin_file,
    }
}

fn hsm_dir() -> PathBuf {
    std::env::temp_dir().join(format!("qs-softhsm-{}", std::process::id()))
}

extern "C" fn remove_at_exit() {
    let _ = std::fs::remove_dir_all(hsm_dir());
}

/// Token directories of earlier test processes that no longer run (a run killed before exit).
fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("qs-softhsm-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Generate a key pair in the token (private half sensitive, never extractable); its public key.
fn generate(session: &Session, label: &str, id: &str) -> PKey<Public> {
    let id = vec![u8::from_str_radix(id, 16).expect("hex id")];
    let common = |private: bool| {
        vec![
            Attribute::Token(true),
            Attribute::Label(label.as_bytes().to_vec()),
            Attribute::Id(id.clone()),
            Attribute::Private(private),
        ]
    };
    let mut private = common(true);
    private.extend([
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Sign(true),
        Attribute::Decrypt(true),
    ]);
    let mut public = common(false);
    public.push(Attribute::Verify(true));
    let (mech, bits) = match label {
        "rsa2048" => (Mechanism::RsaPkcsKeyPairGen, 2048u64),
        "rsa3072" => (Mechanism::RsaPkcsKeyPairGen, 3072),
        "rsa4096" => (Mechanism::RsaPkcsKeyPairGen, 4096),
        _ => (Mechanism::EccKeyPairGen, 0),
    };
    if bits > 0 {
        public.extend([
            Attribute::ModulusBits(bits.into()),
            Attribute::PublicExponent(vec![1, 0, 1]),
            Attribute::Encrypt(true),
        ]);
    } else {
        // DER OID of P-256.
        public.push(Attribute::EcParams(vec![
            0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07,
        ]));
    }
    let (pub_h, priv_h) = session
        .generate_key_pair(&mech, &public, &private)
        .expect("C_GenerateKeyPair");
    assert_not_extractable(session, priv_h);
    public_key(session, pub_h, bits > 0)
}

/// Put a PEM RSA key into the token under [`IMPORTED`].
fn import_rsa(session: &Session, pem: &Path) {
    let pem = std::fs::read(pem).expect("key file");
    let rsa = Rsa::private_key_from_pem(&pem).expect("RSA key");
    let v = |b: Option<&boring::bn::BigNumRef>| b.expect("CRT part").to_vec();
    session
        .create_object(&[
            Attribute::Class(cryptoki::object::ObjectClass::PRIVATE_KEY),
            Attribute::KeyType(cryptoki::object::KeyType::RSA),
            Attribute::Token(true),
            Attribute::Private(true),
            Attribute::Sensitive(true),
            Attribute::Sign(true),
            Attribute::Decrypt(true),
            Attribute::Label(IMPORTED.as_bytes().to_vec()),
            Attribute::Id(vec![0x10]),
            Attribute::Modulus(rsa.n().to_vec()),
            Attribute::PublicExponent(rsa.e().to_vec()),
            Attribute::PrivateExponent(rsa.d().to_vec()),
            Attribute::Prime1(v(rsa.p())),
            Attribute::Prime2(v(rsa.q())),
            Attribute::Exponent1(v(rsa.dmp1())),
            Attribute::Exponent2(v(rsa.dmq1())),
            Attribute::Coefficient(v(rsa.iqmp())),
        ])
        .expect("C_CreateObject");
}

/// The private key's secret attributes cannot be read.
fn assert_not_extractable(session: &Session, key: ObjectHandle) {
    let attrs = session
        .get_attributes(key, &[AttributeType::Extractable, AttributeType::Sensitive])
        .expect("attributes");
    assert!(attrs.contains(&Attribute::Extractable(false)), "{attrs:?}");
    assert!(attrs.contains(&Attribute::Sensitive(true)), "{attrs:?}");
}

fn public_key(session: &Session, key: ObjectHandle, rsa: bool) -> PKey<Public> {
    if rsa {
        let attrs = session
            .get_attributes(
                key,
                &[AttributeType::Modulus, AttributeType::PublicExponent],
            )
            .expect("RSA public attributes");
        let (mut n, mut e) = (Vec::new(), Vec::new());
        for a in attrs {
            match a {
                Attribute::Modulus(v) => n = v,
                Attribute::PublicExponent(v) => e = v,
                _ => {}
            }
        }
        let rsa = Rsa::from_public_components(
            BigNum::from_slice(&n).expect("n"),
            BigNum::from_slice(&e).expect("e"),
        )
        .expect("RSA public key");
        return PKey::from_rsa(rsa).expect("pkey");
    }
    let attrs = session
        .get_attributes(key, &[AttributeType::EcPoint])
        .expect("EC point");
    let Some(Attribute::EcPoint(der)) = attrs.into_iter().next() else {
        panic!("no CKA_EC_POINT");
    };
    // A DER OCTET STRING (04 41 ...) around the uncompressed point.
    let point = der.get(2..).expect("EC point DER");
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).expect("P-256");
    let mut ctx = boring::bn::BigNumContext::new().expect("bn ctx");
    let p = EcPoint::from_bytes(&group, point, &mut ctx).expect("EC point");
    PKey::from_ec_key(EcKey::from_public_key(&group, &p).expect("EC key")).expect("pkey")
}

fn ca() -> (PKey<boring::pkey::Private>, X509) {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).expect("P-256");
    let key = PKey::from_ec_key(EcKey::generate(&group).expect("CA key")).expect("pkey");
    let mut name = X509NameBuilder::new().expect("name");
    name.append_entry_by_text("CN", "quickshake pkcs11 test CA")
        .expect("CN");
    let name = name.build();
    let mut b = X509::builder().expect("builder");
    b.set_version(2).expect("version");
    b.set_subject_name(&name).expect("subject");
    b.set_issuer_name(&name).expect("issuer");
    b.set_pubkey(&key).expect("pubkey");
    b.set_not_before(&Asn1Time::days_from_now(0).expect("time"))
        .expect("nb");
    b.set_not_after(&Asn1Time::days_from_now(30).expect("time"))
        .expect("na");
    b.sign(&key, MessageDigest::sha256()).expect("sign");
    (key, b.build())
}

fn leaf(public: &PKey<Public>, ca_key: &PKey<boring::pkey::Private>, ca: &X509) -> Vec<u8> {
    let mut name = X509NameBuilder::new().expect("name");
    name.append_entry_by_text("CN", "localhost").expect("CN");
    let name = name.build();
    let mut b = X509::builder().expect("builder");
    b.set_version(2).expect("version");
    let serial = BigNum::from_u32(std::process::id()).expect("serial");
    b.set_serial_number(&serial.to_asn1_integer().expect("serial"))
        .expect("serial");
    b.set_subject_name(&name).expect("subject");
    b.set_issuer_name(ca.subject_name()).expect("issuer");
    b.set_pubkey(public).expect("pubkey");
    b.set_not_before(&Asn1Time::days_from_now(0).expect("time"))
        .expect("nb");
    b.set_not_after(&Asn1Time::days_from_now(30).expect("time"))
        .expect("na");
    let san = SubjectAlternativeName::new()
        .dns("localhost")
        .ip("127.0.0.1")
        .build(&b.x509v3_context(Some(ca), None))
        .expect("SAN");
    b.append_extension(&san).expect("SAN");
    b.sign(ca_key, MessageDigest::sha256()).expect("sign");
    b.build().to_pem().expect("pem")
}
