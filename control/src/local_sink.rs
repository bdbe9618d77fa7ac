//! The local sinks: JSON lines (one per epoch and synopsis) to a file or stdout, and a dump of
//! the encoded bodies to a directory (so tests and operators can compare bytes).
//!
//! Sinks cannot return errors through [`EpochSink`]: a write failure is logged once, counted,
//! and the sink goes on (the data path never depends on an output).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
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
    /// Lines to `path`, or to stdout when `path` is `-`. Appends to an existing file, so that
    /// a restart never erases earlier results; a last line left unfinished (a crash mid-write)
    /// is closed with a newline first, so every later line stays a whole JSON object.
    pub fn create(path: &str) -> std::io::Result<Self> {
        let out: Box<dyn Write + Send> = if path == "-" {
            Box::new(std::io::stdout())
        } else {
            let p = Path::new(path);
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let mut file = OpenOptions::new().create(true).append(true).read(true).open(p)?;
            if ends_unfinished(&mut file)? {
                file.write_all(b"\n")?;
            }
            Box::new(BufWriter::new(file))
        };
        Ok(Self { out, label: path.to_owned(), lines: 0, failures: 0 })
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

/// The file is not empty and its last byte is not a newline.
fn ends_unfinished(file: &mut File) -> std::io::Result<bool> {
    if file.metadata()?.len() == 0 {
        return Ok(false);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
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

#[cfg(test)]
mod tests {
    use super::*;
    use wirelat_dataplane::synopsis::SynopsisKind;

    fn message(epoch: u64) -> EpochMessage {
        EpochMessage {
            point: 1,
            segment: 0,
            epoch,
            epoch_len_ns: 1_000_000,
            kind: SynopsisKind::Fridge,
            fingerprint: 7,
            complete: true,
            body: Vec::new(),
            summary: crate::sink::Summary::Simulated { simulated: true },
        }
    }

    /// The line of a typed summary is the one the `json!` summaries gave: message fields in
    /// struct order, the summary's keys sorted (`body_bytes` and `shards` among the synopsis's
    /// own), a simulated point's summary `{"simulated":true}`.
    #[test]
    fn summaries_are_written_with_sorted_keys() {
        use crate::control_side::LdaHarvest;
        use crate::sink::{Harvested, Summary, SynopsisSummary};
        let mut m = message(3);
        m.kind = SynopsisKind::Lda;
        m.segment = 11;
        let mut h = Harvested::new(
            2,
            SynopsisSummary::Lda(LdaHarvest { direction: "reverse", measured: 5, packets: 4 }),
        );
        h.body_bytes = 36;
        m.summary = Summary::Harvested(h);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"point":1,"segment":11,"epoch":3,"epoch_len_ns":1000000,"kind":"lda","fingerprint":7,"complete":true,"summary":{"body_bytes":36,"direction":"reverse","measured":5,"packets":4,"shards":2}}"#
        );
        assert!(serde_json::to_string(&message(0)).unwrap().ends_with(r#""summary":{"simulated":true}}"#));
    }

    fn write_epochs(path: &str, epochs: std::ops::Range<u64>) {
        let mut sink = JsonLinesSink::create(path).unwrap();
        for e in epochs {
            sink.deliver(&message(e));
        }
        sink.close();
    }

    #[test]
    fn a_restart_appends_and_closes_an_unfinished_line() {
        let dir = std::env::temp_dir().join(format!("w13-json-append-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.jsonl");
        let p = path.to_str().unwrap();
        write_epochs(p, 0..2);
        write_epochs(p, 2..3);
        // A crash mid-line, then another restart.
        OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"point\":1,").unwrap();
        write_epochs(p, 3..4);

        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        let epochs: Vec<u64> = lines
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| v["epoch"].as_u64().unwrap())
            .collect();
        assert_eq!(epochs, [0, 1, 2, 3], "every whole line survives the restarts: {text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
