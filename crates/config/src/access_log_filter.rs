//! An access log's `filter` (Envoy's `AccessLogFilter`): `response_flag_filter`, which Envoy
//! Gateway and Istio put on every listener's access log (`flags: [NR]`: only connections that
//! match no filter chain). The other filters are not supported yet.

use crate::model::AccessLogFilter;
use crate::walk::{Node, Result};

/// The short response flags Envoy knows (`ResponseFlagFilter.flags` takes only these).
const RESPONSE_FLAGS: [&str; 30] = [
    "LH", "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "RL", "UAEX", "RLSE", "DC",
    "URX", "SI", "IH", "DPE", "UMSDR", "RFCF", "NFCF", "DT", "UPE", "NC", "OM", "DF", "DO", "DR",
    "UDO",
];

/// `filter`: one `AccessLogFilter`.
pub(crate) fn access_log_filter(node: &Node<'_>) -> Result<AccessLogFilter> {
    let o = node.obj_with(
        &["response_flag_filter"],
        &[
            "status_code_filter",
            "duration_filter",
            "not_health_check_filter",
            "traceable_filter",
            "runtime_filter",
            "and_filter",
            "or_filter",
            "header_filter",
            "grpc_status_filter",
            "extension_filter",
            "metadata_filter",
            "log_type_filter",
        ],
    )?;
    let f = o.req("response_flag_filter")?;
    let fo = f.obj(&["flags"])?;
    let mut flags = Vec::new();
    for flag in fo.items("flags") {
        let name = flag.as_str()?;
        if !RESPONSE_FLAGS.contains(&name) {
            return Err(flag.err(format!(
                "unknown response flag \"{}\" (expected one of {})",
                name.escape_debug(),
                RESPONSE_FLAGS.join(", ")
            )));
        }
        flags.push(name.to_owned());
    }
    Ok(AccessLogFilter::ResponseFlag(flags))
}
