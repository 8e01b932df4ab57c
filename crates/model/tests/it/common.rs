//! Helpers shared by the test modules.

use std::path::PathBuf;

/// The shared corpus folder beside the project, or `None` (with a note on
/// stderr) when it is absent so that corpus tests skip cleanly.
pub(crate) fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: corpus not found at {} (../shared/corpus beside the project)",
            dir.display()
        );
        None
    }
}

/// Every transcript file of the corpus (not licences or sub-agent logs), sorted.
pub(crate) fn corpus_files() -> Vec<PathBuf> {
    let Some(dir) = corpus_dir() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for sub in std::fs::read_dir(&dir).unwrap().flatten() {
        if !sub.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(sub.path()).unwrap().flatten() {
            let p = f.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".jsonl") || name.ends_with(".json") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
