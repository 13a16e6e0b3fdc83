//! Asynchronous private key providers, as Envoy's `private_key_provider` configures them.
//!
//! This crate owns the provider framework (registry by `provider_name`, typed configs with
//! checked `@type` URLs, Envoy's `fallback`), the batching queues (per worker with Envoy's
//! timer semantics, or shared by every worker; quickshake's adaptive mode and its latency
//! budget, whose pure decision is `budget`), the engine interface with its engines (Intel
//! crypto_mb loaded at run time, our multi-buffer engines, BoringSSL software, PKCS#11 tokens
//! on their own pool of sessions in `pkcs11`; engines the embedding binary supplies through
//! `extension`, such as the test-only fault injector), and the checks around
//! every operation: hashing and padding in, public-key
//! verification of every RSA result out.
//!
//! The pipeline points one way: `method` (BoringSSL's key method: hash, pad, queue) →
//! `queue` (*when* a batch runs and with whom: per-worker or shared queues, timer, adaptive or
//! budget flush, deciding with `budget`) → `provider`
//! (*how* it is computed and checked, and *where*: a [`provider::Placement`] fixed at
//! construction; the checks themselves in `check`) → `engine` (the raw operations). The
//! operation types live in the leaf `op`.
//! `registry` ([`Providers`]) builds this per certificate and carries it across key rotation.
//!
//! It must not own sockets or event loops (it runs on the worker that calls it), takes its
//! settings as typed [`ProviderOptions`] (it reads no environment but the variable a `pkcs11`
//! config names for its PIN), and never writes key
//! material to logs, stats, errors or `Debug`. It loads crypto_mb only from the directory
//! [`EngineOptions::crypto_mb_dir`] names (else the system loader's path), and only when a
//! provider (or `doctor`) asks for it. `unsafe` is confined to the crypto_mb FFI module
//! the thread-priority calls in `priority` and the budget's `timerfd` in `timer`, each saying
//! why it needs it.
#![deny(unsafe_code)]

pub mod batch;
pub mod budget;
mod check;
pub mod config;
pub mod engine;
pub mod engines;
pub mod error;
pub mod extension;
pub mod key;
pub mod key_error;
pub mod method;
pub mod op;
pub mod options;
pub mod padding;
pub mod pkcs11;
pub mod priority;
pub mod provider;
pub mod queue;
pub mod registry;
pub mod stats;
pub mod timer;

pub use batch::{Batching, BatchingMode, QueueScope};
pub use config::{EngineChoice, ProviderConfig};
pub use engines::Engines;
pub use error::ProviderError;
pub use extension::{EngineFactory, ExtraEngines};
pub use key::ProviderKey;
pub use method::ProviderMethod;
pub use options::{EngineOptions, ProviderOptions};
pub use registry::{key_files, KeySetup, ProviderReport, Providers};
