//! Stage `format`: prettyplease, then one rustfmt run over all files, so that the files on disk
//! are exactly what `cargo fmt` would leave.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use proc_macro2::TokenStream;

use crate::diag::Diagnostics;

/// Pretty-prints each file's tokens and prepends `header`.
///
/// # Errors
///
/// Tokens that do not parse as a Rust file (a generator bug), per file.
pub fn pretty(
    header: &str,
    files: BTreeMap<String, TokenStream>,
) -> Result<BTreeMap<String, String>, Diagnostics> {
    let mut diags = Diagnostics::new("format");
    let mut out = BTreeMap::new();
    for (name, tokens) in files {
        match syn::parse2::<syn::File>(tokens) {
            Ok(file) => {
                let text = prettyplease::unparse(&file);
                out.insert(name, format!("{header}{text}"));
            }
            Err(e) => diags.push(name, format!("emitted code does not parse: {e}")),
        }
    }
    diags.finish(out)
}

/// Writes `files` below `dir` and runs rustfmt once over the module tree.
///
/// rustfmt formats a file's out-of-line modules with it, so it is given only the files that no
/// other file declares (the root `mod.rs`), in one process: two processes, or a file given
/// beside its parent, would format the same file twice, concurrently in the first case.
///
/// # Errors
///
/// I/O errors, or rustfmt failing (its stderr is in the message).
pub fn write_and_rustfmt(dir: &Path, files: &BTreeMap<String, String>) -> Result<(), String> {
    for (name, text) in files {
        let p = dir.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    let roots: Vec<_> = if files.contains_key("mod.rs") {
        vec![dir.join("mod.rs")]
    } else {
        files.keys().map(|name| dir.join(name)).collect()
    };
    let rustfmt = std::env::var("RUSTFMT").unwrap_or_else(|_| "rustfmt".to_owned());
    let output = Command::new(&rustfmt)
        .arg("--edition")
        .arg("2021")
        .args(&roots)
        .output()
        .map_err(|e| format!("cannot run {rustfmt}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "rustfmt failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

/// Reads every `.rs` file below `dir`, keyed by its path relative to `dir` with `/`.
///
/// # Errors
///
/// I/O errors.
pub fn read_tree(dir: &Path) -> Result<BTreeMap<String, String>, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<(), String> {
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            let p = entry.path();
            if p.is_dir() {
                walk(base, &p, out)?;
            } else {
                let rel = p
                    .strip_prefix(base)
                    .map_err(|e| e.to_string())?
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                let text = std::fs::read_to_string(&p)
                    .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
                out.insert(rel, text);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    if dir.exists() {
        walk(dir, dir, &mut out)?;
    }
    Ok(out)
}
