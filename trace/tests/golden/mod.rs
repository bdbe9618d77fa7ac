//! Golden digests of what the estimators produce (issue 22, W15): a refactor must leave the
//! records and estimates byte-identical, and these digests say whether it did.
//!
//! A test pushes one line per record or estimate under a kind (`lda`, `flow`, …); `check`
//! sorts each kind's lines (the order in which a collector commits groups is not part of the
//! contract), hashes them (XXH3-128: an equality check, not a security one) and compares each
//! kind's count and digest with the committed file. On a difference it writes the lines to
//! `$CARGO_TARGET_TMPDIR/golden/<name>/<kind>.txt` for a diff against the previous version and
//! fails, naming the kinds. A change that is meant to change the numbers regenerates the file
//! with `WIRELAT_BLESS=1` and says why in its commit.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Lines per kind, collected by a test.
#[derive(Default)]
pub struct Golden {
    kinds: BTreeMap<String, Vec<String>>,
}

impl Golden {
    /// Adds one line (a record, or an estimate's exact `{:?}`) under `kind`.
    pub fn push(&mut self, kind: &str, line: String) {
        self.kinds.entry(kind.to_string()).or_default().push(line);
    }

    /// The digest file's text: a comment, then `kind count digest` per kind.
    fn render(&mut self, name: &str) -> String {
        let mut out = format!(
            "# {name}: count and XXH3-128 of the sorted lines per kind (trace/tests/golden/mod.rs).\n\
             # Regenerate with WIRELAT_BLESS=1 only when the numbers are meant to change.\n"
        );
        for (kind, lines) in &mut self.kinds {
            lines.sort_unstable();
            let mut all = String::new();
            for l in lines.iter() {
                all.push_str(l);
                all.push('\n');
            }
            let h = xxhash_rust::xxh3::xxh3_128(all.as_bytes());
            writeln!(out, "{kind} {} {h:032x}", lines.len()).expect("write to a String");
        }
        out
    }

    /// Compares with (or, with `WIRELAT_BLESS=1`, writes) the digest file `path`.
    pub fn check(mut self, name: &str, path: &Path) {
        let actual = self.render(name);
        if std::env::var_os("WIRELAT_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(path, &actual).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
            return;
        }
        let expected = std::fs::read_to_string(path).unwrap_or_default();
        if expected == actual {
            return;
        }
        let rows = |t: &str| -> BTreeMap<String, String> {
            t.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split_once(' ').map(|(k, rest)| (k.to_string(), rest.to_string())))
                .collect()
        };
        let (want, got) = (rows(&expected), rows(&actual));
        let differ: std::collections::BTreeSet<&String> =
            want.keys().chain(got.keys()).filter(|k| want.get(*k) != got.get(*k)).collect();
        let dump = Path::new(env!("CARGO_TARGET_TMPDIR")).join("golden").join(name);
        let _ = std::fs::create_dir_all(&dump);
        for (kind, lines) in &self.kinds {
            let _ = std::fs::write(dump.join(format!("{kind}.txt")), lines.join("\n"));
        }
        panic!(
            "{name}: the estimates differ from the golden digests in {} for kinds {differ:?}\n\
             expected:\n{expected}\nactual:\n{actual}\nthis run's lines are in {}; if the change \
             is meant to change the numbers, rerun with WIRELAT_BLESS=1 and say why in the commit",
            path.display(),
            dump.display()
        );
    }
}
