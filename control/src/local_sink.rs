//! The local sinks: JSON lines (one per epoch and synopsis) to a file or stdout, and a dump of
//! the encoded bodies to a directory (so tests and operators can compare bytes).
//!
//! Sinks cannot return errors through [`EpochSink`]: a write failure is logged once, counted,
//! and the sink goes on (the data path never depends on an output).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::sink::{EpochMessage, EpochSink};

/// Writes one JSON object per message and line: the message's fields (the body only as
/// `summary.body_bytes`) and its summary.
pub struct JsonLinesSink {
    out: Box<dyn Write + Send>,
    label: String,
    lines: u64,
    failures: u64,
}

impl JsonLinesSink {
    /// Lines to `path`, or to stdout when `path` is `-`. Creates (truncates) the file.
    pub fn create(path: &str) -> std::io::Result<Self> {
        let out: Box<dyn Write + Send> = if path == "-" {
            Box::new(std::io::stdout())
        } else {
            let p = Path::new(path);
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            Box::new(BufWriter::new(File::create(p)?))
        };
        Ok(Self { out, label: path.to_owned(), lines: 0, failures: 0 })
    }

    /// A sink over any writer (tests).
    pub fn from_writer(out: Box<dyn Write + Send>, label: &str) -> Self {
        Self { out, label: label.to_owned(), lines: 0, failures: 0 }
    }

    /// Lines written.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    fn fail(&mut self, e: &dyn std::fmt::Display) {
        if self.failures == 0 {
            warn!(sink = %self.label, error = %e, "cannot write a JSON line (further failures are only counted)");
        }
        self.failures += 1;
    }
}

impl EpochSink for JsonLinesSink {
    fn deliver(&mut self, msg: &EpochMessage) {
        let result = serde_json::to_writer(&mut self.out, msg)
            .map_err(|e| e.to_string())
            .and_then(|()| self.out.write_all(b"\n").map_err(|e| e.to_string()));
        match result {
            Ok(()) => self.lines += 1,
            Err(e) => self.fail(&e),
        }
    }

    fn close(&mut self) {
        if let Err(e) = self.out.flush() {
            self.fail(&e);
        }
        if self.failures > 0 {
            warn!(sink = %self.label, failures = self.failures, "JSON lines that could not be written");
        }
    }
}

/// Writes each message's encoded body to `<dir>/<kind>-point<P>-segment<S>-epoch<E>.bin`.
pub struct BodyDumpSink {
    dir: PathBuf,
    files: u64,
    failures: u64,
}

impl BodyDumpSink {
    /// Dumps into `dir` (created if missing).
    pub fn create(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self { dir: dir.to_owned(), files: 0, failures: 0 })
    }

    /// The file name of a message's body.
    pub fn file_name(msg: &EpochMessage) -> String {
        format!("{}-point{}-segment{}-epoch{}.bin", msg.kind, msg.point, msg.segment, msg.epoch)
    }

    /// Files written.
    pub fn files(&self) -> u64 {
        self.files
    }
}

impl EpochSink for BodyDumpSink {
    fn deliver(&mut self, msg: &EpochMessage) {
        let path = self.dir.join(Self::file_name(msg));
        match std::fs::write(&path, &msg.body) {
            Ok(()) => self.files += 1,
            Err(e) => {
                if self.failures == 0 {
                    warn!(path = %path.display(), error = %e, "cannot dump an epoch body (further failures are only counted)");
                }
                self.failures += 1;
            }
        }
    }

    fn close(&mut self) {
        if self.failures > 0 {
            warn!(dir = %self.dir.display(), failures = self.failures, "epoch bodies that could not be dumped");
        }
    }
}
