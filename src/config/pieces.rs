//! Reading a large file in pieces. The toml crate turns a whole document
//! into tokens and parser events before it deserializes anything, about
//! 2.7 KiB per `[[task]]` section while it runs, and the sections read are
//! several times what a validated task keeps: a million tasks peaked at
//! 2.8 GB to keep 0.55 GB. A file with many tasks is read as pieces cut
//! before every [`PIECE_TASKS`]-th `[[task]]` header line, each validated
//! and dropped before the next is read (`parse_in_pieces` in `mod.rs`); the
//! pieces after the first may hold nothing but `[[task]]` sections.

use serde::Deserialize;
use toml::Spanned;

use super::task::TaskFile;

/// `[[task]]` sections per piece: the parser's temporaries stay a few MB
/// whatever the file's size (freed, they stay resident until the allocator
/// gives them back: at 10,000 per piece a million tasks settled ~40 B per
/// task higher).
pub(super) const PIECE_TASKS: usize = 1_000;

/// A piece after the first: `[[task]]` sections only.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tasks {
    #[serde(default)]
    task: Vec<Spanned<TaskFile>>,
}

/// The tasks of a piece after the first; `None` when it does not read
/// alone.
pub(super) fn tasks(piece: &str) -> Option<Vec<Spanned<TaskFile>>> {
    toml::from_str::<Tasks>(piece).ok().map(|t| t.task)
}

/// Byte offsets of the `[[task]]` header lines that start a piece (every
/// `per_piece`-th after the first), and how many such lines the text has:
/// what the task list reserves before it is filled.
pub(super) fn cuts(text: &str, per_piece: usize) -> (Vec<usize>, usize) {
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
    (cuts, headers)
}

/// Whether every piece of `text`, `per_piece` tasks each, reads alone:
/// the tests' check that a case takes the piece path as far as validation.
#[cfg(test)]
pub(super) fn read_alone(text: &str, per_piece: usize) -> bool {
    let (cuts, _) = cuts(text, per_piece);
    let Some(&first) = cuts.first() else {
        return false;
    };
    toml::from_str::<super::File>(&text[..first]).is_ok()
        && cuts.iter().enumerate().all(|(i, &start)| {
            let end = cuts.get(i + 1).copied().unwrap_or(text.len());
            tasks(&text[start..end]).is_some()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_before_every_nth_task_header() {
        let text = "[[pool]]\nname = \"p\"\n\n[[task]]\nid = \"a\"\n  [[task]]  \r\nid = \"b\"\n[[task]]\nid = \"c\"\n";
        let (cuts, _) = cuts(text, 1);
        assert_eq!(cuts.len(), 2);
        for cut in &cuts {
            assert!(text[*cut..].trim_start().starts_with("[[task]]"));
        }
        assert_eq!(super::cuts(text, 2).0.len(), 1);
        assert!(super::cuts(text, 3).0.is_empty());
    }
}
