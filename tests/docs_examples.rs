//! The operator pages under docs/ show `[synopses.*]` TOML examples: every one must parse into
//! the appliance's synopsis tables and validate, and each synopsis page must enable its own
//! synopsis at least once, so the pages cannot drift from the code.

use std::path::Path;

use serde::Deserialize;
use wirelat_control::synopses::SynopsesConfig;
use wirelat_dataplane::synopsis::SynopsisKind;

/// A configuration fragment holding only `[synopses.*]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fragment {
    synopses: SynopsesConfig,
}

/// The fenced ```toml blocks of a Markdown text, with the line each starts on.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```toml") => current = Some((i + 1, String::new())),
            (Some(_), l) if l.starts_with("```") => blocks.extend(current.take()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_toml_example_in_docs_is_a_valid_synopses_table() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut pages = 0;
    for kind in SynopsisKind::ALL {
        let path = dir.join(format!("{}.md", kind.name()));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let blocks = toml_blocks(&text);
        assert!(!blocks.is_empty(), "{} shows no TOML example", path.display());
        let mut enables_own = false;
        for (line, block) in blocks {
            let where_ = format!("{}:{line}", path.display());
            let f: Fragment = toml::from_str(&block).unwrap_or_else(|e| panic!("{where_}: {e}\n{block}"));
            f.synopses.validate().unwrap_or_else(|e| panic!("{where_}: {e}"));
            let enabled: Vec<SynopsisKind> =
                SynopsisKind::ALL.into_iter().filter(|k| f.synopses.enables(*k)).collect();
            assert!(!enabled.is_empty(), "{where_}: the example enables no synopsis");
            enables_own |= enabled.contains(&kind);
        }
        assert!(enables_own, "{} never enables {}", path.display(), kind.name());
        pages += 1;
    }
    // The index's example too.
    let index = dir.join("README.md");
    let text = std::fs::read_to_string(&index).unwrap_or_else(|e| panic!("{}: {e}", index.display()));
    for (line, block) in toml_blocks(&text) {
        let f: Fragment =
            toml::from_str(&block).unwrap_or_else(|e| panic!("{}:{line}: {e}", index.display()));
        f.synopses.validate().unwrap_or_else(|e| panic!("{}:{line}: {e}", index.display()));
    }
    assert_eq!(pages, SynopsisKind::COUNT);
}

#[test]
fn the_block_extractor_finds_fenced_toml_only() {
    let md = "text\n```toml\na = 1\n```\n```sh\nls\n```\n  ```toml\nb = 2\n  ```\n";
    let blocks = toml_blocks(md);
    assert_eq!(blocks, vec![(2, "a = 1\n".to_owned()), (8, "b = 2\n".to_owned())]);
}
