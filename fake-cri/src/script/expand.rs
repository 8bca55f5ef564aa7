//! Word expansion: parameters (every POSIX `${…}` form and ash's `${x/p/r}`
//! and `${x:o:l}`), command substitution, arithmetic, then field splitting
//! of what was unquoted (by `IFS`). There is no pathname expansion: `*` in
//! an argument stays as written.

use std::future::Future;
use std::pin::Pin;

use super::arith::{self, Vars};
use super::ast::{Param, ParamOp, Part, Word};
use super::pattern::{PatChar, match_at};
use super::shell::{Shell, Stream};
use super::signals::Stop;

/// A piece of an expanded word.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    /// Unquoted text as written: not split, a pattern's characters active.
    Literal(String),
    /// Quoted text: neither split nor a pattern.
    Quoted(String),
    /// The unquoted result of an expansion: split, a pattern's characters active.
    Split(String),
    /// A boundary between fields (between the parameters of `"$@"`).
    Break,
}

type Pieces<'s> = Pin<Box<dyn Future<Output = Result<Vec<Piece>, Stop>> + Send + 's>>;

/// The shell's variables for an arithmetic expression.
struct ArithVars<'s, 'a>(&'s mut Shell<'a>);

impl Vars for ArithVars<'_, '_> {
    fn get(&self, name: &str) -> Option<String> {
        self.0.lookup(name).map(str::to_owned)
    }
    fn set(&mut self, name: &str, value: i64) {
        self.0.assign(name, value.to_string());
    }
}

impl Shell<'_> {
    /// Expands a word into one string (no field splitting): assignments,
    /// redirection targets, `case` words, here-documents.
    pub(super) async fn expand(&mut self, word: &Word) -> Result<String, Stop> {
        let pieces = self.pieces(word, false).await?;
        Ok(join(&pieces))
    }

    /// Expands a word into fields, as arguments are.
    pub(super) async fn expand_fields(&mut self, word: &Word) -> Result<Vec<String>, Stop> {
        let pieces = self.pieces(word, false).await?;
        let ifs = self.lookup("IFS").unwrap_or(" \t\n").to_owned();
        Ok(split(&pieces, &ifs))
    }

    /// Expands a word into a pattern.
    pub(super) async fn expand_pattern(&mut self, word: &Word) -> Result<Vec<PatChar>, Stop> {
        let pieces = self.pieces(word, false).await?;
        Ok(pattern(&pieces))
    }

    /// Expands a word's parts; `dq`: the word is inside double quotes.
    fn pieces<'s>(&'s mut self, word: &'s Word, dq: bool) -> Pieces<'s> {
        Box::pin(async move {
            let mut out = Vec::new();
            for (index, part) in word.0.iter().enumerate() {
                match part {
                    Part::Literal(text) if dq => out.push(Piece::Quoted(text.clone())),
                    // Tilde expansion: `~` and `~/…` at the start of a word are $HOME.
                    Part::Literal(text)
                        if index == 0
                            && ((text == "~" && word.0.len() == 1) || text.starts_with("~/")) =>
                    {
                        let home = self.lookup("HOME").unwrap_or_default().to_owned();
                        out.push(Piece::Quoted(home));
                        out.push(Piece::Literal(text[1..].to_owned()));
                    }
                    Part::Literal(text) => out.push(Piece::Literal(text.clone())),
                    Part::Quoted(text) => out.push(Piece::Quoted(text.clone())),
                    Part::Command(list, quoted) => {
                        let text = self.substitute(list).await?;
                        out.push(result(text, *quoted || dq));
                    }
                    Part::Arith(expr, quoted) => {
                        let text = self.expand(expr).await?;
                        let value = match arith::evaluate(&text, &mut ArithVars(self)) {
                            Ok(value) => value,
                            Err(error) => return Err(self.fatal(&error.to_string())),
                        };
                        out.push(result(value.to_string(), *quoted || dq));
                    }
                    Part::Param(param, quoted) => {
                        out.extend(self.param(param, *quoted || dq).await?);
                    }
                }
            }
            Ok(out)
        })
    }

    /// An error that ends a non-interactive shell (busybox's message, exit 2).
    pub(super) fn fatal(&mut self, message: &str) -> Stop {
        self.emit(Stream::Stderr, &format!("sh: {message}\n"));
        Stop::Exit(2)
    }

    /// A parameter's value: `None` when unset.
    fn value(&self, name: &str) -> Option<String> {
        match name {
            "?" => Some(self.status.to_string()),
            "#" => Some((self.args.len() - 1).to_string()),
            "-" => Some(self.flags()),
            "@" | "*" => Some(self.args[1..].join(" ")),
            _ => self.lookup(name).map(str::to_owned),
        }
    }

    /// `$-`: the options set, in ash's order (`c` for a `-c` script, `s`
    /// for one reading standard input).
    fn flags(&self) -> String {
        let mut flags = String::new();
        if self.nounset {
            flags.push('u');
        }
        flags.push(if self.ash { 'c' } else { 's' });
        if self.errexit {
            flags.push('e');
        }
        flags
    }

    async fn param(&mut self, param: &Param, dq: bool) -> Result<Vec<Piece>, Stop> {
        let name = param.name.as_str();
        let value = self.value(name);
        let set = value.is_some() && !(matches!(name, "@" | "*") && self.args.len() == 1);
        let null = value.as_deref().is_none_or(str::is_empty);
        let unset_error = |shell: &mut Self| shell.fatal(&format!("{name}: parameter not set"));
        match &param.op {
            ParamOp::Plain => {
                if !set && self.nounset && !matches!(name, "@" | "*") {
                    return Err(unset_error(self));
                }
                if matches!(name, "@" | "*") {
                    return Ok(self.positional(name, dq));
                }
                Ok(vec![result(value.unwrap_or_default(), dq)])
            }
            ParamOp::Length => {
                if !set && self.nounset && !matches!(name, "@" | "*") {
                    return Err(unset_error(self));
                }
                let length = if matches!(name, "@" | "*") {
                    self.args.len() - 1
                } else {
                    value.unwrap_or_default().chars().count()
                };
                Ok(vec![result(length.to_string(), dq)])
            }
            ParamOp::Default(colon, word) | ParamOp::Assign(colon, word) => {
                let missing = !set || (*colon && null);
                if !missing {
                    return Ok(self.plain_value(name, value, dq));
                }
                let pieces = self.pieces(word, dq).await?;
                if matches!(param.op, ParamOp::Assign(..)) {
                    let text = join(&pieces);
                    if name.parse::<usize>().is_ok() || !super::env::is_name(name) {
                        return Err(self.fatal(&format!("{name}: bad variable name")));
                    }
                    self.assign(name, text.clone());
                    return Ok(vec![result(text, dq)]);
                }
                Ok(unquoted_split(pieces))
            }
            ParamOp::Alternative(colon, word) => {
                let missing = !set || (*colon && null);
                if missing {
                    return Ok(Vec::new());
                }
                let pieces = self.pieces(word, dq).await?;
                Ok(unquoted_split(pieces))
            }
            ParamOp::Error(colon, word) => {
                let missing = !set || (*colon && null);
                if !missing {
                    return Ok(self.plain_value(name, value, dq));
                }
                let message = self.expand(word).await?;
                let message = if message.is_empty() {
                    if *colon {
                        "parameter not set or null".to_owned()
                    } else {
                        "parameter not set".to_owned()
                    }
                } else {
                    message
                };
                Err(self.fatal(&format!("{name}: {message}")))
            }
            ParamOp::TrimSuffix(longest, word) | ParamOp::TrimPrefix(longest, word) => {
                if !set && self.nounset {
                    return Err(unset_error(self));
                }
                let pat = self.expand_pattern(word).await?;
                let text: Vec<char> = value.unwrap_or_default().chars().collect();
                let suffix = matches!(param.op, ParamOp::TrimSuffix(..));
                Ok(vec![result(trim(&text, &pat, suffix, *longest), dq)])
            }
            ParamOp::Replace(all, from, to) => {
                let pat = self.expand_pattern(from).await?;
                let with = self.expand(to).await?;
                let text: Vec<char> = value.unwrap_or_default().chars().collect();
                Ok(vec![result(replace(&text, &pat, &with, *all), dq)])
            }
            ParamOp::Substring(offset, length) => {
                let text: Vec<char> = value.unwrap_or_default().chars().collect();
                let offset = self.arith_word(offset).await?;
                let len = text.len() as i64;
                let start = if offset < 0 {
                    (len + offset).max(0)
                } else {
                    offset.min(len)
                };
                let end = match length {
                    None => len,
                    Some(word) => {
                        let length = self.arith_word(word).await?;
                        if length < 0 {
                            (len + length).max(start)
                        } else {
                            (start + length).min(len)
                        }
                    }
                };
                let slice: String = text[start as usize..end.max(start) as usize]
                    .iter()
                    .collect();
                Ok(vec![result(slice, dq)])
            }
        }
    }

    /// The value of a set parameter as `$NAME` gives it.
    fn plain_value(&self, name: &str, value: Option<String>, dq: bool) -> Vec<Piece> {
        if matches!(name, "@" | "*") {
            return self.positional(name, dq);
        }
        vec![result(value.unwrap_or_default(), dq)]
    }

    /// A word evaluated as an arithmetic expression (`${x:OFFSET:LENGTH}`).
    async fn arith_word(&mut self, word: &Word) -> Result<i64, Stop> {
        let text = self.expand(word).await?;
        match arith::evaluate(&text, &mut ArithVars(self)) {
            Ok(value) => Ok(value),
            Err(error) => Err(self.fatal(&error.to_string())),
        }
    }

    /// `$@`, `$*`, `"$@"` (one field per parameter), `"$*"` (joined by IFS's first character).
    fn positional(&self, name: &str, dq: bool) -> Vec<Piece> {
        let args = &self.args[1..];
        if dq && name == "*" {
            let sep = self
                .lookup("IFS")
                .map_or(" ".to_owned(), |ifs| ifs.chars().take(1).collect());
            return vec![Piece::Quoted(args.join(&sep))];
        }
        let mut pieces = Vec::new();
        for (index, arg) in args.iter().enumerate() {
            if index > 0 {
                pieces.push(Piece::Break);
            }
            pieces.push(if dq {
                Piece::Quoted(arg.clone())
            } else {
                Piece::Split(arg.clone())
            });
        }
        pieces
    }
}

/// An expansion's result: quoted inside double quotes, else split.
fn result(text: String, dq: bool) -> Piece {
    if dq {
        Piece::Quoted(text)
    } else {
        Piece::Split(text)
    }
}

/// An unquoted `${x:-WORD}`'s word: its unquoted text is split too.
fn unquoted_split(pieces: Vec<Piece>) -> Vec<Piece> {
    pieces
        .into_iter()
        .map(|piece| match piece {
            Piece::Literal(text) => Piece::Split(text),
            other => other,
        })
        .collect()
}

fn join(pieces: &[Piece]) -> String {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Literal(text) | Piece::Quoted(text) | Piece::Split(text) => out.push_str(text),
            Piece::Break => out.push(' '),
        }
    }
    out
}

fn pattern(pieces: &[Piece]) -> Vec<PatChar> {
    let mut out = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Literal(text) | Piece::Split(text) => {
                out.extend(text.chars().map(|c| (c, true)));
            }
            Piece::Quoted(text) => out.extend(text.chars().map(|c| (c, false))),
            Piece::Break => out.push((' ', false)),
        }
    }
    out
}

/// Field splitting: unquoted expansion results are split at `IFS`
/// characters (runs of IFS white space are one separator, and leading or
/// trailing white space none); a word with quoted text is a field even if empty.
fn split(pieces: &[Piece], ifs: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut current = String::new();
    let mut exists = false;
    // Whether the field was just ended by white space (a following
    // non-white separator belongs to the same separator).
    let mut after_white = false;
    for piece in pieces {
        match piece {
            Piece::Literal(text) => {
                if !text.is_empty() {
                    current.push_str(text);
                    exists = true;
                    after_white = false;
                }
            }
            Piece::Quoted(text) => {
                current.push_str(text);
                exists = true;
                after_white = false;
            }
            Piece::Break => {
                if exists {
                    fields.push(std::mem::take(&mut current));
                }
                exists = false;
                after_white = false;
            }
            Piece::Split(text) => {
                for c in text.chars() {
                    if !ifs.contains(c) {
                        current.push(c);
                        exists = true;
                        after_white = false;
                    } else if c.is_whitespace() {
                        if exists {
                            fields.push(std::mem::take(&mut current));
                            exists = false;
                            after_white = true;
                        }
                    } else {
                        if exists || !after_white {
                            fields.push(std::mem::take(&mut current));
                        }
                        exists = false;
                        after_white = false;
                    }
                }
            }
        }
    }
    if exists {
        fields.push(current);
    }
    fields
}

/// `${x%p}`, `${x%%p}`, `${x#p}`, `${x##p}`.
fn trim(text: &[char], pattern: &[PatChar], suffix: bool, longest: bool) -> String {
    let n = text.len();
    let lengths: Box<dyn Iterator<Item = usize>> = if longest {
        Box::new((0..=n).rev())
    } else {
        Box::new(0..=n)
    };
    for len in lengths {
        let (kept, cut) = if suffix {
            (&text[..n - len], &text[n - len..])
        } else {
            (&text[len..], &text[..len])
        };
        if match_at(pattern, cut) {
            return kept.iter().collect();
        }
    }
    text.iter().collect()
}

/// `${x/p/r}` (the first, longest match) and `${x//p/r}` (every match).
fn replace(text: &[char], pattern: &[PatChar], with: &str, all: bool) -> String {
    let mut out = String::new();
    let mut i = 0;
    let mut replaced = false;
    while i <= text.len() {
        let found = if replaced && !all {
            None
        } else {
            (i + 1..=text.len())
                .rev()
                .find(|end| match_at(pattern, &text[i..*end]))
        };
        match found {
            Some(end) => {
                out.push_str(with);
                i = end;
                replaced = true;
            }
            None => {
                if let Some(c) = text.get(i) {
                    out.push(*c);
                }
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_fields() {
        let s = |text: &str| split(&[Piece::Split(text.to_owned())], " \t\n");
        assert_eq!(s("  a  b "), ["a", "b"]);
        assert_eq!(s(""), Vec::<String>::new());
        assert_eq!(split(&[Piece::Split("a::b".into())], ":"), ["a", "", "b"]);
        assert_eq!(split(&[Piece::Split("a : b".into())], " :"), ["a", "b"]);
        assert_eq!(split(&[Piece::Quoted(String::new())], " "), [""]);
    }
}
