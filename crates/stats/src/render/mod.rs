//! Rendering a filtered, sorted set of stats in Envoy's admin formats.
//!
//! Dependencies point one way: this module dispatches to the renderers (`text`, `json`,
//! `prometheus`), which share only the leaves `selection` (what to render) and `format` (numbers
//! and histogram buckets as Envoy prints them); no renderer uses another or this module.

mod format;
mod json;
mod prometheus;
mod selection;
mod text;

pub use format::{fmt_g, fmt_num};
pub(crate) use selection::Selection;

use crate::query::{Format, StatsQuery};

/// Content type of text and Prometheus output (Envoy serves both as plain text).
pub const CONTENT_TYPE_TEXT: &str = "text/plain; charset=UTF-8";
/// Content type of JSON output.
pub const CONTENT_TYPE_JSON: &str = "application/json";

/// A rendered `/stats` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub content_type: &'static str,
    pub body: String,
}

pub(crate) fn render(sel: &Selection, q: &StatsQuery) -> Rendered {
    match q.format {
        Format::Text => Rendered {
            content_type: CONTENT_TYPE_TEXT,
            body: text::render(sel, q.histogram_buckets),
        },
        Format::Json => Rendered {
            content_type: CONTENT_TYPE_JSON,
            body: json::render(sel, q.histogram_buckets),
        },
        Format::Prometheus => Rendered {
            content_type: CONTENT_TYPE_TEXT,
            body: prometheus::render(sel),
        },
    }
}
