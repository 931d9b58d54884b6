//! Durations and sizes written for people — `"50ms"`, `"1.5s"`, `"1h30m"`, `"8MiB"` — in one grammar for every
//! Ballast file: `ballast.toml` and chaos profiles alike. Each has a parser with errors that say what to write
//! instead, and a printer whose output parses back to the same value, so whatever a summary or an error shows can
//! be pasted into a file.
//!
//! And where in such a file a value is ([`line_column`]), for errors that point at it.
//!
//! No policy and no Ballast dependency: every crate, the chaos upstream included, can use it.

mod duration;
mod position;
mod size;

pub use duration::{DurationError, format_duration, parse_duration};
pub use position::line_column;
pub use size::{SizeError, format_size, parse_size};
