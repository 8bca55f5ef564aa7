//! Parses a script into a [`List`].

use std::fmt;

use super::ast::{AndOr, Command, Connector, List, Redirect, RedirectTarget, Simple, Word};
use super::forms;
use super::lex::{Token, TokenKind, tokenize};

/// A script the interpreter cannot run, with the place of the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What is wrong.
    pub message: String,
    /// 1-based line in the script.
    pub line: usize,
    /// 1-based column in the line.
    pub column: usize,
}

impl ParseError {
    pub(super) fn new(message: impl Into<String>, line: usize, column: usize) -> Self {
        Self {
            message: message.into(),
            line,
            column,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at line {}, column {}",
            self.message, self.line, self.column
        )
    }
}

impl std::error::Error for ParseError {}

/// Words that end a list: the parser stops at them and the caller expects one.
const TERMINATORS: &[&str] = &["do", "done", "then", "elif", "else", "fi", "}"];

/// Shell keywords this interpreter refuses.
const UNSUPPORTED: &[&str] = &["case", "esac", "function", "select", "!"];

/// Parses a script.
pub fn parse(script: &str) -> Result<List, ParseError> {
    parse_at(script, 1, 1)
}

/// Parses a script that starts at `line`:`column` of a larger one (the text
/// of a `$(…)`), so that errors give the larger script's positions.
pub(super) fn parse_at(script: &str, line: usize, column: usize) -> Result<List, ParseError> {
    let tokens = tokenize(script, line, column)?;
    let mut parser = Parser {
        tokens,
        pos: 0,
        start: (line, column),
    };
    let list = parser.list()?;
    match parser.peek() {
        None => Ok(list),
        Some(token) => Err(parser.unexpected(token)),
    }
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    /// Where the script starts: the position of errors in an empty one.
    start: (usize, usize),
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    /// The keyword at the cursor, if the next token is an unquoted literal word.
    fn keyword(&self) -> Option<String> {
        match &self.peek()?.kind {
            TokenKind::Word(word, false) => word.literal(),
            _ => None,
        }
    }

    fn end_position(&self) -> (usize, usize) {
        self.tokens
            .last()
            .map_or(self.start, |token| (token.line, token.column))
    }

    fn unexpected(&self, token: &Token) -> ParseError {
        let what = match &token.kind {
            TokenKind::Word(word, _) => format!("'{}'", word.literal().unwrap_or_default()),
            TokenKind::Separator => "';'".to_owned(),
            TokenKind::And => "'&&'".to_owned(),
            TokenKind::Or => "'||'".to_owned(),
            TokenKind::RedirectOut(..) | TokenKind::RedirectFd(..) => "'>'".to_owned(),
        };
        ParseError::new(format!("unexpected {what}"), token.line, token.column)
    }

    fn skip_separators(&mut self) {
        while matches!(
            self.peek(),
            Some(Token {
                kind: TokenKind::Separator,
                ..
            })
        ) {
            self.pos += 1;
        }
    }

    fn expect_keyword(&mut self, keyword: &str) -> Result<(), ParseError> {
        self.skip_separators();
        match self.keyword() {
            Some(found) if found == keyword => {
                self.pos += 1;
                Ok(())
            }
            _ => {
                let (line, column) = self
                    .peek()
                    .map_or_else(|| self.end_position(), |t| (t.line, t.column));
                Err(ParseError::new(
                    format!("expected '{keyword}'"),
                    line,
                    column,
                ))
            }
        }
    }

    /// A list, up to the end of input or a terminating keyword.
    fn list(&mut self) -> Result<List, ParseError> {
        let mut items = Vec::new();
        loop {
            self.skip_separators();
            match self.keyword() {
                Some(keyword) if TERMINATORS.contains(&keyword.as_str()) => break,
                _ => {}
            }
            if self.peek().is_none() {
                break;
            }
            items.push(self.and_or()?);
            match self.peek() {
                None => break,
                Some(Token {
                    kind: TokenKind::Separator,
                    ..
                }) => {}
                Some(_) => match self.keyword() {
                    Some(keyword) if TERMINATORS.contains(&keyword.as_str()) => break,
                    _ => return Err(self.unexpected(&self.tokens[self.pos])),
                },
            }
        }
        Ok(List(items))
    }

    fn and_or(&mut self) -> Result<AndOr, ParseError> {
        let first = self.command()?;
        let mut rest = Vec::new();
        loop {
            let connector = match self.peek().map(|t| &t.kind) {
                Some(TokenKind::And) => Connector::And,
                Some(TokenKind::Or) => Connector::Or,
                _ => break,
            };
            self.pos += 1;
            // A newline may follow `&&` / `||`.
            self.skip_separators();
            rest.push((connector, self.command()?));
        }
        Ok(AndOr { first, rest })
    }

    fn command(&mut self) -> Result<Command, ParseError> {
        let Some(token) = self.peek().cloned() else {
            let (line, column) = self.end_position();
            return Err(ParseError::new(
                "expected a command at the end of the script",
                line,
                column,
            ));
        };
        match self.keyword().as_deref() {
            Some(keyword @ ("while" | "until")) => {
                self.pos += 1;
                let condition = self.list()?;
                self.expect_keyword("do")?;
                let body = self.list()?;
                self.expect_keyword("done")?;
                Ok(Command::While {
                    until: keyword == "until",
                    condition,
                    body,
                })
            }
            Some("for") => self.for_loop(),
            Some("if") => self.if_command(),
            Some("{") => {
                self.pos += 1;
                let list = self.list()?;
                self.expect_keyword("}")?;
                Ok(Command::Group(list))
            }
            Some(keyword) if UNSUPPORTED.contains(&keyword) => Err(ParseError::new(
                format!("unsupported shell keyword '{keyword}'"),
                token.line,
                token.column,
            )),
            Some(keyword) if TERMINATORS.contains(&keyword) => Err(self.unexpected(&token)),
            _ => self.simple(),
        }
    }

    fn for_loop(&mut self) -> Result<Command, ParseError> {
        let for_token = self.tokens[self.pos].clone();
        self.pos += 1;
        let name = match self.peek().map(|t| &t.kind) {
            Some(TokenKind::Word(word, false)) => word.literal(),
            _ => None,
        }
        .filter(|name| {
            !name.is_empty()
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
                && !name.starts_with(|c: char| c.is_ascii_digit())
        })
        .ok_or_else(|| {
            ParseError::new(
                "expected a variable name after 'for'",
                for_token.line,
                for_token.column,
            )
        })?;
        self.pos += 1;
        let mut values = Vec::new();
        if self.keyword().as_deref() == Some("in") {
            self.pos += 1;
            while let Some(TokenKind::Word(word, _)) = self.peek().map(|t| &t.kind) {
                values.push(word.clone());
                self.pos += 1;
            }
        } else {
            return Err(ParseError::new(
                "expected 'in' after the variable of 'for'",
                for_token.line,
                for_token.column,
            ));
        }
        self.expect_keyword("do")?;
        let body = self.list()?;
        self.expect_keyword("done")?;
        Ok(Command::For { name, values, body })
    }

    fn if_command(&mut self) -> Result<Command, ParseError> {
        self.pos += 1; // if
        let mut branches = Vec::new();
        let mut otherwise = None;
        loop {
            let condition = self.list()?;
            self.expect_keyword("then")?;
            let body = self.list()?;
            branches.push((condition, body));
            self.skip_separators();
            match self.keyword().as_deref() {
                Some("elif") => self.pos += 1,
                Some("else") => {
                    self.pos += 1;
                    otherwise = Some(self.list()?);
                    self.expect_keyword("fi")?;
                    break;
                }
                _ => {
                    self.expect_keyword("fi")?;
                    break;
                }
            }
        }
        Ok(Command::If {
            branches,
            otherwise,
        })
    }

    fn simple(&mut self) -> Result<Command, ParseError> {
        let (line, column) = self
            .peek()
            .map_or_else(|| self.end_position(), |t| (t.line, t.column));
        let mut simple = Simple::default();
        while let Some(token) = self.peek().cloned() {
            match token.kind {
                TokenKind::Word(word, _) => {
                    self.pos += 1;
                    simple.words.push(word);
                }
                TokenKind::RedirectOut(fd, append) => {
                    self.pos += 1;
                    match self.peek().map(|t| &t.kind) {
                        Some(TokenKind::Word(path, _)) => {
                            simple.redirects.push(Redirect {
                                fd,
                                target: RedirectTarget::File {
                                    path: path.clone(),
                                    append,
                                },
                            });
                            self.pos += 1;
                        }
                        _ => {
                            return Err(ParseError::new(
                                "expected a file name after '>'",
                                token.line,
                                token.column,
                            ));
                        }
                    }
                }
                TokenKind::RedirectFd(fd, target) => {
                    self.pos += 1;
                    simple.redirects.push(Redirect {
                        fd,
                        target: RedirectTarget::Fd(target),
                    });
                }
                TokenKind::Separator | TokenKind::And | TokenKind::Or => break,
            }
        }
        if simple.words.is_empty() && simple.redirects.is_empty() {
            let token = &self.tokens[self.pos];
            return Err(self.unexpected(token));
        }
        // A command written out in literal words is checked now; one built
        // from variables is checked when it runs.
        let literal: Option<Vec<String>> = simple.words.iter().map(Word::literal).collect();
        if let Some(argv) = literal {
            forms::check(&argv).map_err(|message| ParseError::new(message, line, column))?;
        }
        Ok(Command::Simple(simple))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(script: &str) -> String {
        parse(script).unwrap_err().to_string()
    }

    #[test]
    fn parses_supported_forms() {
        for script in [
            "sleep 1; exit 3",
            "true && echo ok || echo no",
            "trap 'exit 0' TERM; while true; do sleep 1; done",
            "touch /tmp/healthy; sleep 30; rm -f /tmp/healthy; sleep 600",
            "echo \"hello $NAME ${X}\" > /dev/termination-log",
            "if test -e /f; then echo y; elif false; then :; else echo n; fi",
            "for i in 1 2 3; do echo $i; done",
            "{ echo a; echo b; }; echo c >> /tmp/out 2>&1",
            "echo a\necho b\n# comment\n",
            "until false; do exit 4; done",
            "echo $(hostname) \"$(echo \"$(true)\")\"",
            "",
        ] {
            parse(script).unwrap_or_else(|e| panic!("{script:?}: {e}"));
        }
    }

    #[test]
    fn structure() {
        let list = parse("sleep 1 && exit 3").unwrap();
        assert_eq!(list.0.len(), 1);
        assert_eq!(list.0[0].rest.len(), 1);
        assert_eq!(list.0[0].rest[0].0, Connector::And);
    }

    #[test]
    fn refuses_with_position() {
        assert_eq!(
            err("echo a | grep a"),
            "unsupported syntax '|' (pipelines are not interpreted) at line 1, column 8"
        );
        assert_eq!(
            err("sleep 1 &"),
            "unsupported syntax '&' (background jobs are not interpreted) at line 1, column 9"
        );
        assert!(err("echo $((1 + 2))").contains("arithmetic expansion"));
        assert!(err("echo `date`").contains("command substitution"));
        assert!(err("cat < f").contains("input redirection"));
        assert!(err("echo 'open").contains("unterminated single quote"));
        assert!(err("while true; do sleep 1").contains("expected 'done'"));
        assert!(err("if true; then echo").contains("expected 'fi'"));
        assert!(err("case x in esac").contains("unsupported shell keyword 'case'"));
        assert!(err("echo a\n(echo b)").contains("line 2, column 1"));
        assert!(err("&& true").contains("unexpected"));
        assert!(err("echo >").contains("expected a file name"));
        assert!(err("done").contains("unexpected 'done'"));
    }
}
