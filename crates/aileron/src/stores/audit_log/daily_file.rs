//! The daily files `audit-YYYY-MM-DD.jsonl`: their names, the listing in date order, and reading
//! one newest line first without loading it whole.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::platform::home::sync_dir;

/// `audit-YYYY-MM-DD.jsonl` files in date order. Other names (sidecars, the lock) are ignored.
pub(super) fn log_files(audit_dir: &Path) -> io::Result<Vec<(NaiveDate, PathBuf)>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(audit_dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(date) = name.to_str().and_then(date_of_file_name) else { continue };
        files.push((date, entry.path()));
    }
    files.sort();
    Ok(files)
}

pub(super) fn date_of_file_name(name: &str) -> Option<NaiveDate> {
    let date = name.strip_prefix("audit-")?.strip_suffix(".jsonl")?;
    if date.len() != 10 {
        return None;
    }
    NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()
}

pub(super) fn log_file_name(date: NaiveDate) -> String {
    format!("audit-{}.jsonl", date.format("%Y-%m-%d"))
}

/// Opens the daily file at `path` in `audit_dir` for appending, creating it (mode 0600) if it
/// is missing; a new file's directory entry is synced, so that the file outlives a crash as soon
/// as its data does.
pub(super) fn open_for_append(audit_dir: &Path, path: &Path) -> io::Result<File> {
    let existed = path.exists();
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))?;
    if !existed {
        sync_dir(audit_dir)?;
    }
    Ok(file)
}

pub(super) fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// How much [`NewestFirstLines`] reads per step: large enough that a page of records costs one
/// or two reads, small enough that a query's memory does not grow with the file.
pub(super) const CHUNK_BYTES: usize = 256 * 1024;

/// The complete lines of one file, newest first, read backwards in chunks.
///
/// Only bytes up to the file's length when it was opened are read (the writer may be appending).
/// Bytes after the last newline are a record being written right now or torn by a crash: never
/// acknowledged, so never yielded. Every other line is yielded (also empty and damaged ones: the
/// caller decides), the same lines [`aileron_core::audit::log_lines`] gives with
/// `has_trailing_newline`, in reverse.
pub(super) struct NewestFirstLines {
    file: File,
    chunk_bytes: usize,
    /// The file offset of `buffer[0]`; everything before it is still unread.
    buffer_start: u64,
    /// File bytes from `buffer_start`, of which only `..end` are not yet yielded.
    buffer: Vec<u8>,
    /// The previous buffer, reused for the next chunk.
    spare: Vec<u8>,
    /// Where the next line to yield ends (the index of its newline); `None` until the file's last
    /// newline is found.
    end: Option<usize>,
    done: bool,
}

impl NewestFirstLines {
    pub(super) fn open(path: &Path, chunk_bytes: usize) -> io::Result<NewestFirstLines> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let mut lines = NewestFirstLines {
            file,
            chunk_bytes: chunk_bytes.max(1),
            buffer_start: len,
            buffer: Vec::new(),
            spare: Vec::new(),
            end: None,
            done: len == 0,
        };
        if !lines.done {
            lines.read_newest_chunk()?;
        }
        Ok(lines)
    }

    /// The next line without its newline, newest first; `None` after the file's first line.
    pub(super) fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            if self.done {
                return Ok(None);
            }
            let Some(end) = self.end else {
                if let Some(newline) = memchr::memrchr(b'\n', &self.buffer) {
                    self.end = Some(newline);
                } else if self.buffer_start == 0 {
                    self.done = true; // no newline at all: the whole file is one unfinished line
                } else {
                    self.read_previous_chunk(self.buffer.len())?;
                }
                continue;
            };
            if let Some(newline) = memchr::memrchr(b'\n', &self.buffer[..end]) {
                self.end = Some(newline);
                return Ok(Some(&self.buffer[newline + 1..end]));
            }
            if self.buffer_start == 0 {
                self.done = true;
                return Ok(Some(&self.buffer[..end]));
            }
            // The line starts in an earlier chunk: keep its known part behind the chunk before it.
            self.read_previous_chunk(end)?;
        }
    }

    /// The last chunk. A read shorter than the length seen at open means the file shrank in
    /// between (the writer took a failed batch back, never acknowledged): what is there counts.
    fn read_newest_chunk(&mut self) -> io::Result<()> {
        let start = self.buffer_start.saturating_sub(self.chunk_bytes as u64);
        let mut buffer = vec![0; (self.buffer_start - start) as usize];
        let mut filled = 0;
        while filled < buffer.len() {
            match self.file.read_at(&mut buffer[filled..], start + filled as u64) {
                Ok(0) => break,
                Ok(read) => filled += read,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buffer.truncate(filled);
        self.buffer = buffer;
        self.buffer_start = start;
        Ok(())
    }

    /// Reads the chunk before `buffer_start` and puts it in front of `buffer[..keep]`.
    fn read_previous_chunk(&mut self, keep: usize) -> io::Result<()> {
        let start = self.buffer_start.saturating_sub(self.chunk_bytes as u64);
        let read = (self.buffer_start - start) as usize;
        // The two buffers take turns, so a long file costs no allocation per chunk.
        let mut next = std::mem::take(&mut self.spare);
        next.clear();
        next.resize(read, 0);
        self.file.read_exact_at(&mut next, start)?;
        next.extend_from_slice(&self.buffer[..keep]);
        self.spare = std::mem::replace(&mut self.buffer, next);
        self.buffer_start = start;
        self.end = self.end.map(|end| end + read);
        Ok(())
    }
}

/// The first line of a file if it is complete within `max_bytes` (to learn where a file starts
/// without reading it).
pub(super) fn first_line(path: &Path, max_bytes: usize) -> io::Result<Option<Vec<u8>>> {
    let file = File::open(path)?;
    let mut buffer = vec![0; max_bytes];
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read_at(&mut buffer[filled..], filled as u64) {
            Ok(0) => break,
            Ok(read) => {
                filled += read;
                if memchr::memchr(b'\n', &buffer[filled - read..filled]).is_some() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(memchr::memchr(b'\n', &buffer[..filled]).map(|newline| buffer[..newline].to_vec()))
}

#[cfg(test)]
mod tests {
    use aileron_core::audit::log_lines;
    use chrono::{TimeZone, Utc};

    use super::*;

    /// Every line [`NewestFirstLines`] yields, for one chunk size.
    fn newest_first(path: &Path, chunk_bytes: usize) -> Vec<String> {
        let mut lines = NewestFirstLines::open(path, chunk_bytes).unwrap();
        let mut found = Vec::new();
        while let Some(line) = lines.next_line().unwrap() {
            found.push(String::from_utf8(line.to_vec()).unwrap());
        }
        found
    }

    /// Backwards reading yields exactly the acknowledged lines `log_lines` sees forwards, reversed,
    /// whatever the chunk size: chunk boundaries fall inside lines, on newlines, and lines span
    /// many chunks.
    #[test]
    fn newest_first_lines_are_the_complete_lines_reversed_for_every_chunk_size() {
        let long = "x".repeat(37);
        let texts = [
            String::new(),
            "\n".into(),
            "\n\n".into(),
            "torn".into(),
            "a\n".into(),
            "a\nb".into(),
            "a\nb\n".into(),
            "first\n\nthird\n".into(),
            "one\ntwo\nthree\n{\"torn".into(),
            format!("{long}\nshort\n{long}{long}\n\nend\npartial-{long}"),
            format!("\n{long}\n"),
        ];
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("audit-2026-11-22.jsonl");
        for text in &texts {
            fs::write(&path, text).unwrap();
            let mut expected: Vec<String> = log_lines("f", text, true)
                .filter(|line| line.has_trailing_newline)
                .map(|line| line.text.to_string())
                .collect();
            expected.reverse();
            for chunk_bytes in (1..=12).chain([36, 37, 38, 75, 1024, CHUNK_BYTES]) {
                assert_eq!(newest_first(&path, chunk_bytes), expected, "{text:?} in chunks of {chunk_bytes}");
            }
        }
    }

    #[test]
    fn first_line_table() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("f");
        let check = |text: &str, max_bytes: usize, expected: Option<&str>| {
            fs::write(&path, text).unwrap();
            let got = first_line(&path, max_bytes).unwrap();
            assert_eq!(got.as_deref(), expected.map(str::as_bytes), "{text:?} within {max_bytes}");
        };
        check("", 16, None);
        check("torn", 16, None);
        check("one\ntwo\n", 16, Some("one"));
        check("one\ntwo\n", 4, Some("one"));
        check("one\ntwo\n", 3, None);
        check("\nx\n", 16, Some(""));
    }

    #[test]
    fn file_names_table() {
        let check = |name: &str, expected: Option<(i32, u32, u32)>| {
            let expected = expected.map(|(y, m, d)| NaiveDate::from_ymd_opt(y, m, d).unwrap());
            assert_eq!(date_of_file_name(name), expected, "{name}");
        };
        check("audit-2026-11-22.jsonl", Some((2026, 11, 22)));
        check("audit-2026-11-22.jsonl.torn-1700000000000", None);
        check("audit-2026-1-2.jsonl", None);
        check(".writer.lock", None);
        check("audit-2026-13-01.jsonl", None);
        let date = Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap().date_naive();
        assert_eq!(log_file_name(date), "audit-2026-01-02.jsonl");
    }
}

/// Reads record lines forward from a position in the daily files, moving to the next day's file
/// at the end of one (the audit export, the Merkle tree's catch-up and checks).
pub(super) struct ForwardLines {
    dir: PathBuf,
    /// The file being read and the byte offset of its next line.
    file: Option<(PathBuf, u64)>,
}

impl ForwardLines {
    /// Positioned after the first `skip` lines of the log (one forward pass, at start only).
    /// A log of fewer lines leaves it at the log's end.
    pub(super) fn at(dir: &Path, skip: u64) -> io::Result<ForwardLines> {
        let mut seen = 0u64;
        let mut end = None;
        for (_, path) in log_files(dir)? {
            let mut reader = io::BufReader::new(File::open(&path)?);
            let mut offset = 0u64;
            let mut line = Vec::new();
            loop {
                if seen == skip {
                    return Ok(ForwardLines { dir: dir.to_path_buf(), file: Some((path, offset)) });
                }
                line.clear();
                let read = reader.read_until(b'\n', &mut line)?;
                if read == 0 || line.last() != Some(&b'\n') {
                    break;
                }
                offset += read as u64;
                seen += 1;
            }
            end = Some((path, offset));
        }
        Ok(ForwardLines { dir: dir.to_path_buf(), file: end })
    }

    /// Positioned where [`ForwardLines::position`] said an earlier reader was (no pass at all).
    pub(super) fn resume(dir: &Path, position: Option<(PathBuf, u64)>) -> ForwardLines {
        ForwardLines { dir: dir.to_path_buf(), file: position }
    }

    /// The file being read and the byte offset of its next line (`None`: at the log's start).
    pub(super) fn position(&self) -> Option<(PathBuf, u64)> {
        self.file.clone()
    }

    /// Up to `max` (and at most `available`) whole lines, moving to the next daily file at the end
    /// of one.
    pub(super) fn next_lines(&mut self, available: u64, max: usize) -> io::Result<Vec<Vec<u8>>> {
        let wanted = (max as u64).min(available) as usize;
        let mut lines = Vec::new();
        while lines.len() < wanted {
            let files = log_files(&self.dir)?;
            let (path, offset) = match &self.file {
                Some(at) => at.clone(),
                None => match files.first() {
                    Some((_, first)) => (first.clone(), 0),
                    None => return Ok(lines),
                },
            };
            let mut file = File::open(&path)?;
            file.seek(SeekFrom::Start(offset))?;
            let mut reader = io::BufReader::new(file);
            let mut at = offset;
            let mut line = Vec::new();
            while lines.len() < wanted {
                line.clear();
                let read = reader.read_until(b'\n', &mut line)?;
                if read == 0 || line.last() != Some(&b'\n') {
                    break;
                }
                at += read as u64;
                lines.push(line[..line.len() - 1].to_vec());
            }
            self.file = Some((path.clone(), at));
            if lines.len() < wanted {
                // At this file's end: on to the next day's file, if there is one.
                match files.iter().position(|(_, p)| *p == path).and_then(|i| files.get(i + 1)) {
                    Some((_, next)) => self.file = Some((next.clone(), 0)),
                    None => break,
                }
            }
        }
        Ok(lines)
    }
}
