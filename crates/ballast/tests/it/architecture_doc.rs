//! docs/architecture.md walks a call through the code by file: every path it names must exist, so that the walk
//! stays true when a module moves.

use std::path::Path;

#[test]
fn every_path_the_walk_through_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md");
    let paths: Vec<&str> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| quoted.starts_with("crates/"))
        .map(|quoted| quoted.split_whitespace().next().unwrap_or(quoted))
        .collect();
    assert!(paths.len() >= 30, "the walk names its files by path: {paths:?}");
    let missing: Vec<&&str> = paths.iter().filter(|path| !root.join(path).exists()).collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names paths that do not exist: {missing:?}"
    );
}
