//! Splits a script into words and operators, and reads here-documents.
//! Words themselves (quotes, expansions) are read by `word`.

use super::ast::{Part, Word};
use super::parse::ParseError;

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
    /// `;`.
    Semi,
    /// A newline.
    Newline,
    /// `;;`.
    DoubleSemi,
    And,
    Or,
    Pipe,
    LParen,
    RParen,
    /// A redirection operator with its descriptor (`2>`, `<`, `>&`…).
    Redirect(u8, RedirectOp),
    /// A here-document: the index of its body in [`Lexed::heredocs`].
    HereDoc(u8, usize),
}

/// A redirection operator other than `<<`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RedirectOp {
    /// `>` or `>|`.
    Out,
    /// `>>`.
    Append,
    /// `<`.
    In,
    /// `>&` or `<&`.
    Dup,
}

/// A script's tokens and the bodies of its here-documents.
pub(super) struct Lexed {
    pub tokens: Vec<Token>,
    pub heredocs: Vec<Word>,
}

/// A here-document whose body is still to be read (after the current line).
struct Pending {
    delimiter: String,
    /// A quoted delimiter: the body is literal.
    quoted: bool,
    /// `<<-`: leading tabs are stripped.
    strip: bool,
    index: usize,
}

/// Splits `script`, which starts at `line`:`column` of the whole script
/// (1:1 unless it is the text of a `$(…)`), so positions are the whole script's.
pub(super) fn tokenize(script: &str, line: usize, column: usize) -> Result<Lexed, ParseError> {
    let mut lexer = Lexer::new(script, line, column);
    lexer.run()?;
    Ok(Lexed {
        tokens: lexer.tokens,
        heredocs: lexer.heredocs,
    })
}

pub(super) struct Lexer {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
    pub(super) line: usize,
    pub(super) column: usize,
    tokens: Vec<Token>,
    heredocs: Vec<Word>,
    pending: Vec<Pending>,
}

/// Characters that end an unquoted word.
pub(super) fn is_meta(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
    )
}

impl Lexer {
    pub(super) fn new(text: &str, line: usize, column: usize) -> Self {
        Self {
            chars: text.chars().collect(),
            pos: 0,
            line,
            column,
            tokens: Vec::new(),
            heredocs: Vec::new(),
            pending: Vec::new(),
        }
    }

    pub(super) fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    pub(super) fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    pub(super) fn bump(&mut self) -> Option<char> {
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

    pub(super) fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError::new(message, self.line, self.column)
    }

    fn push(&mut self, kind: TokenKind, line: usize, column: usize) {
        self.tokens.push(Token { kind, line, column });
    }

    fn run(&mut self) -> Result<(), ParseError> {
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
                '\n' => {
                    self.bump();
                    self.push(TokenKind::Newline, line, column);
                    self.read_heredocs()?;
                }
                ';' => {
                    self.bump();
                    if self.peek() == Some(';') {
                        self.bump();
                        self.push(TokenKind::DoubleSemi, line, column);
                    } else {
                        self.push(TokenKind::Semi, line, column);
                    }
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
                        self.push(TokenKind::Pipe, line, column);
                    }
                }
                '(' => {
                    self.bump();
                    self.push(TokenKind::LParen, line, column);
                }
                ')' => {
                    self.bump();
                    self.push(TokenKind::RParen, line, column);
                }
                '<' | '>' => self.redirect(None, line, column)?,
                '0'..='9' if self.at_word_start() && self.fd_redirect() => {
                    let fd = c.to_digit(10).unwrap_or(0);
                    if fd > 2 {
                        return Err(self.error(format!(
                            "unsupported redirection of descriptor {fd} (only 0, 1 and 2 are interpreted)"
                        )));
                    }
                    self.bump();
                    self.redirect(Some(fd as u8), line, column)?;
                }
                _ => {
                    let (word, quoted) = self.word()?;
                    self.push(TokenKind::Word(word, quoted), line, column);
                }
            }
        }
        if let Some(pending) = self.pending.first() {
            // busybox reads a missing delimiter as the end of the script.
            let _ = pending;
            self.read_heredocs()?;
        }
        Ok(())
    }

    /// Whether the cursor is at `N>` or `N<` (one digit before the operator).
    fn fd_redirect(&self) -> bool {
        matches!(self.peek_at(1), Some('<' | '>'))
    }

    /// Whether the character before the cursor ends a token (so `2>` is a
    /// redirection and `a2>` is the word `a2` followed by `>`).
    fn at_word_start(&self) -> bool {
        self.pos == 0 || is_meta(self.chars[self.pos - 1])
    }

    fn redirect(&mut self, fd: Option<u8>, line: usize, column: usize) -> Result<(), ParseError> {
        let Some(first) = self.bump() else {
            return Ok(());
        };
        let (default_fd, op) = match (first, self.peek()) {
            ('>', Some('>')) => {
                self.bump();
                (1, RedirectOp::Append)
            }
            ('>', Some('&')) => {
                self.bump();
                (1, RedirectOp::Dup)
            }
            ('>', Some('|')) => {
                self.bump();
                (1, RedirectOp::Out)
            }
            ('>', _) => (1, RedirectOp::Out),
            ('<', Some('<')) => {
                self.bump();
                let strip = self.peek() == Some('-');
                if strip {
                    self.bump();
                }
                return self.heredoc(fd.unwrap_or(0), strip, line, column);
            }
            ('<', Some('&')) => {
                self.bump();
                (0, RedirectOp::Dup)
            }
            ('<', Some('>')) => {
                return Err(self.error("unsupported syntax '<>' (read-write redirection)"));
            }
            _ => (0, RedirectOp::In),
        };
        self.push(
            TokenKind::Redirect(fd.unwrap_or(default_fd), op),
            line,
            column,
        );
        Ok(())
    }

    /// `<<DELIMITER`: the body is read after the end of the line.
    fn heredoc(
        &mut self,
        fd: u8,
        strip: bool,
        line: usize,
        column: usize,
    ) -> Result<(), ParseError> {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
        if self.peek().is_none_or(is_meta) {
            return Err(self.error("expected a delimiter after '<<'"));
        }
        let (word, quoted) = self.word()?;
        let delimiter = word
            .literal()
            .ok_or_else(|| self.error("unsupported here-document delimiter with an expansion"))?;
        let index = self.heredocs.len();
        self.heredocs.push(Word::default());
        self.pending.push(Pending {
            delimiter,
            quoted,
            strip,
            index,
        });
        self.push(TokenKind::HereDoc(fd, index), line, column);
        Ok(())
    }

    /// Reads the bodies of the here-documents of the line just ended.
    fn read_heredocs(&mut self) -> Result<(), ParseError> {
        for pending in std::mem::take(&mut self.pending) {
            let (body_line, body_column) = (self.line, self.column);
            let mut body = String::new();
            while self.peek().is_some() {
                let mut text = String::new();
                while let Some(c) = self.bump() {
                    if c == '\n' {
                        break;
                    }
                    text.push(c);
                }
                let text = if pending.strip {
                    text.trim_start_matches('\t').to_owned()
                } else {
                    text
                };
                if text == pending.delimiter {
                    break;
                }
                body.push_str(&text);
                body.push('\n');
            }
            self.heredocs[pending.index] = if pending.quoted {
                Word(vec![Part::Quoted(body)])
            } else {
                let mut inner = Lexer::new(&body, body_line, body_column);
                inner.heredoc_body()?
            };
        }
        Ok(())
    }
}
