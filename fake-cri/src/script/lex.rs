//! Splits a script into words and operators.

use super::ast::{Part, Word};
use super::parse::{ParseError, parse_at};

/// A token and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Token {
    pub kind: TokenKind,
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum TokenKind {
    /// A word, and whether any part of it was quoted (quoted words are never keywords).
    Word(Word, bool),
    /// `;` or a newline.
    Separator,
    And,
    Or,
    /// `>`, `>>`, `N>`, `N>>`: the descriptor and whether it appends.
    RedirectOut(u8, bool),
    /// `>&M`, `N>&M`.
    RedirectFd(u8, u8),
}

/// Splits `script`, which starts at `line`:`column` of the whole script
/// (1:1 unless it is the text of a `$(…)`), so positions are the whole script's.
pub(super) fn tokenize(script: &str, line: usize, column: usize) -> Result<Vec<Token>, ParseError> {
    Lexer {
        chars: script.chars().collect(),
        pos: 0,
        line,
        column,
        tokens: Vec::new(),
    }
    .run()
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    column: usize,
    tokens: Vec<Token>,
}

impl Lexer {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.pos).copied()?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError::new(message, self.line, self.column)
    }

    fn push(&mut self, kind: TokenKind, line: usize, column: usize) {
        self.tokens.push(Token { kind, line, column });
    }

    fn run(mut self) -> Result<Vec<Token>, ParseError> {
        while let Some(c) = self.peek() {
            let (line, column) = (self.line, self.column);
            match c {
                ' ' | '\t' | '\r' => {
                    self.bump();
                }
                '\\' if self.peek_at(1) == Some('\n') => {
                    self.bump();
                    self.bump();
                }
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                '\n' | ';' => {
                    self.bump();
                    if c == ';' && self.peek() == Some(';') {
                        return Err(self.error(
                            "unsupported syntax ';;' (case statements are not interpreted)",
                        ));
                    }
                    self.push(TokenKind::Separator, line, column);
                }
                '&' => {
                    self.bump();
                    if self.peek() == Some('&') {
                        self.bump();
                        self.push(TokenKind::And, line, column);
                    } else {
                        return Err(ParseError::new(
                            "unsupported syntax '&' (background jobs are not interpreted)",
                            line,
                            column,
                        ));
                    }
                }
                '|' => {
                    self.bump();
                    if self.peek() == Some('|') {
                        self.bump();
                        self.push(TokenKind::Or, line, column);
                    } else {
                        return Err(ParseError::new(
                            "unsupported syntax '|' (pipelines are not interpreted)",
                            line,
                            column,
                        ));
                    }
                }
                '(' | ')' => {
                    return Err(self.error(format!(
                        "unsupported syntax '{c}' (subshells and functions are not interpreted)"
                    )));
                }
                '<' => {
                    return Err(
                        self.error("unsupported syntax '<' (input redirection is not interpreted)")
                    );
                }
                '>' => self.redirect(1, line, column)?,
                '1' | '2' if self.peek_at(1) == Some('>') && self.at_word_start() => {
                    self.bump();
                    self.redirect(if c == '1' { 1 } else { 2 }, line, column)?;
                }
                _ => self.word(line, column)?,
            }
        }
        Ok(self.tokens)
    }

    /// Whether the character before the cursor ends a token (so `2>` is a
    /// redirection and `a2>` is the word `a2` followed by `>`).
    fn at_word_start(&self) -> bool {
        self.pos == 0
            || matches!(
                self.chars[self.pos - 1],
                ' ' | '\t' | '\n' | ';' | '&' | '|' | '\r'
            )
    }

    fn redirect(&mut self, fd: u8, line: usize, column: usize) -> Result<(), ParseError> {
        self.bump(); // '>'
        match self.peek() {
            Some('>') => {
                self.bump();
                self.push(TokenKind::RedirectOut(fd, true), line, column);
            }
            Some('&') => {
                self.bump();
                match self.bump() {
                    Some(target @ ('1' | '2')) => {
                        let target = if target == '1' { 1 } else { 2 };
                        self.push(TokenKind::RedirectFd(fd, target), line, column);
                    }
                    _ => return Err(self.error("expected 1 or 2 after '>&'")),
                }
            }
            _ => self.push(TokenKind::RedirectOut(fd, false), line, column),
        }
        Ok(())
    }

    fn word(&mut self, line: usize, column: usize) -> Result<(), ParseError> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut quoted = false;
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' => break,
                '\'' => {
                    quoted = true;
                    self.bump();
                    loop {
                        match self.bump() {
                            Some('\'') => break,
                            Some(c) => text.push(c),
                            None => {
                                return Err(ParseError::new(
                                    "unterminated single quote",
                                    line,
                                    column,
                                ));
                            }
                        }
                    }
                }
                '"' => {
                    quoted = true;
                    self.bump();
                    loop {
                        match self.peek() {
                            Some('"') => {
                                self.bump();
                                break;
                            }
                            Some('\\') => {
                                self.bump();
                                match self.bump() {
                                    Some(c @ ('"' | '\\' | '$' | '`')) => text.push(c),
                                    Some('\n') => {}
                                    Some(c) => {
                                        text.push('\\');
                                        text.push(c);
                                    }
                                    None => break,
                                }
                            }
                            Some('$') => self.dollar(&mut parts, &mut text)?,
                            Some('`') => return Err(self.backtick()),
                            Some(c) => {
                                self.bump();
                                text.push(c);
                            }
                            None => {
                                return Err(ParseError::new(
                                    "unterminated double quote",
                                    line,
                                    column,
                                ));
                            }
                        }
                    }
                }
                '\\' => {
                    self.bump();
                    match self.bump() {
                        Some('\n') | None => {}
                        Some(c) => text.push(c),
                    }
                }
                '$' => self.dollar(&mut parts, &mut text)?,
                '`' => return Err(self.backtick()),
                _ => {
                    self.bump();
                    text.push(c);
                }
            }
        }
        if !text.is_empty() || parts.is_empty() {
            parts.push(Part::Literal(text));
        }
        self.push(TokenKind::Word(Word(parts), quoted), line, column);
        Ok(())
    }

    fn backtick(&self) -> ParseError {
        self.error(
            "unsupported syntax '`' (backquoted command substitution is not interpreted: write $(…))",
        )
    }

    /// Reads a command substitution after its `$(`: the text up to the
    /// matching `)`, parsed as a script with the whole script's positions.
    fn substitution(&mut self, line: usize, column: usize) -> Result<Part, ParseError> {
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
        Ok(Part::Command(parse_at(&inner, inner_line, inner_column)?))
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

    /// Reads `$NAME`, `${NAME}`, `$1`, `$?` at the cursor.
    fn dollar(&mut self, parts: &mut Vec<Part>, text: &mut String) -> Result<(), ParseError> {
        let (line, column) = (self.line, self.column);
        self.bump(); // '$'
        let flush = |parts: &mut Vec<Part>, text: &mut String, part| {
            if !text.is_empty() {
                parts.push(Part::Literal(std::mem::take(text)));
            }
            parts.push(part);
        };
        match self.peek() {
            Some('?') => {
                self.bump();
                flush(parts, text, Part::Status);
            }
            Some(c) if c.is_ascii_digit() => {
                self.bump();
                flush(parts, text, Part::Var(c.to_string()));
            }
            Some('{') => {
                self.bump();
                let mut name = String::new();
                loop {
                    match self.bump() {
                        Some('}') => break,
                        Some(c) if c == '_' || c.is_ascii_alphanumeric() => name.push(c),
                        _ => {
                            return Err(ParseError::new(
                                "unsupported parameter expansion: only ${NAME} is interpreted",
                                line,
                                column,
                            ));
                        }
                    }
                }
                if name.is_empty() {
                    return Err(ParseError::new("empty parameter name in ${}", line, column));
                }
                flush(parts, text, Part::Var(name));
            }
            Some('(') if self.peek_at(1) == Some('(') => {
                return Err(ParseError::new(
                    "unsupported syntax '$((' (arithmetic expansion is not interpreted)",
                    line,
                    column,
                ));
            }
            Some('(') => {
                self.bump();
                let part = self.substitution(line, column)?;
                flush(parts, text, part);
            }
            Some(c) if c == '_' || c.is_ascii_alphabetic() => {
                let mut name = String::new();
                while let Some(c) = self
                    .peek()
                    .filter(|c| *c == '_' || c.is_ascii_alphanumeric())
                {
                    self.bump();
                    name.push(c);
                }
                flush(parts, text, Part::Var(name));
            }
            Some(c @ ('$' | '!' | '#' | '@' | '*' | '-')) => {
                return Err(ParseError::new(
                    format!("unsupported special parameter '${c}'"),
                    line,
                    column,
                ));
            }
            // A lone `$` is literal, as in sh.
            _ => text.push('$'),
        }
        Ok(())
    }
}
