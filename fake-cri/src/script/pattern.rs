//! Shell patterns (`case`, `${x%…}`, `${x#…}`, `${x/…/…}`): `*`, `?` and
//! `[…]` (with `!` or `^` negating, and ranges). Each pattern character says
//! whether it is active: quoted characters only match themselves.

/// A pattern character and whether it is special (unquoted).
pub(super) type PatChar = (char, bool);

/// Whether `pattern` matches all of `text`.
pub(super) fn matches(pattern: &[PatChar], text: &str) -> bool {
    let text: Vec<char> = text.chars().collect();
    match_at(pattern, &text)
}

/// Whether `pattern` matches all of `text` (as characters).
pub(super) fn match_at(pattern: &[PatChar], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it matched up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                ('*', true) => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                ('?', true) => {
                    p += 1;
                    t += 1;
                    continue;
                }
                ('[', true) => {
                    if let Some((matched, next)) = bracket(pattern, p, text[t]) {
                        if matched {
                            p = next;
                            t += 1;
                            continue;
                        }
                    } else if text[t] == '[' {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
                (c, _) if c == text[t] => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((star_p, star_t)) => {
                p = star_p + 1;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|c| *c == ('*', true))
}

/// A bracket expression at `pattern[start]` (`[`): whether `c` matches it and
/// the index after its `]`; `None` if it is not closed (then `[` is literal).
fn bracket(pattern: &[PatChar], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negated = matches!(pattern.get(i), Some(('!' | '^', true)));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let (pc, active) = *pattern.get(i)?;
        if pc == ']' && active && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        if let (Some(('-', _)), Some((hi, _))) = (pattern.get(i + 1), pattern.get(i + 2))
            && *hi != ']'
        {
            if pc <= c && c <= *hi {
                matched = true;
            }
            i += 3;
            continue;
        }
        if pc == c {
            matched = true;
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(text: &str) -> Vec<PatChar> {
        text.chars().map(|c| (c, true)).collect()
    }

    #[test]
    fn globs() {
        assert!(matches(&pat("a*"), "abc"));
        assert!(matches(&pat("*c"), "abc"));
        assert!(matches(&pat("a?c"), "abc"));
        assert!(!matches(&pat("a?c"), "ac"));
        assert!(matches(&pat("[a-c]x"), "bx"));
        assert!(matches(&pat("[!a-c]x"), "dx"));
        assert!(matches(&pat("*.txt"), "f.txt"));
        assert!(!matches(&[('*', false)], "abc"));
        assert!(matches(&pat("*"), ""));
    }
}
