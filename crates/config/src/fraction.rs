//! Envoy's shares of requests: `envoy.type.v3.FractionalPercent` and
//! `envoy.config.core.v3.RuntimeFractionalPercent`, as HTTP filters and routes write them.

use crate::model::Fraction;
use crate::walk::{Node, Result};

/// `FractionalPercent` (`numerator`, `denominator` HUNDRED / TEN_THOUSAND / MILLION).
pub(crate) fn fraction(node: &Node<'_>) -> Result<Fraction> {
    let o = node.obj(&["numerator", "denominator"])?;
    let numerator = match o.get("numerator") {
        Some(n) => u32::try_from(n.as_u64()?).map_err(|_| n.err("out of range"))?,
        None => 0,
    };
    let denominator = match o.get("denominator") {
        None => 100,
        Some(d) => {
            [100, 10_000, 1_000_000][d.enum_index(&["HUNDRED", "TEN_THOUSAND", "MILLION"])?]
        }
    };
    Ok(Fraction {
        numerator,
        denominator,
    })
}

/// `RuntimeFractionalPercent`: its `default_value` (quickshake has no runtime overrides).
pub(crate) fn runtime_fraction(node: &Node<'_>) -> Result<Fraction> {
    let o = node.obj(&["default_value", "runtime_key"])?;
    o.opt_str("runtime_key")?;
    o.get("default_value")
        .map(|d| fraction(&d))
        .transpose()
        .map(|f| f.unwrap_or(Fraction::ALL))
}
