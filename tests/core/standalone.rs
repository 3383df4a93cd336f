//! The repository stands alone: no tracked text file points outside it (a clone has only
//! what the repository holds), and the documents the README links exist.

use std::path::{Path, PathBuf};

fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with('.') && name != ".ci" || name == "target" || name == "proptest-regressions" {
            continue;
        }
        if p.is_dir() {
            text_files(&p, out);
        } else if ["rs", "md", "toml", "sh", "py", "txt", "yml", "yaml", "cfg", ""]
            .contains(&p.extension().and_then(|x| x.to_str()).unwrap_or(""))
        {
            out.push(p);
        }
    }
}

#[test]
fn no_file_points_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let outside = concat!("..", "/shared");
    let mut files = Vec::new();
    text_files(root, &mut files);
    assert!(files.len() > 50, "found only {} files under {}", files.len(), root.display());
    let offenders: Vec<String> = files
        .iter()
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|s| s.contains(outside)))
        .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
        .collect();
    assert!(offenders.is_empty(), "files that point to {outside}: {offenders:?}");
}

#[test]
fn documents_the_readme_links_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for doc in ["docs/ARCHITECTURE.md", "BENCHMARKS.md"] {
        assert!(readme.contains(doc), "README does not link {doc}");
        assert!(root.join(doc).is_file(), "{doc} is missing");
    }
}
