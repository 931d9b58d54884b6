//! Durations and sizes in human form: the grammars, their parsers and their canonical spellings.

mod duration;
mod size;

pub use duration::{DurationError, format_duration, parse_duration};
pub use size::{SizeError, format_size, parse_size};
