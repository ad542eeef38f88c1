//! Shell-style globs for operation criteria: `*` any run of characters
//! (none included), `?` exactly one character, everything else literal.
//! Names and keys are matched whole, character by character (not byte by
//! byte), so `?` stands for one character of a non-ASCII key too.

/// Whether `text` matches `pattern` as a whole.
///
/// The classic two-pointer match with one backtrack point: on a mismatch
/// the last `*` absorbs one more character. Linear in practice and never
/// worse than `pattern × text`: no recursion, no allocation for ASCII.
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut i, mut j) = (0usize, 0usize);
    // The last `*` seen and the text position it currently absorbs up to.
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        match p.get(i) {
            Some('*') => {
                star = Some((i, j));
                i += 1;
            }
            Some(&c) if c == '?' || Some(&c) == t.get(j) => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some((si, sj)) => {
                    i = si + 1;
                    j = sj + 1;
                    star = Some((si, sj + 1));
                }
                None => return false,
            },
        }
    }
    p.get(i..)
        .is_some_and(|rest| rest.iter().all(|&c| c == '*'))
}

/// Whether `pattern` has a wildcard (else it names one thing exactly).
pub fn is_literal(pattern: &str) -> bool {
    !pattern.contains(['*', '?'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wildcards() {
        for (p, t, want) in [
            ("payout", "payout", true),
            ("payout", "payouts", false),
            ("pay*", "payout", true),
            ("pay*", "pay", true),
            ("*out", "payout", true),
            ("*", "", true),
            ("", "", true),
            ("", "x", false),
            ("?", "", false),
            ("?", "é", true),
            ("u?", "u1", true),
            ("u?", "u12", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
            ("k-*-?", "k-12-3", true),
            ("**", "x", true),
        ] {
            assert_eq!(matches(p, t), want, "{p:?} on {t:?}");
        }
        assert!(is_literal("payout"));
        assert!(!is_literal("pay*"));
        assert!(!is_literal("u?"));
    }

    /// The reference: a pattern is a regular language; compare with a
    /// naive recursive matcher on small inputs.
    fn naive(p: &[char], t: &[char]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (None, Some(_)) => false,
            (Some('*'), _) => naive(&p[1..], t) || (!t.is_empty() && naive(p, &t[1..])),
            (Some(_), None) => false,
            (Some(&c), Some(&d)) => (c == '?' || c == d) && naive(&p[1..], &t[1..]),
        }
    }

    proptest! {
        #[test]
        fn agrees_with_the_naive_matcher(p in "[ab*?]{0,8}", t in "[ab]{0,10}") {
            let (pc, tc): (Vec<char>, Vec<char>) = (p.chars().collect(), t.chars().collect());
            prop_assert_eq!(matches(&p, &t), naive(&pc, &tc));
        }
    }
}
