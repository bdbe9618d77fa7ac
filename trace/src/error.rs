//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while generating, reading or scoring a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A configuration value is out of range or inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A compact model string (`weibull:shape=0.6,mean=20000`) could not be parsed.
    #[error("cannot parse {what} {input:?}: {detail}")]
    Spec {
        /// What was being parsed (delay model, loss model, ...).
        what: &'static str,
        /// The text given.
        input: String,
        /// Why it was refused.
        detail: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A pcap file is malformed or uses an unsupported format.
    #[error("{path}: {detail}")]
    Pcap {
        /// The file (or a label for in-memory data).
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A JSON document (truth file, record line) is malformed.
    #[error("{context}: {source}")]
    Json {
        /// Where (file and line).
        context: String,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// Record lines could not be read.
    #[error(transparent)]
    Record(#[from] wirelat_records::RecordError),
    /// A frame could not be built.
    #[error("cannot build frame: {0}")]
    Build(String),
    /// A timestamp left the representable range (before 1970 or past 2106 in a pcap).
    #[error("timestamp out of range: {0}")]
    Time(String),
}

impl TraceError {
    /// An I/O error with the file it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io { path: path.into(), source }
    }
}

/// Result with [`TraceError`].
pub type Result<T, E = TraceError> = std::result::Result<T, E>;
