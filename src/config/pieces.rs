//! Reading a large file in pieces. The toml crate turns a whole document
//! into tokens and parser events before it deserializes anything, about
//! 2.7 KiB per `[[task]]` section while it runs: a million tasks peaked at
//! 2.8 GB to keep 0.55 GB. A file with many tasks is read as pieces cut
//! before every [`PIECE_TASKS`]-th `[[task]]` header line; the pieces after
//! the first may hold nothing but `[[task]]` sections.
//!
//! Whenever the pieces do not read cleanly — a cut inside a multi-line
//! string, another section after the tasks, any error — the whole file is
//! read as one document instead, so a file means what it always meant and
//! every error is the one the whole file gives.

use serde::Deserialize;
use toml::Spanned;

use super::task::TaskFile;
use super::File;

/// `[[task]]` sections per piece: the parser's temporaries stay a few tens
/// of MB whatever the file's size.
pub(super) const PIECE_TASKS: usize = 10_000;

/// A piece after the first: `[[task]]` sections only.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tasks {
    #[serde(default)]
    task: Vec<Spanned<TaskFile>>,
}

/// Where a piece's tasks are: the spans of a piece's values count from the
/// piece's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Piece {
    /// Index of the piece's first task in the file's tasks.
    pub first: usize,
    /// Byte offset of the piece in the file.
    pub offset: usize,
}

/// The file, and the pieces after the first (none when it was read whole).
pub(super) fn read(text: &str, per_piece: usize) -> Result<(File, Vec<Piece>), toml::de::Error> {
    let cuts = cuts(text, per_piece);
    if let Some(read) = read_pieces(text, &cuts) {
        return Ok(read);
    }
    Ok((toml::from_str(text)?, Vec::new()))
}

/// The file read piece by piece; `None` when there is only one piece or any
/// piece does not read.
fn read_pieces(text: &str, cuts: &[usize]) -> Option<(File, Vec<Piece>)> {
    let first_cut = *cuts.first()?;
    let mut file: File = toml::from_str(text.get(..first_cut)?).ok()?;
    let mut pieces = Vec::with_capacity(cuts.len());
    for (i, &start) in cuts.iter().enumerate() {
        let end = cuts.get(i + 1).copied().unwrap_or(text.len());
        let piece: Tasks = toml::from_str(text.get(start..end)?).ok()?;
        pieces.push(Piece {
            first: file.task.len(),
            offset: start,
        });
        file.task.extend(piece.task);
    }
    Some((file, pieces))
}

/// Byte offsets of the `[[task]]` header lines that start a piece: every
/// `per_piece`-th after the first.
fn cuts(text: &str, per_piece: usize) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut headers = 0usize;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim() == "[[task]]" {
            if headers > 0 && headers % per_piece.max(1) == 0 {
                cuts.push(offset);
            }
            headers += 1;
        }
        offset += line.len();
    }
    cuts
}

/// The byte offset of the piece task `index` was read from (0 for a task
/// of the first piece).
pub(super) fn offset_of(pieces: &[Piece], index: usize) -> usize {
    let after = pieces.partition_point(|p| p.first <= index);
    after
        .checked_sub(1)
        .and_then(|i| pieces.get(i))
        .map_or(0, |p| p.offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_before_every_nth_task_header() {
        let text = "[[pool]]\nname = \"p\"\n\n[[task]]\nid = \"a\"\n  [[task]]  \r\nid = \"b\"\n[[task]]\nid = \"c\"\n";
        let cuts = cuts(text, 1);
        assert_eq!(cuts.len(), 2);
        for cut in &cuts {
            assert!(text[*cut..].trim_start().starts_with("[[task]]"));
        }
        assert_eq!(super::cuts(text, 2).len(), 1);
        assert!(super::cuts(text, 3).is_empty());
    }

    #[test]
    fn a_task_is_found_in_its_piece() {
        let pieces = [
            Piece {
                first: 2,
                offset: 100,
            },
            Piece {
                first: 4,
                offset: 200,
            },
        ];
        assert_eq!(offset_of(&pieces, 0), 0);
        assert_eq!(offset_of(&pieces, 1), 0);
        assert_eq!(offset_of(&pieces, 2), 100);
        assert_eq!(offset_of(&pieces, 3), 100);
        assert_eq!(offset_of(&pieces, 4), 200);
        assert_eq!(offset_of(&pieces, 9), 200);
        assert_eq!(offset_of(&[], 9), 0);
    }
}
