//! Where a configuration error is: the error type, 1-based file locations, and the readers
//! that find a table, a key's span and the dotted key path at an offset in the TOML text, so
//! that every error names the file, the line and column, and the key.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A configuration that failed to load.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML, does not fit the schema, or has a bad value.
    #[error("{}:{location}{}: {message}", path.display(), key_suffix(key))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where in the file, when known.
        location: Location,
        /// Dotted key path of the offending entry, e.g. `port[1].mtu`, when known.
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
}

fn key_suffix(key: &Option<String>) -> String {
    key.as_ref().map(|k| format!(": key `{k}`")).unwrap_or_default()
}

/// A 1-based line and column in the config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Location {
    /// Line, from 1 (0 when unknown).
    pub line: usize,
    /// Column in characters, from 1 (0 when unknown).
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 { Ok(()) } else { write!(f, "{}:{}", self.line, self.column) }
    }
}

/// The byte offset of the line holding exactly the table header `header` (e.g. `[ship]`).
pub(super) fn table_start(text: &str, header: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with(header) {
            return Some(offset + (line.len() - trimmed.len()));
        }
        offset += line.len();
    }
    None
}

/// The span of the line `key = ...` in the table whose header starts at `table` (so an error
/// points at the key itself); `table` when the key is not written (a default was used).
pub(super) fn key_span(text: &str, table: Range<usize>, key: &str) -> Range<usize> {
    let Some(body) = text.get(table.start..) else { return table };
    let mut offset = table.start;
    for (i, line) in body.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_start();
        if i > 0 && trimmed.starts_with('[') {
            break;
        }
        if let Some(rest) = trimmed.strip_prefix(key)
            && rest.trim_start().starts_with('=')
        {
            let start = offset + (line.len() - trimmed.len());
            return start..start + key.len();
        }
        offset += line.len();
    }
    table
}

/// Builds an [`ConfigError::Invalid`] for a byte span of `text`.
pub(super) fn invalid(path: &Path, text: &str, span: Option<Range<usize>>, message: String) -> ConfigError {
    let (location, key) = match span {
        Some(span) if span.end > 0 || span.start > 0 => (locate(text, span.start), key_at(text, span.start)),
        _ => (Location::default(), None),
    };
    ConfigError::Invalid { path: path.to_owned(), location, key, message }
}

/// Line and column (both from 1) of byte `offset`.
pub(super) fn locate(text: &str, offset: usize) -> Location {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text.get(line_start..offset).map_or(1, |s| s.chars().count() + 1);
    Location { line, column }
}

/// The dotted key path (e.g. `port[1].mtu`) of the entry at byte `offset`: the table header
/// and the last `key =` line at or before it. Best effort over the raw text, used only to
/// name things in error messages.
pub(super) fn key_at(text: &str, offset: usize) -> Option<String> {
    let mut table: Option<String> = None;
    let mut array_counts: Vec<(String, usize)> = Vec::new();
    let mut key: Option<String> = None;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        if line_start > offset {
            break;
        }
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = name.trim().to_owned();
            let index = match array_counts.iter_mut().find(|(n, _)| *n == name) {
                Some((_, count)) => {
                    *count += 1;
                    *count - 1
                }
                None => {
                    array_counts.push((name.clone(), 1));
                    0
                }
            };
            table = Some(format!("{name}[{index}]"));
            key = None;
        } else if let Some(name) = trimmed.strip_prefix('[').and_then(|r| r.split(']').next()) {
            table = Some(name.trim().to_owned());
            key = None;
        } else if let Some((lhs, _)) = trimmed.split_once('=') {
            let lhs = lhs.trim();
            if !lhs.is_empty() && lhs.chars().all(|c| c.is_ascii_alphanumeric() || "_-.\"'".contains(c)) {
                key = Some(lhs.trim_matches(|c| c == '"' || c == '\'').to_owned());
            }
        } else if offset >= line_start && offset < line_start + line.len() && !trimmed.is_empty() {
            // An unknown bare key without `=` or a syntax error: name what is on the line.
            let word: String =
                trimmed.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').collect();
            if !word.is_empty() {
                key = Some(word);
            }
        }
        line_start += line.len();
    }
    match (table, key) {
        (Some(t), Some(k)) => Some(format!("{t}.{k}")),
        (None, Some(k)) => Some(k),
        (Some(t), None) => Some(t),
        (None, None) => None,
    }
}
