//! The `software` engine: BoringSSL, one operation at a time. Not an acceleration; it lets the
//! provider's queue, batching and checks run on any CPU, and it is the scalar path other
//! engines hand small batches to. Constant time is BoringSSL's (blinded, constant-time modexp).

use boring::rsa::Padding;

use super::{Capabilities, EcdsaLane, Engine, LaneError, LaneResult, RsaLane};

pub struct SoftwareEngine {
    caps: Capabilities,
}

impl Default for SoftwareEngine {
    fn default() -> Self {
        SoftwareEngine {
            caps: Capabilities {
                name: "software".into(),
                accelerated: false,
                lanes: 8,
                rsa_bits: vec![1024, 2048, 3072, 4096],
                ecdsa_p256: true,
                rsa_min_batch: 1,
                ecdsa_min_batch: 1,
                x25519_min_batch: usize::MAX,
                offload: false,
            },
        }
    }
}

/// One raw RSA private operation through BoringSSL.
pub fn rsa_one(lane: &RsaLane<'_>) -> LaneResult {
    let rsa = lane.key.native.as_ref().ok_or(LaneError::Unsupported)?;
    let k = rsa.size() as usize;
    let mut out = vec![0u8; k];
    let n = rsa
        .private_decrypt(lane.input, &mut out, Padding::NONE)
        .map_err(|e| LaneError::Failed(format!("BoringSSL RSA: {e}")))?;
    // BoringSSL writes exactly k bytes for NONE padding; keep the fixed width regardless.
    if n < k {
        out.truncate(n);
        let mut padded = vec![0u8; k - n];
        padded.extend_from_slice(&out);
        out = padded;
    }
    Ok(out)
}

/// One ECDSA signature through BoringSSL, DER-encoded.
pub fn ecdsa_one(lane: &EcdsaLane<'_>) -> LaneResult {
    let ec = lane.key.native.as_ref().ok_or(LaneError::Unsupported)?;
    let sig = boring::ecdsa::EcdsaSig::sign(lane.digest, ec)
        .map_err(|e| LaneError::Failed(format!("BoringSSL ECDSA: {e}")))?;
    sig.to_der()
        .map_err(|e| LaneError::Failed(format!("DER: {e}")))
}

impl Engine for SoftwareEngine {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn rsa_private(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult> {
        lanes.iter().map(rsa_one).collect()
    }

    fn ecdsa_sign(&self, lanes: &[EcdsaLane<'_>]) -> Vec<LaneResult> {
        lanes.iter().map(ecdsa_one).collect()
    }
}
