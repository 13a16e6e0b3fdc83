//! Which engines this machine has: [`Engines`] looks at each once, on first use, with the
//! options the binary passed ([`EngineOptions`]: engines hidden, where crypto_mb is); crypto_mb
//! is loaded only when a provider needs it (or `doctor` asks). Tests hide engines
//! (`hide: ["crypto_mb"]` or `["all"]`), so the accelerated path and the no-engine path both
//! run on a machine that has the engine.

use std::sync::{Arc, OnceLock};

use quickshake_mbmath::BackendKind;

use crate::engine::crypto_mb::CryptoMbEngine;
use crate::engine::mbmath::MbMathEngine;
use crate::engine::software::SoftwareEngine;
use crate::engine::Engine;
use crate::key::KeyType;
use crate::options::EngineOptions;

/// One engine this build knows, and whether it is usable here.
#[derive(Clone)]
pub struct EngineStatus {
    pub name: &'static str,
    pub engine: Result<Arc<dyn Engine>, EngineUnavailable>,
}

/// Why an engine is not usable here (its reason, as `doctor` and start-up errors show it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EngineUnavailable(pub String);

/// An accelerated engine's slot: detected on first use, once, shared by clones. crypto_mb is a
/// shared library that receives private keys: it is mapped only when a configured provider (or
/// `doctor`) asks for it, never at start for a config that does not need it.
#[derive(Clone)]
struct Slot {
    name: &'static str,
    engine: Arc<OnceLock<Result<Arc<dyn Engine>, EngineUnavailable>>>,
}

/// The engines detected on this machine under some [`EngineOptions`].
#[derive(Clone)]
pub struct Engines {
    options: EngineOptions,
    /// In the order `auto` prefers them ([`ranking`]; unranked ones last).
    accelerated: Vec<Slot>,
}

impl Engines {
    /// The accelerated engines, not loaded yet: our own are checked on first use, crypto_mb is
    /// loaded (from where `options` allow) only when a provider needs it.
    pub fn detect(options: &EngineOptions) -> Engines {
        let mut all: Vec<Slot> = [
            "crypto_mb",
            BackendKind::Ifma.name(),
            BackendKind::Avx2.name(),
        ]
        .into_iter()
        .map(|name| Slot {
            name,
            engine: Arc::new(OnceLock::new()),
        })
        .collect();
        let order = ranking();
        all.sort_by_key(|s| {
            order
                .iter()
                .position(|n| *n == s.name)
                .unwrap_or(usize::MAX)
        });
        Engines {
            options: options.clone(),
            accelerated: all,
        }
    }

    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// A slot's engine, loading it on first use.
    fn status<'s>(&self, slot: &'s Slot) -> &'s Result<Arc<dyn Engine>, EngineUnavailable> {
        slot.engine.get_or_init(|| self.load(slot.name))
    }

    fn load(&self, name: &'static str) -> Result<Arc<dyn Engine>, EngineUnavailable> {
        let options = &self.options;
        if name == "crypto_mb" {
            return match CryptoMbEngine::load(options) {
                Ok(e) => {
                    tracing::info!(
                        "crypto_mb loaded from {} ({})",
                        e.source(),
                        e.version().unwrap_or("version unknown")
                    );
                    Ok(Arc::new(e) as Arc<dyn Engine>)
                }
                Err(e) => Err(EngineUnavailable(e.reason())),
            };
        }
        if options.hides(name) {
            return Err(EngineUnavailable(EngineOptions::hidden_reason(name)));
        }
        let kind = match name {
            "ifma" => (BackendKind::Ifma, IFMA_MIN_BATCH),
            _ => (BackendKind::Avx2, AVX2_MIN_BATCH),
        };
        MbMathEngine::new(kind.0, kind.1)
            .map(|e| Arc::new(e) as Arc<dyn Engine>)
            .map_err(|e| EngineUnavailable(e.to_string()))
    }

    /// The accelerated engines this build knows, in the order `auto` prefers them (the
    /// committed ranking in [`ranking`]; engines it leaves out for this CPU come last and are
    /// never picked by `auto`), each with whether it is usable here. Loads every one (crypto_mb
    /// included): for `doctor`, which is asked explicitly.
    pub fn accelerated(&self) -> Vec<EngineStatus> {
        self.accelerated
            .iter()
            .map(|s| EngineStatus {
                name: s.name,
                engine: self.status(s).clone(),
            })
            .collect()
    }

    /// The best usable accelerated engine, or why there is none.
    ///
    /// Among the usable ranked engines, the first that computes `key`'s operations (its RSA
    /// size, or ECDSA P-256) wins; when none does, the first usable one (its provider runs that
    /// key's operations on the scalar path). So an ECDSA key goes to crypto_mb where our RSA-only
    /// engines rank first and crypto_mb is installed. Engines are loaded in ranking order and
    /// only until one wins: crypto_mb is not loaded where an engine ranked before it wins.
    pub fn best_accelerated(&self, key: &KeyType) -> Result<Arc<dyn Engine>, EngineUnavailable> {
        let mut reasons = Vec::new();
        let order = ranking();
        let mut first_usable = None;
        let computes = |e: &Arc<dyn Engine>| {
            let c = e.capabilities();
            match key {
                KeyType::Rsa { bits } => c.rsa_bits.contains(bits),
                KeyType::EcdsaP256 => c.ecdsa_p256,
            }
        };
        for s in &self.accelerated {
            if !order.contains(&s.name) {
                reasons.push(format!(
                    "{}: not ranked for this CPU (not measured faster than BoringSSL on it)",
                    s.name
                ));
                continue;
            }
            match self.status(s) {
                Ok(e) if computes(e) => return Ok(e.clone()),
                Ok(e) => {
                    first_usable.get_or_insert_with(|| e.clone());
                }
                Err(r) => reasons.push(format!("{}: {r}", s.name)),
            }
        }
        first_usable.ok_or_else(|| EngineUnavailable(reasons.join("; ")))
    }

    /// A named engine, or why it is unusable (loads it on first use).
    pub fn by_name(&self, name: &str) -> Result<Arc<dyn Engine>, EngineUnavailable> {
        if name == "software" {
            return Ok(software());
        }
        if name == "portable" {
            // Our arithmetic's reference backend: runs everywhere, not an acceleration (tests).
            return MbMathEngine::new(BackendKind::Portable, 1)
                .map(|e| Arc::new(e) as Arc<dyn Engine>)
                .map_err(|e| EngineUnavailable(e.to_string()));
        }
        match self.accelerated.iter().find(|s| s.name == name) {
            Some(s) => self.status(s).clone(),
            None => Err(EngineUnavailable(format!(
                "engine '{name}' is not built into this quickshake yet"
            ))),
        }
    }

    /// Why the `qat` provider has no engine here (see [`qat_status`]).
    pub fn qat_status(&self) -> String {
        if self.options.hides("qat") {
            return EngineOptions::hidden_reason("QAT");
        }
        qat_status()
    }
}

/// Smallest batch worth an engine call (below it BoringSSL one at a time is cheaper), measured
/// with `bench/engine` (see docs/benchmarks.md, engines section).
pub const IFMA_MIN_BATCH: usize = 2;
/// avx2 computes 8 lanes (two interleaved groups of 4) per call, so 1-2 operations (2-4
/// exponentiations) cost as much as 4: one 8-lane group ~1.40 ms against BoringSSL's ~0.72 ms
/// per operation on Zen 4 (quiet), i.e. a tie at 2 and a win from 3 (`bench/engine` printed a
/// crossover of 4 in noisy runs).
pub const AVX2_MIN_BATCH: usize = 3;

/// The committed ranking for `engine: auto`, keyed by CPU features, from `bench/engine` runs
/// (RSA-2048 signatures/s per core, all engines in one run, ratios to BoringSSL taken per
/// round; docs/benchmarks.md). Deterministic: the same CPU features always give the same order.
/// An engine missing from a CPU's list is never picked by `auto` there (it stays selectable by
/// name); every table lists only engines measured faster than BoringSSL.
pub fn ranking() -> &'static [&'static str] {
    ranking_for(cpu_kind())
}

/// The CPU kinds the ranking tells apart, found at run time (CPUID feature flags and vendor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuKind {
    /// AVX-512 IFMA on an AMD CPU (Zen 4, measured; Zen 5 assumed alike, not measured).
    IfmaAmd,
    /// AVX-512 IFMA on any other vendor (Intel Ice Lake and later server and client parts).
    IfmaOther,
    /// No AVX-512 IFMA (AMD Zen 2/3, Intel Skylake/Cascade Lake, other architectures).
    NoIfma,
}

/// This machine's [`CpuKind`].
pub fn cpu_kind() -> CpuKind {
    if !cpu_has("avx512ifma") {
        CpuKind::NoIfma
    } else if cpu_vendor_is_amd() {
        CpuKind::IfmaAmd
    } else {
        CpuKind::IfmaOther
    }
}

/// [`ranking`] for a [`CpuKind`].
pub fn ranking_for(kind: CpuKind) -> &'static [&'static str] {
    match kind {
        CpuKind::IfmaAmd => RANKING_IFMA_AMD,
        CpuKind::IfmaOther => RANKING_IFMA_OTHER,
        CpuKind::NoIfma => RANKING_AVX2,
    }
}

/// AMD CPUs with AVX-512 IFMA. AMD EPYC Zen 4 (issue 19's generated ifma kernels with the
/// and-or table scan; `bench/engine`, medians of 7 per-round ratios, four runs,
/// bench/engine-notes.md): ifma / crypto_mb RSA-2048 1.02-1.05, RSA-3072 1.80-2.57, RSA-4096
/// 0.98-1.23 (0.98 once, right after the gateway benchmark on CPU 0); ifma 4.4-4.5x BoringSSL,
/// crypto_mb 4.3-4.4x, avx2 1.7x. End to end (RSA-2048, 64 clients) the two are within noise
/// (282-309 vs 295-313 µs per handshake). Our engine first: it needs nothing from Intel's
/// runtime, and crypto_mb stays second where it is installed.
pub const RANKING_IFMA_AMD: &[&str] = &["ifma", "crypto_mb", "avx2"];
/// Other CPUs with AVX-512 IFMA (Intel). Intel Xeon (Sapphire Rapids class, measured before
/// issue 19's kernels, not since: no such machine was lent): crypto_mb 6.5-6.8x BoringSSL,
/// ifma 3.4-4.2x, avx2 1.3x. crypto_mb stays first until ours is measured at least as fast.
pub const RANKING_IFMA_OTHER: &[&str] = &["crypto_mb", "ifma", "avx2"];
/// CPUs without IFMA (e.g. AMD Zen 2/3, Intel Skylake/Cascade Lake): crypto_mb and ifma do not
/// run there; avx2 is the only engine (measured on the IFMA CPUs above, where it beats
/// BoringSSL on both vendors).
pub const RANKING_AVX2: &[&str] = &["avx2", "crypto_mb", "ifma"];

/// What /proc/cpuinfo says about this machine, read once: for reports (`quickshake doctor`,
/// `bench/engine`). Engine choice does not use it; it uses run-time feature detection.
#[derive(Debug, Clone, Default)]
pub struct CpuInfo {
    /// `model name` of the first CPU (`unknown` if absent).
    pub model: String,
    /// `vendor_id` (`GenuineIntel`, `AuthenticAMD`).
    pub vendor: Option<String>,
    /// `cpu family`, `model` and `stepping` of the first CPU (e.g. AMD family 25 model 17 is
    /// Zen 4), as /proc/cpuinfo writes them.
    pub family: Option<String>,
    pub model_number: Option<String>,
    pub stepping: Option<String>,
    /// `flags` of the first CPU.
    pub flags: Vec<String>,
    /// Number of `processor` entries (CPUs online).
    pub processors: usize,
}

impl CpuInfo {
    /// Parse the text of /proc/cpuinfo.
    pub fn parse(text: &str) -> CpuInfo {
        let field = |name: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        CpuInfo {
            model: field("model name").unwrap_or_else(|| "unknown".into()),
            vendor: field("vendor_id"),
            family: field("cpu family"),
            model_number: field("model"),
            stepping: field("stepping"),
            flags: field("flags")
                .map(|f| f.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            processors: text.lines().filter(|l| l.starts_with("processor")).count(),
        }
    }

    /// Whether /proc/cpuinfo lists `flag`.
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// This machine's [`CpuInfo`].
pub fn cpu_info() -> &'static CpuInfo {
    static INFO: OnceLock<CpuInfo> = OnceLock::new();
    INFO.get_or_init(|| {
        CpuInfo::parse(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default())
    })
}

/// Whether CPUID's vendor string is AMD's (`AuthenticAMD`).
fn cpu_vendor_is_amd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let id = core::arch::x86_64::__cpuid(0);
        let mut vendor = [0u8; 12];
        for (chunk, reg) in vendor.chunks_mut(4).zip([id.ebx, id.edx, id.ecx]) {
            chunk.copy_from_slice(&reg.to_le_bytes());
        }
        &vendor == b"AuthenticAMD"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn cpu_has(flag: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match flag {
            "avx512ifma" => std::arch::is_x86_feature_detected!("avx512ifma"),
            "avx2" => std::arch::is_x86_feature_detected!("avx2"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = flag;
        false
    }
}

/// The software engine (always usable).
pub fn software() -> Arc<dyn Engine> {
    static SOFTWARE: OnceLock<Arc<dyn Engine>> = OnceLock::new();
    SOFTWARE
        .get_or_init(|| Arc::new(SoftwareEngine::default()))
        .clone()
}

/// QAT 4xxx physical functions (Intel vendor 0x8086) and their crypto virtual functions.
pub const QAT_PF: [&str; 3] = ["0x4940", "0x4942", "0x4946"];
pub const QAT_VF: [&str; 3] = ["0x4941", "0x4943", "0x4947"];

/// One QAT PCI function seen in sysfs.
#[derive(Debug, Clone)]
pub struct QatFunction {
    pub address: String,
    pub device: String,
    pub driver: Option<String>,
    pub virtual_function: bool,
}

/// The QAT 4xxx functions visible on this machine.
pub fn qat_functions() -> Vec<QatFunction> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/sys/bus/pci/devices") else {
        return out;
    };
    for e in entries.flatten() {
        let read = |f: &str| {
            std::fs::read_to_string(e.path().join(f))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        if read("vendor") != "0x8086" {
            continue;
        }
        let device = read("device");
        let vf = QAT_VF.contains(&device.as_str());
        if !vf && !QAT_PF.contains(&device.as_str()) {
            continue;
        }
        let driver = std::fs::read_link(e.path().join("driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()));
        out.push(QatFunction {
            address: e.file_name().to_string_lossy().to_string(),
            device,
            driver,
            virtual_function: vf,
        });
    }
    out
}

/// Why the `qat` provider has no engine here. A QAT machine needs crypto virtual functions
/// (8086:4941/4943/4947) bound to vfio-pci, `/dev/vfio` nodes, and Intel's qatlib; quickshake
/// detects them but ships no offload path that was never run (none exists on these machines).
pub fn qat_status() -> String {
    let vfs: Vec<QatFunction> = qat_functions()
        .into_iter()
        .filter(|f| f.virtual_function)
        .collect();
    let vfio_bound = vfs
        .iter()
        .filter(|f| f.driver.as_deref() == Some("vfio-pci"))
        .count();
    if vfs.is_empty() {
        "no Intel QAT 4xxx crypto virtual functions (8086:4941/4943/4947) on this machine".into()
    } else if vfio_bound == 0 || !std::path::Path::new("/dev/vfio").exists() {
        format!(
            "{} QAT virtual function(s) found but none bound to vfio-pci with /dev/vfio",
            vfs.len()
        )
    } else {
        format!("{vfio_bound} QAT virtual function(s) ready, but this quickshake has no QAT offload path yet")
    }
}

#[cfg(test)]
mod ranking_tests {
    use super::*;

    #[test]
    fn cpuinfo_fields_are_read() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
                    model name\t: AMD EPYC\nstepping\t: 1\n\
                    flags\t\t: fpu avx2 adx\n\nprocessor\t: 1\nflags\t\t: fpu\n";
        let c = CpuInfo::parse(text);
        assert_eq!(c.model, "AMD EPYC");
        assert_eq!(c.family.as_deref(), Some("25"));
        assert_eq!(c.model_number.as_deref(), Some("17"));
        assert_eq!(c.stepping.as_deref(), Some("1"));
        assert_eq!(c.vendor.as_deref(), Some("AuthenticAMD"));
        assert!(c.has("avx2") && c.has("adx") && !c.has("avx512f"));
        assert_eq!(c.processors, 2);
        assert_eq!(CpuInfo::parse("").model, "unknown");
    }

    #[test]
    fn the_ranking_is_keyed_by_cpu_kind() {
        assert_eq!(ranking_for(CpuKind::IfmaAmd)[0], "ifma");
        assert_eq!(ranking_for(CpuKind::IfmaOther)[0], "crypto_mb");
        assert_eq!(ranking_for(CpuKind::NoIfma)[0], "avx2");
    }

    #[test]
    fn this_machine_gets_its_table() {
        assert!(cpu_info().vendor.is_some(), "no vendor_id in /proc/cpuinfo");
        assert_eq!(ranking(), ranking_for(cpu_kind()));
        let amd = cpu_info().vendor.as_deref() == Some("AuthenticAMD");
        let expected = match (cpu_info().has("avx512ifma"), amd) {
            (false, _) => CpuKind::NoIfma,
            (true, true) => CpuKind::IfmaAmd,
            (true, false) => CpuKind::IfmaOther,
        };
        assert_eq!(cpu_kind(), expected, "CPUID and /proc/cpuinfo disagree");
    }
}
