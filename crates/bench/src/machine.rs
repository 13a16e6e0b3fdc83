//! Which CPU the benchmark ran on, as keyprovider's [`CpuInfo`] (the one `/proc/cpuinfo`
//! reader) has it: the `cpu:` / `flags:` header `bench/engine` and `quickshake-bench cpu-info`
//! print, and the JSON bench/bench.py and bench/priority-ab record.

use quickshake_keyprovider::engines::CpuInfo;
use serde_json::{json, Value};

/// Flags the engines' speed depends on, shown `+` (present) or `-` in the header, as
/// `/proc/cpuinfo` names them (`avx512_vbmi2`, with the underscore).
pub const HEADER_FLAGS: [&str; 10] = [
    "avx2",
    "fma",
    "adx",
    "bmi2",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512ifma",
    "avx512_vbmi2",
    "vaes",
];

/// `cpu: <model>` and `flags: avx2+ fma- ...`, two lines.
pub fn header(info: &CpuInfo) -> String {
    let flags = HEADER_FLAGS
        .iter()
        .map(|f| format!("{f}{}", if info.has(f) { "+" } else { "-" }))
        .collect::<Vec<_>>()
        .join(" ");
    format!("cpu: {}\nflags: {flags}\n", info.model)
}

/// Everything [`CpuInfo`] has: `model`, `vendor`, family/model number/stepping, `processors`
/// and every flag.
pub fn to_json(info: &CpuInfo) -> Value {
    json!({
        "model": info.model,
        "vendor": info.vendor,
        "family": info.family,
        "model_number": info.model_number,
        "stepping": info.stepping,
        "processors": info.processors,
        "flags": info.flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu avx2 adx bmi2 avx512f avx512ifma avx512_vbmi2
processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu avx2 adx bmi2 avx512f avx512ifma
";

    #[test]
    fn header_and_json() {
        let info = CpuInfo::parse(CPUINFO);
        assert_eq!(
            header(&info),
            "cpu: AMD EPYC 9B14\nflags: avx2+ fma- adx+ bmi2+ avx512f+ avx512dq- avx512bw- \
             avx512ifma+ avx512_vbmi2+ vaes-\n"
        );
        let v = to_json(&info);
        assert_eq!(v["model"], "AMD EPYC 9B14");
        assert_eq!(v["vendor"], "AuthenticAMD");
        assert_eq!(v["processors"], 2);
        assert_eq!(v["flags"][1], "avx2");
    }
}
