//! The checks of engine results before they leave a provider, and the one-at-a-time
//! BoringSSL path: RSA results raised to `e` (by the engine's batched public operation or by
//! BoringSSL) and compared with the input, ECDSA signatures verified (confirmed by the engine's
//! batched verification or verified by BoringSSL, which alone rejects). Pure functions of an
//! operation and its result; the provider decides what to do with the verdict.

use crate::engine::software::{ecdsa_one, rsa_one};
use crate::engine::{EcdsaLane, LaneError, LaneResult, RsaLane};
use crate::op::{OpKind, PendingOp};
use crate::padding::{back_is_valid, rsa_public_back};

/// One operation on BoringSSL.
pub(crate) fn scalar_one(op: &PendingOp) -> LaneResult {
    match op.kind {
        OpKind::RsaSign | OpKind::RsaDecrypt => {
            let key = op.key.rsa.as_ref().ok_or(LaneError::Unsupported)?;
            rsa_one(&RsaLane {
                key,
                input: &op.input,
            })
        }
        OpKind::EcdsaSign => {
            let key = op.key.ec.as_ref().ok_or(LaneError::Unsupported)?;
            ecdsa_one(&EcdsaLane {
                key,
                digest: &op.input,
            })
        }
        OpKind::X25519 => Err(LaneError::Unsupported),
    }
}

/// What the engine's batched check found for one lane.
#[derive(Clone)]
pub(crate) enum Batched {
    /// An RSA result raised to `e` mod `n` (`Engine::rsa_public`), to compare with the input.
    RsaBack(Vec<u8>),
    /// An ECDSA signature the engine verified with the public key (`Engine::ecdsa_verify`).
    EcdsaVerified,
}

/// RSA: `result^e == input` (a signature made with a device's PSS mechanism: or a valid
/// EMSA-PSS encoding of the same hash, see [`back_is_valid`]), with `result^e mod n` from
/// `back` where given (the engine's batched public operation), else from BoringSSL. ECDSA: the
/// signature verifies with the public key: the engine's batched verification where it
/// confirmed it, else BoringSSL's.
pub(crate) fn result_is_valid(op: &PendingOp, result: &[u8], back: Option<&Batched>) -> bool {
    match op.kind {
        OpKind::RsaSign | OpKind::RsaDecrypt => {
            let Some(public) = op.key.rsa_public.as_ref() else {
                return false;
            };
            let k = public.size() as usize;
            if result.len() != k || op.input.len() != k {
                return false;
            }
            let view = op.signing.as_ref().filter(|_| op.kind == OpKind::RsaSign);
            let bits = public.n().num_bits() as usize;
            match back {
                Some(Batched::RsaBack(back)) => back_is_valid(&op.input, view, back, bits),
                _ => rsa_public_back(public, result)
                    .is_some_and(|back| back_is_valid(&op.input, view, &back, bits)),
            }
        }
        OpKind::EcdsaSign if matches!(back, Some(Batched::EcdsaVerified)) => true,
        OpKind::EcdsaSign => {
            let (Some(public), Ok(sig)) = (
                op.key.ec_public.as_ref(),
                boring::ecdsa::EcdsaSig::from_der(result),
            ) else {
                return false;
            };
            sig.verify(&op.input, public).unwrap_or(false)
        }
        OpKind::X25519 => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::test_rsa2048 as rsa2048;

    /// With `back` from a batched public operation the check compares it with the input, and a
    /// `back` of the wrong length fails the check instead of panicking in the comparison.
    #[test]
    fn a_batched_back_value_decides_the_check() {
        let key = rsa2048();
        let mut input = vec![7u8; 256];
        input[0] = 0;
        let (op, _rx) = PendingOp::new(OpKind::RsaDecrypt, key, input.clone());
        let result = vec![1u8; 256];
        let back = |v: &[u8]| Batched::RsaBack(v.to_vec());
        assert!(result_is_valid(&op, &result, Some(&back(&input))));
        let mut other = input.clone();
        other[255] ^= 1;
        assert!(!result_is_valid(&op, &result, Some(&back(&other))));
        assert!(!result_is_valid(&op, &result, Some(&back(&input[1..]))));
        assert!(!result_is_valid(&op, &result[1..], Some(&back(&input))));
        // An ECDSA confirmation says nothing about an RSA result: BoringSSL decides.
        assert!(!result_is_valid(
            &op,
            &result,
            Some(&Batched::EcdsaVerified)
        ));
        // Without one, BoringSSL's public operation decides (`result` is not a valid result).
        assert!(!result_is_valid(&op, &result, None));
    }
}
