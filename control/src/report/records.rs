//! The JSON-lines output of the peer, written so that a crash and restart neither loses nor
//! repeats a group of records.
//!
//! Records are grouped: one group per (segment, synopsis, epoch range) or (point, fridge,
//! epoch range) ([`GroupKey`]). A group's lines go out in one write, then one line naming the
//! group and the file's new length goes to the commit log. At start-up the commit log is read
//! back: the records file is cut to the last committed length (dropping a group half-written
//! by a crash) and the committed groups are known to be emitted, so the peer acknowledges
//! their resent synopses without emitting them again.
//!
//! The records themselves are the scorer's schema ([`wirelat_records`]) with the peer's extra
//! keys (the segment id, loss, diagnostics), which the scorer ignores: typed [`Line`]s up to
//! here, and JSON only when [`RecordSink::emit`] writes them (see [`crate::report::line`] for
//! the key order).

use crate::report::line::Line;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use wirelat_dataplane::synopsis::SynopsisKind;

/// What a group of records is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// A segment (two-point synopses).
    Segment(u32),
    /// A point (the fridge).
    Point(u32),
}

/// One group of records: a scope, a synopsis and the epochs `first..=last` it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupKey {
    /// Segment or point.
    pub scope: Scope,
    /// The synopsis.
    pub kind: SynopsisKind,
    /// First epoch.
    pub first: u64,
    /// Last epoch (inclusive).
    pub last: u64,
}

impl GroupKey {
    fn order(&self) -> (u64, Scope, u8, u64) {
        (self.first, self.scope, self.kind as u8, self.last)
    }
}

impl Ord for GroupKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order().cmp(&other.order())
    }
}

impl PartialOrd for GroupKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// `s<segment>/<kind>/<first>-<last>` or `p<point>/…`.
impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (c, id) = match self.scope {
            Scope::Segment(s) => ('s', s),
            Scope::Point(p) => ('p', p),
        };
        write!(f, "{c}{id}/{}/{}-{}", self.kind, self.first, self.last)
    }
}

impl FromStr for GroupKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("not a group key: {s:?}");
        let mut parts = s.split('/');
        let (scope, kind, range) = (parts.next(), parts.next(), parts.next());
        let (Some(scope), Some(kind), Some(range), None) = (scope, kind, range, parts.next()) else {
            return Err(bad());
        };
        let id = scope.get(1..).and_then(|x| x.parse::<u32>().ok()).ok_or_else(bad)?;
        let scope = match scope.chars().next() {
            Some('s') => Scope::Segment(id),
            Some('p') => Scope::Point(id),
            _ => return Err(bad()),
        };
        let kind = SynopsisKind::ALL.into_iter().find(|k| k.name() == kind).ok_or_else(bad)?;
        let (a, b) = range.split_once('-').ok_or_else(bad)?;
        let (first, last) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        Ok(GroupKey { scope, kind, first, last })
    }
}

enum Out {
    File(File),
    Stdout,
}

/// The records file and its commit log.
pub struct RecordSink {
    out: Out,
    commit: Option<(PathBuf, File)>,
    offset: u64,
    emitted: BTreeSet<GroupKey>,
    floor: u64,
    records: u64,
}

impl RecordSink {
    /// Opens `records` (`-`: stdout, no commit log) and its `commit_log`: recovers the groups
    /// already emitted and cuts a half-written tail.
    pub fn open(records: &str, commit_log: Option<&Path>) -> io::Result<Self> {
        if records == "-" {
            let mut s = Self {
                out: Out::Stdout,
                commit: None,
                offset: 0,
                emitted: BTreeSet::new(),
                floor: 0,
                records: 0,
            };
            s.write_lines(&[Line::run()])?;
            return Ok(s);
        }
        let path = Path::new(records);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let mut emitted = BTreeSet::new();
        let mut committed = 0u64;
        let commit = match commit_log {
            Some(cp) => {
                let (groups, end, good_len) = read_commit_log(cp)?;
                emitted = groups;
                committed = end;
                let mut c =
                    OpenOptions::new().read(true).write(true).create(true).truncate(false).open(cp)?;
                // Drop a torn last line of the commit log itself.
                c.set_len(good_len)?;
                c.seek(SeekFrom::End(0))?;
                Some((cp.to_path_buf(), c))
            }
            None => None,
        };
        let len = file.metadata()?.len();
        let offset = if commit.is_some() {
            if len > committed {
                tracing::warn!(
                    file = records,
                    cut = len - committed,
                    "dropping records written after the last commit (an interrupted group)"
                );
                file.set_len(committed)?;
            } else if len < committed {
                tracing::warn!(
                    file = records,
                    "the records file is shorter than its commit log says; continuing after it"
                );
            }
            committed.min(len)
        } else {
            len
        };
        file.seek(SeekFrom::Start(offset))?;
        let mut s = Self { out: Out::File(file), commit, offset, emitted, floor: 0, records: 0 };
        if offset == 0 {
            s.write_lines(&[Line::run()])?;
            s.commit_offset(None)?;
        }
        Ok(s)
    }

    /// True when the group was emitted (this run or a previous one), or is older than what
    /// is remembered.
    pub fn is_emitted(&self, g: &GroupKey) -> bool {
        g.last < self.floor || self.emitted.contains(g)
    }

    /// True when this group's commit is remembered (the floor aside).
    pub fn committed(&self, g: &GroupKey) -> bool {
        self.emitted.contains(g)
    }

    /// Groups remembered.
    pub fn remembered(&self) -> usize {
        self.emitted.len()
    }

    /// Record lines written by this process.
    pub fn records_written(&self) -> u64 {
        self.records
    }

    /// Forgets groups that end before `epoch` (they count as emitted from now on).
    pub fn forget_before(&mut self, epoch: u64) {
        if epoch <= self.floor {
            return;
        }
        self.floor = epoch;
        self.emitted.retain(|g| g.last >= epoch);
    }

    /// The one place where records become JSON.
    fn write_lines(&mut self, lines: &[Line]) -> io::Result<()> {
        let mut buf = Vec::new();
        for l in lines {
            serde_json::to_writer(&mut buf, &l.to_json()).map_err(io::Error::other)?;
            buf.push(b'\n');
        }
        match &mut self.out {
            Out::File(f) => {
                f.write_all(&buf)?;
                f.flush()?;
            }
            Out::Stdout => {
                let mut o = io::stdout().lock();
                o.write_all(&buf)?;
                o.flush()?;
            }
        }
        self.offset += buf.len() as u64;
        Ok(())
    }

    fn commit_offset(&mut self, g: Option<&GroupKey>) -> io::Result<()> {
        if let Some((_, c)) = &mut self.commit {
            let line = serde_json::json!({ "group": g.map(|g| g.to_string()), "offset": self.offset });
            let mut buf = serde_json::to_vec(&line).map_err(io::Error::other)?;
            buf.push(b'\n');
            c.write_all(&buf)?;
            c.flush()?;
        }
        Ok(())
    }

    /// Writes a group's lines, then commits it.
    pub fn emit(&mut self, g: &GroupKey, lines: &[Line]) -> io::Result<()> {
        self.write_lines(lines)?;
        self.records += lines.len() as u64;
        self.commit_offset(Some(g))?;
        self.emitted.insert(*g);
        Ok(())
    }
}

/// Reads a commit log: the committed groups, the records length after the last good line and
/// the length of the log's good prefix.
fn read_commit_log(path: &Path) -> io::Result<(BTreeSet<GroupKey>, u64, u64)> {
    let mut groups = BTreeSet::new();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((groups, 0, 0)),
        Err(e) => return Err(e),
    };
    let mut r = BufReader::new(file);
    let (mut end, mut good) = (0u64, 0u64);
    let mut line = String::new();
    loop {
        line.clear();
        let n = r.read_line(&mut line)?;
        if n == 0 || !line.ends_with('\n') {
            break;
        }
        let Ok(v) = serde_json::from_str::<Value>(&line) else { break };
        let Some(offset) = v.get("offset").and_then(Value::as_u64) else { break };
        match v.get("group") {
            Some(Value::String(g)) => match g.parse() {
                Ok(g) => {
                    groups.insert(g);
                }
                Err(_) => break,
            },
            Some(Value::Null) => {}
            _ => break,
        }
        end = offset;
        good += n as u64;
    }
    Ok((groups, end, good))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::line::{EpochSummary, GroupFailure, ScopeId};

    /// A small line numbered `n`.
    fn line(n: u64) -> Line {
        Line::EpochSummary(EpochSummary::Failed(GroupFailure {
            synopsis: SynopsisKind::Lda,
            scope: ScopeId::Segment(3),
            direction: None,
            epoch_first: n,
            epoch_last: n,
            error: format!("n{n}"),
        }))
    }

    fn key(e: u64) -> GroupKey {
        GroupKey { scope: Scope::Segment(3), kind: SynopsisKind::Lda, first: e, last: e }
    }

    #[test]
    fn group_keys_round_trip_as_text() {
        for g in [key(5), GroupKey { scope: Scope::Point(2), kind: SynopsisKind::Fridge, first: 4, last: 7 }]
        {
            assert_eq!(g.to_string().parse::<GroupKey>(), Ok(g));
        }
        assert_eq!(key(5).to_string(), "s3/lda/5-5");
        for bad in ["", "x3/lda/1-1", "s3/bogus/1-1", "s3/lda/1", "s/lda/1-1", "s3/lda/1-1/x"] {
            assert!(bad.parse::<GroupKey>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_crash_between_write_and_commit_neither_loses_nor_repeats() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("r.jsonl");
        let com = dir.path().join("r.jsonl.commit");
        let rs = rec.to_str().unwrap();
        let mut s = RecordSink::open(rs, Some(&com)).unwrap();
        s.emit(&key(1), &[line(1)]).unwrap();
        s.emit(&key(2), &[line(2), line(3)]).unwrap();
        drop(s);
        // A crash after the records of group 3 were written but before their commit, and a
        // torn commit line.
        let mut f = OpenOptions::new().append(true).open(&rec).unwrap();
        f.write_all(b"{\"n\":4}\n{\"n\":").unwrap();
        let mut c = OpenOptions::new().append(true).open(&com).unwrap();
        c.write_all(b"{\"group\":\"s3/lda/3-3\",\"off").unwrap();
        let s = RecordSink::open(rs, Some(&com)).unwrap();
        assert!(s.is_emitted(&key(1)) && s.is_emitted(&key(2)) && !s.is_emitted(&key(3)));
        drop(s);
        let text = std::fs::read_to_string(&rec).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].contains("\"record\":\"run\""));
        assert_eq!(lines[3], line(3).to_json().to_string());
        // Emission continues after the recovered end.
        let mut s = RecordSink::open(rs, Some(&com)).unwrap();
        s.emit(&key(3), &[line(4)]).unwrap();
        assert_eq!(std::fs::read_to_string(&rec).unwrap().lines().count(), 5);
        s.forget_before(3);
        assert!(s.is_emitted(&key(1)) && s.remembered() == 1);
    }
}
