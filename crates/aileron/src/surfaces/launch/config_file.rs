//! One file `aileron launch` writes: the agent's config with our entry set, or the temporary
//! `--mcp-config` file for Claude Code. Applying keeps a one-time backup of the user's original
//! (`<file>.aileron-backup`), writes atomically, follows a symlinked config to its target (dotfile
//! managers link these files; a link inside the agent's own directories, which a launched agent
//! may write, is refused before anything is applied: `launch::refuse_writing_through_agents_links`),
//! and keeps the file's mode.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::platform::home::{create_private_dir, write_atomic};

pub const BACKUP_SUFFIX: &str = ".aileron-backup";

/// What a launch does to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEdit {
    pub path: PathBuf,
    /// The current content; `None` when the file does not exist yet.
    pub before: Option<String>,
    pub after: String,
    /// Claude Code's per-launch `--mcp-config` file: created for the session, removed after it.
    pub temporary: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error(
        "reading {path}: {source}\nhint: it should be the agent's config file, a regular file; move aside what is there and launch again"
    )]
    Read { path: PathBuf, source: std::io::Error },
    #[error("writing {path}: {source}\nhint: check that the directory is writable; nothing was started")]
    Write { path: PathBuf, source: std::io::Error },
}

/// The largest config file read (agents' configs are a few KiB).
const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// Reads a config file; `None` when it does not exist. Only a regular file, without waiting, and
/// at most [`MAX_CONFIG_BYTES`]: these files lie in directories a launched agent may write, and a
/// FIFO (or a link to `/dev/zero`) left there held the next launch for good (the seventh
/// re-attack).
pub fn read_existing(path: &Path) -> Result<Option<String>, ConfigFileError> {
    let read_error = |source| ConfigFileError::Read { path: path.to_path_buf(), source };
    match super::git::read_capped(path, true, MAX_CONFIG_BYTES + 1) {
        Ok(bytes) if bytes.len() as u64 > MAX_CONFIG_BYTES => {
            Err(read_error(std::io::Error::other("larger than 16 MiB, so not a config file")))
        }
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| read_error(std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(read_error(source)),
    }
}

impl ConfigEdit {
    pub fn changes_anything(&self) -> bool {
        self.before.as_deref() != Some(self.after.as_str())
    }

    pub fn backup_path(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(BACKUP_SUFFIX);
        PathBuf::from(name)
    }

    /// Writes the new content. Returns the backup written now, if any (a backup is made once:
    /// the first launch's view of the user's own file is the one worth keeping).
    pub fn apply(&self) -> Result<Option<PathBuf>, ConfigFileError> {
        if !self.changes_anything() {
            return Ok(None);
        }
        let write_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ConfigFileError::Write { path, source }
        };
        let target = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        let mut backup_written = None;
        if let Some(before) = &self.before {
            let backup = self.backup_path();
            if !backup.exists() {
                write_atomic(&backup, before.as_bytes(), 0o600).map_err(write_error(&backup))?;
                backup_written = Some(backup);
            }
        }
        let mode = std::fs::metadata(&target).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o600);
        if let Some(parent) = target.parent() {
            create_private_dir(parent).map_err(write_error(parent))?;
        }
        write_atomic(&target, self.after.as_bytes(), mode).map_err(write_error(&target))?;
        Ok(backup_written)
    }

    /// A unified-diff-like view for `--dry-run`.
    pub fn render(&self) -> String {
        let path = self.path.display();
        let mut out = match (&self.before, self.temporary) {
            (_, true) => format!("--- (temporary file for this session)\n+++ {path}\n"),
            (None, false) => format!("--- (new file)\n+++ {path}\n"),
            (Some(_), false) => format!("--- {path}\n+++ {path}\n"),
        };
        if !self.changes_anything() {
            out.push_str("(already up to date: no change)\n");
            return out;
        }
        out.push_str(&diff(self.before.as_deref().unwrap_or(""), &self.after));
        if self.before.is_some() && !self.backup_path().exists() {
            out.push_str(&format!("(the original would be kept as {})\n", self.backup_path().display()));
        }
        out
    }
}

/// Lines of context kept around the changed region.
const CONTEXT: usize = 2;

/// The changed region between the common head and tail, with a little context. Our edits touch
/// one contiguous region, so this is an exact diff for them.
pub fn diff(before: &str, after: &str) -> String {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..].iter().rev().zip(new[head..].iter().rev()).take_while(|(a, b)| a == b).count();
    let from = head.saturating_sub(CONTEXT);
    let old_end = (old.len() - tail + CONTEXT).min(old.len());
    let new_end = (new.len() - tail + CONTEXT).min(new.len());
    let mut out = format!("@@ -{},{} +{},{} @@\n", from + 1, old_end - from, from + 1, new_end - from);
    for line in &old[from..head] {
        out.push_str(&format!(" {line}\n"));
    }
    for line in &old[head..old.len() - tail] {
        out.push_str(&format!("-{line}\n"));
    }
    for line in &new[head..new.len() - tail] {
        out.push_str(&format!("+{line}\n"));
    }
    for line in &new[new.len() - tail..new_end] {
        out.push_str(&format!(" {line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_shows_the_changed_region_with_context() {
        let check = |before: &str, after: &str, expected: &str| assert_eq!(diff(before, after), expected);
        check("a\nb\nc\nd\ne\nf\n", "a\nb\nc\nX\ne\nf\n", "@@ -2,5 +2,5 @@\n b\n c\n-d\n+X\n e\n f\n");
        check("", "x\ny\n", "@@ -1,0 +1,2 @@\n+x\n+y\n");
        check("a\nb\n", "a\nb\nc\n", "@@ -1,2 +1,3 @@\n a\n b\n+c\n");
    }

    #[test]
    fn apply_backs_up_once_keeps_the_mode_and_follows_symlinks() {
        let temp = tempfile::tempdir().unwrap();
        let real = temp.path().join("dotfiles").join("config.toml");
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::write(&real, "original\n").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = temp.path().join("config.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();

        let edit = |before: &str, after: &str| ConfigEdit {
            path: link.clone(),
            before: Some(before.into()),
            after: after.into(),
            temporary: false,
        };
        let backup = edit("original\n", "first\n").apply().unwrap();
        assert_eq!(backup, Some(temp.path().join("config.toml.aileron-backup")));
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is kept");
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "first\n");
        assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o640);
        assert_eq!(edit("first\n", "second\n").apply().unwrap(), None, "the first backup stays");
        assert_eq!(std::fs::read_to_string(backup.unwrap()).unwrap(), "original\n");
        assert_eq!(edit("second\n", "second\n").apply().unwrap(), None);
    }
}
