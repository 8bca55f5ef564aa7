//! Reads one word of a script: quotes, backslashes, `$NAME`, `${…}`,
//! `$(…)`, `` `…` `` and `$((…))`, keeping which text was quoted (quoted text
//! is never split nor a pattern).

use super::ast::{List, Param, ParamOp, Part, Word};
use super::lex::{Lexer, is_meta};
use super::parse::{ParseError, parse_at};

/// Collects a word's parts, joining adjacent text of the same kind.
#[derive(Default)]
struct Parts {
    parts: Vec<Part>,
}

impl Parts {
    fn text(&mut self, c: char, quoted: bool) {
        match (self.parts.last_mut(), quoted) {
            (Some(Part::Quoted(text)), true) | (Some(Part::Literal(text)), false) => text.push(c),
            _ => self.parts.push(if quoted {
                Part::Quoted(c.to_string())
            } else {
                Part::Literal(c.to_string())
            }),
        }
    }

    fn quoted_empty(&mut self) {
        if !matches!(self.parts.last(), Some(Part::Quoted(_))) {
            self.parts.push(Part::Quoted(String::new()));
        }
    }

    fn push(&mut self, part: Part) {
        self.parts.push(part);
    }

    fn word(self) -> Word {
        Word(self.parts)
    }
}

impl Lexer {
    /// An unquoted word up to a blank or an operator, and whether any of it was quoted.
    pub(super) fn word(&mut self) -> Result<(Word, bool), ParseError> {
        let mut parts = Parts::default();
        let mut quoted = false;
        while let Some(c) = self.peek() {
            if is_meta(c) {
                break;
            }
            quoted |= self.unquoted_char(&mut parts, false)?;
        }
        Ok((parts.word(), quoted))
    }

    /// Reads one element of unquoted text (a character, a quoted string, an
    /// expansion) into `parts`; true if it was quoted. `in_param`: inside a
    /// `${…}` word, where `}` is read by the caller.
    fn unquoted_char(&mut self, parts: &mut Parts, in_param: bool) -> Result<bool, ParseError> {
        let (line, column) = (self.line, self.column);
        let Some(c) = self.peek() else {
            return Ok(false);
        };
        match c {
            '\'' => {
                self.bump();
                parts.quoted_empty();
                loop {
                    match self.bump() {
                        Some('\'') => break,
                        Some(c) => parts.text(c, true),
                        None => {
                            return Err(ParseError::new(
                                "unterminated quoted string",
                                line,
                                column,
                            ));
                        }
                    }
                }
                Ok(true)
            }
            '"' => {
                self.bump();
                let marker = parts.parts.len();
                parts.quoted_empty();
                self.double_quoted(parts, line, column)?;
                // The empty marker keeps `""` a field; with an expansion
                // inside, the expansion decides (`"$@"` of no parameters is none).
                if parts.parts.len() > marker + 1
                    && parts.parts.get(marker) == Some(&Part::Quoted(String::new()))
                {
                    parts.parts.remove(marker);
                }
                Ok(true)
            }
            '\\' => {
                self.bump();
                match self.bump() {
                    Some('\n') => Ok(false),
                    Some(c) => {
                        parts.text(c, true);
                        Ok(true)
                    }
                    None => {
                        parts.text('\\', false);
                        Ok(false)
                    }
                }
            }
            '$' => {
                self.dollar(parts, false)?;
                Ok(false)
            }
            '`' => {
                let list = self.backquote(false)?;
                parts.push(Part::Command(list, false));
                Ok(false)
            }
            _ => {
                let _ = in_param;
                self.bump();
                parts.text(c, false);
                Ok(false)
            }
        }
    }

    /// The inside of a `"…"` already opened, up to its closing quote.
    fn double_quoted(
        &mut self,
        parts: &mut Parts,
        line: usize,
        column: usize,
    ) -> Result<(), ParseError> {
        loop {
            match self.peek() {
                Some('"') => {
                    self.bump();
                    return Ok(());
                }
                Some('\\') => {
                    self.bump();
                    match self.bump() {
                        Some(c @ ('"' | '\\' | '$' | '`')) => parts.text(c, true),
                        Some('\n') => {}
                        Some(c) => {
                            parts.text('\\', true);
                            parts.text(c, true);
                        }
                        None => break,
                    }
                }
                Some('$') => self.dollar(parts, true)?,
                Some('`') => {
                    let list = self.backquote(true)?;
                    parts.push(Part::Command(list, true));
                }
                Some(c) => {
                    self.bump();
                    parts.text(c, true);
                }
                None => break,
            }
        }
        Err(ParseError::new("unterminated quoted string", line, column))
    }

    /// A here-document's body: expansions and `\$`, `` \` ``, `\\`, `\newline`.
    pub(super) fn heredoc_body(&mut self) -> Result<Word, ParseError> {
        let mut parts = Parts::default();
        parts.quoted_empty();
        while let Some(c) = self.peek() {
            match c {
                '\\' => {
                    self.bump();
                    match self.bump() {
                        Some(c @ ('\\' | '$' | '`')) => parts.text(c, true),
                        Some('\n') => {}
                        Some(c) => {
                            parts.text('\\', true);
                            parts.text(c, true);
                        }
                        None => parts.text('\\', true),
                    }
                }
                '$' => self.dollar(&mut parts, true)?,
                '`' => {
                    let list = self.backquote(true)?;
                    parts.push(Part::Command(list, true));
                }
                _ => {
                    self.bump();
                    parts.text(c, true);
                }
            }
        }
        Ok(parts.word())
    }

    /// An expansion at a `$` (or a literal `$`).
    fn dollar(&mut self, parts: &mut Parts, dq: bool) -> Result<(), ParseError> {
        let (line, column) = (self.line, self.column);
        self.bump(); // '$'
        match self.peek() {
            Some('{') => {
                self.bump();
                let param = self.braced(dq, line, column)?;
                parts.push(Part::Param(Box::new(param), dq));
            }
            Some('(') if self.peek_at(1) == Some('(') => {
                self.bump();
                self.bump();
                let word = self.arithmetic(line, column)?;
                parts.push(Part::Arith(word, dq));
            }
            Some('(') => {
                self.bump();
                let list = self.substitution(line, column)?;
                parts.push(Part::Command(list, dq));
            }
            Some(c) if c == '_' || c.is_ascii_alphabetic() => {
                let name = self.name();
                parts.push(plain(name, dq));
            }
            Some(c @ ('0'..='9' | '?' | '#' | '@' | '*' | '-' | '!' | '$')) => {
                if c == '$' || c == '!' {
                    return Err(ParseError::new(
                        format!("unsupported special parameter '${c}'"),
                        line,
                        column,
                    ));
                }
                self.bump();
                parts.push(plain(c.to_string(), dq));
            }
            // A lone `$` is literal, as in sh.
            _ => parts.text('$', dq),
        }
        Ok(())
    }

    fn name(&mut self) -> String {
        let mut name = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| *c == '_' || c.is_ascii_alphanumeric())
        {
            self.bump();
            name.push(c);
        }
        name
    }

    /// `${…}` after its `${`.
    fn braced(&mut self, dq: bool, line: usize, column: usize) -> Result<Param, ParseError> {
        let bad = |message: &str| ParseError::new(message, line, column);
        // `${#NAME}` is a length; `${#}` and `${#-…}` are the parameter `#`.
        let length = self.peek() == Some('#') && !matches!(self.peek_at(1), Some('}' | ':'));
        if length {
            self.bump();
        }
        let name = match self.peek() {
            Some(c) if c == '_' || c.is_ascii_alphabetic() => self.name(),
            Some(c) if c.is_ascii_digit() => {
                let mut digits = String::new();
                while let Some(d) = self.peek().filter(char::is_ascii_digit) {
                    self.bump();
                    digits.push(d);
                }
                digits
            }
            Some(c @ ('?' | '#' | '@' | '*' | '-')) => {
                self.bump();
                c.to_string()
            }
            _ => return Err(bad("bad substitution")),
        };
        if length {
            return match self.bump() {
                Some('}') => Ok(Param {
                    name,
                    op: ParamOp::Length,
                }),
                _ => Err(bad("bad substitution")),
            };
        }
        let Some(c) = self.bump() else {
            return Err(bad("missing '}'"));
        };
        let op = match c {
            '}' => {
                return Ok(Param {
                    name,
                    op: ParamOp::Plain,
                });
            }
            ':' => match self.peek() {
                Some(c @ ('-' | '=' | '?' | '+')) => {
                    self.bump();
                    let word = self.param_word(&['}'], line, column)?.0;
                    conditional(c, true, word)
                }
                _ => {
                    let (offset, end) = self.param_word(&[':', '}'], line, column)?;
                    let length = if end == ':' {
                        Some(self.param_word(&['}'], line, column)?.0)
                    } else {
                        None
                    };
                    ParamOp::Substring(offset, length)
                }
            },
            '-' | '=' | '?' | '+' => {
                let word = self.param_word(&['}'], line, column)?.0;
                conditional(c, false, word)
            }
            '%' | '#' => {
                let longest = self.peek() == Some(c);
                if longest {
                    self.bump();
                }
                let word = self.param_word(&['}'], line, column)?.0;
                if c == '%' {
                    ParamOp::TrimSuffix(longest, word)
                } else {
                    ParamOp::TrimPrefix(longest, word)
                }
            }
            '/' => {
                let all = self.peek() == Some('/');
                if all {
                    self.bump();
                }
                let (pattern, end) = self.param_word(&['/', '}'], line, column)?;
                let with = if end == '/' {
                    self.param_word(&['}'], line, column)?.0
                } else {
                    Word::default()
                };
                ParamOp::Replace(all, pattern, with)
            }
            _ => return Err(bad("bad substitution")),
        };
        let _ = dq;
        Ok(Param { name, op })
    }

    /// The word of a `${NAME OP WORD}`, up to one of `ends` outside quotes
    /// and nested braces; returns it and the end read.
    fn param_word(
        &mut self,
        ends: &[char],
        line: usize,
        column: usize,
    ) -> Result<(Word, char), ParseError> {
        let mut parts = Parts::default();
        loop {
            match self.peek() {
                None => return Err(ParseError::new("missing '}'", line, column)),
                Some(c) if ends.contains(&c) => {
                    self.bump();
                    return Ok((parts.word(), c));
                }
                Some(_) => {
                    self.unquoted_char(&mut parts, true)?;
                }
            }
        }
    }

    /// `$((…))` after its `$((`: the text up to the matching `))`, read as
    /// double-quoted text (its expansions are done before it is evaluated).
    fn arithmetic(&mut self, line: usize, column: usize) -> Result<Word, ParseError> {
        let (inner_line, inner_column) = (self.line, self.column);
        let start = self.pos;
        let mut depth = 0usize;
        loop {
            match self.bump() {
                None => {
                    return Err(ParseError::new(
                        "unterminated '$((' (no matching '))')",
                        line,
                        column,
                    ));
                }
                Some('(') => depth += 1,
                Some(')') if depth > 0 => depth -= 1,
                Some(')') if self.peek() == Some(')') => {
                    self.bump();
                    break;
                }
                Some(')') => {
                    return Err(ParseError::new(
                        "unterminated '$((' (no matching '))')",
                        line,
                        column,
                    ));
                }
                Some(_) => {}
            }
        }
        let text: String = self.chars[start..self.pos - 2].iter().collect();
        Lexer::new(&text, inner_line, inner_column).heredoc_body()
    }

    /// Reads a command substitution after its `$(`: the text up to the
    /// matching `)`, parsed as a script with the whole script's positions.
    fn substitution(&mut self, line: usize, column: usize) -> Result<List, ParseError> {
        let (inner_line, inner_column) = (self.line, self.column);
        let start = self.pos;
        if !self.skip_substitution() {
            return Err(ParseError::new(
                "unterminated '$(' (no matching ')')",
                line,
                column,
            ));
        }
        // The cursor is past the closing `)`.
        let inner: String = self.chars[start..self.pos - 1].iter().collect();
        parse_at(&inner, inner_line, inner_column)
    }

    /// `` `…` ``: the text up to the closing backquote, with `\$`, `` \` ``
    /// and `\\` (and `\"` inside double quotes) unescaped, parsed as a script.
    fn backquote(&mut self, dq: bool) -> Result<List, ParseError> {
        let (line, column) = (self.line, self.column);
        self.bump(); // '`'
        let (inner_line, inner_column) = (self.line, self.column);
        let mut inner = String::new();
        loop {
            match self.bump() {
                None => {
                    return Err(ParseError::new(
                        "unterminated '`' (no closing backquote)",
                        line,
                        column,
                    ));
                }
                Some('`') => break,
                Some('\\') => match self.peek() {
                    Some(c @ ('$' | '`' | '\\')) => {
                        self.bump();
                        inner.push(c);
                    }
                    Some('"') if dq => {
                        self.bump();
                        inner.push('"');
                    }
                    _ => inner.push('\\'),
                },
                Some(c) => inner.push(c),
            }
        }
        parse_at(&inner, inner_line, inner_column)
    }

    /// Moves past the `)` that closes a `$(` already read, respecting
    /// quotes, escapes, comments and nested parentheses; false at the end of
    /// the script. Only finds the end: the text is lexed again as a script.
    fn skip_substitution(&mut self) -> bool {
        let mut depth = 1usize;
        let mut word_start = true;
        while let Some(c) = self.bump() {
            match c {
                '\\' => {
                    self.bump();
                }
                '\'' => loop {
                    match self.bump() {
                        Some('\'') => break,
                        Some(_) => {}
                        None => return false,
                    }
                },
                // The guard moves past the string; a closed one needs nothing more.
                '"' if !self.skip_double_quoted() => return false,
                '#' if word_start => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return true;
                    }
                }
                _ => {}
            }
            word_start = matches!(c, ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')');
        }
        false
    }

    /// Moves past the `"` closing a double-quoted string already opened,
    /// and past any `$(…)` inside it; false at the end of the script.
    fn skip_double_quoted(&mut self) -> bool {
        while let Some(c) = self.bump() {
            match c {
                '"' => return true,
                '\\' => {
                    self.bump();
                }
                '$' if self.peek() == Some('(') => {
                    self.bump();
                    if !self.skip_substitution() {
                        return false;
                    }
                }
                _ => {}
            }
        }
        false
    }
}

fn plain(name: String, dq: bool) -> Part {
    Part::Param(
        Box::new(Param {
            name,
            op: ParamOp::Plain,
        }),
        dq,
    )
}

fn conditional(op: char, colon: bool, word: Word) -> ParamOp {
    match op {
        '-' => ParamOp::Default(colon, word),
        '=' => ParamOp::Assign(colon, word),
        '?' => ParamOp::Error(colon, word),
        _ => ParamOp::Alternative(colon, word),
    }
}
