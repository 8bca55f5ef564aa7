//! Parses a script into a [`List`].

use std::fmt;

use std::sync::Arc;

use super::ast::{
    AndOr, Command, Connector, List, Pipeline, Redirect, RedirectTarget, Simple, Word,
};
use super::env::is_name;
use super::forms;
use super::lex::{RedirectOp, Token, TokenKind, tokenize};

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
const TERMINATORS: &[&str] = &["do", "done", "then", "elif", "else", "fi", "}", "esac"];

/// Shell keywords this interpreter refuses.
const UNSUPPORTED: &[&str] = &["function", "select"];

/// Parses a script.
pub fn parse(script: &str) -> Result<List, ParseError> {
    parse_at(script, 1, 1)
}

/// Parses a script that starts at `line`:`column` of a larger one (the text
/// of a `$(…)`), so that errors give the larger script's positions.
pub(super) fn parse_at(script: &str, line: usize, column: usize) -> Result<List, ParseError> {
    let lexed = tokenize(script, line, column)?;
    let mut parser = Parser {
        tokens: lexed.tokens,
        heredocs: lexed.heredocs,
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
    heredocs: Vec<Word>,
    pos: usize,
    /// Where the script starts: the position of errors in an empty one.
    start: (usize, usize),
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn peek_kind(&self) -> Option<&TokenKind> {
        self.peek().map(|t| &t.kind)
    }

    /// The keyword at the cursor, if the next token is an unquoted literal word.
    fn keyword(&self) -> Option<String> {
        match &self.peek()?.kind {
            TokenKind::Word(word, false) => word.literal(),
            _ => None,
        }
    }

    fn position(&self) -> (usize, usize) {
        self.peek().map_or_else(
            || {
                self.tokens
                    .last()
                    .map_or(self.start, |token| (token.line, token.column))
            },
            |t| (t.line, t.column),
        )
    }

    fn unexpected(&self, token: &Token) -> ParseError {
        let what = match &token.kind {
            TokenKind::Word(word, _) => format!("'{}'", word.literal().unwrap_or_default()),
            TokenKind::Semi => "';'".to_owned(),
            TokenKind::Newline => "newline".to_owned(),
            TokenKind::DoubleSemi => "';;'".to_owned(),
            TokenKind::And => "'&&'".to_owned(),
            TokenKind::Or => "'||'".to_owned(),
            TokenKind::Pipe => "'|'".to_owned(),
            TokenKind::LParen => "'('".to_owned(),
            TokenKind::RParen => "')'".to_owned(),
            TokenKind::Redirect(..) | TokenKind::HereDoc(..) => "redirection".to_owned(),
        };
        ParseError::new(format!("unexpected {what}"), token.line, token.column)
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek_kind(), Some(TokenKind::Newline)) {
            self.pos += 1;
        }
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek_kind(), Some(TokenKind::Newline | TokenKind::Semi)) {
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
                let (line, column) = self.position();
                Err(ParseError::new(
                    format!("expected '{keyword}'"),
                    line,
                    column,
                ))
            }
        }
    }

    fn at_list_end(&self) -> bool {
        match self.peek_kind() {
            None | Some(TokenKind::RParen | TokenKind::DoubleSemi) => true,
            _ => self
                .keyword()
                .is_some_and(|k| TERMINATORS.contains(&k.as_str())),
        }
    }

    /// A list, up to the end of input, a terminating keyword, `)` or `;;`.
    fn list(&mut self) -> Result<List, ParseError> {
        let mut items = Vec::new();
        loop {
            self.skip_separators();
            if self.at_list_end() {
                break;
            }
            items.push(self.and_or()?);
            match self.peek_kind() {
                Some(TokenKind::Semi | TokenKind::Newline) => {}
                _ if self.at_list_end() => break,
                _ => return Err(self.unexpected(&self.tokens[self.pos])),
            }
        }
        Ok(List(items))
    }

    fn and_or(&mut self) -> Result<AndOr, ParseError> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        loop {
            let connector = match self.peek_kind() {
                Some(TokenKind::And) => Connector::And,
                Some(TokenKind::Or) => Connector::Or,
                _ => break,
            };
            self.pos += 1;
            // A newline may follow `&&` / `||`.
            self.skip_newlines();
            rest.push((connector, self.pipeline()?));
        }
        Ok(AndOr { first, rest })
    }

    fn pipeline(&mut self) -> Result<Pipeline, ParseError> {
        let negated = self.keyword().as_deref() == Some("!");
        if negated {
            self.pos += 1;
        }
        let mut commands = vec![self.command()?];
        while matches!(self.peek_kind(), Some(TokenKind::Pipe)) {
            self.pos += 1;
            self.skip_newlines();
            commands.push(self.command()?);
        }
        Ok(Pipeline { negated, commands })
    }

    fn command(&mut self) -> Result<Command, ParseError> {
        let Some(token) = self.peek().cloned() else {
            let (line, column) = self.position();
            return Err(ParseError::new(
                "expected a command at the end of the script",
                line,
                column,
            ));
        };
        let compound = match self.keyword().as_deref() {
            Some(keyword @ ("while" | "until")) => {
                self.pos += 1;
                let condition = self.list()?;
                self.expect_keyword("do")?;
                let body = self.list()?;
                self.expect_keyword("done")?;
                Command::While {
                    until: keyword == "until",
                    condition,
                    body,
                }
            }
            Some("for") => self.for_loop()?,
            Some("if") => self.if_command()?,
            Some("case") => self.case_command()?,
            Some("{") => {
                self.pos += 1;
                let list = self.list()?;
                self.expect_keyword("}")?;
                Command::Group(list)
            }
            Some(keyword) if UNSUPPORTED.contains(&keyword) => {
                return Err(ParseError::new(
                    format!("unsupported shell keyword '{keyword}'"),
                    token.line,
                    token.column,
                ));
            }
            Some(keyword) if TERMINATORS.contains(&keyword) || keyword == "!" => {
                return Err(self.unexpected(&token));
            }
            _ if matches!(token.kind, TokenKind::LParen) => {
                self.pos += 1;
                let list = self.list()?;
                match self.peek_kind() {
                    Some(TokenKind::RParen) => self.pos += 1,
                    _ => {
                        let (line, column) = self.position();
                        return Err(ParseError::new("expected ')'", line, column));
                    }
                }
                Command::Subshell(list)
            }
            _ if self.at_function() => return self.function(),
            _ => return self.simple(),
        };
        let mut redirects = Vec::new();
        while let Some(redirect) = self.redirect()? {
            redirects.push(redirect);
        }
        Ok(if redirects.is_empty() {
            compound
        } else {
            Command::Redirected(Box::new(compound), redirects)
        })
    }

    /// Whether the cursor is at `NAME ( )`.
    fn at_function(&self) -> bool {
        matches!(
            (
                self.peek_kind(),
                self.tokens.get(self.pos + 1).map(|t| &t.kind),
                self.tokens.get(self.pos + 2).map(|t| &t.kind),
            ),
            (
                Some(TokenKind::Word(_, false)),
                Some(TokenKind::LParen),
                Some(TokenKind::RParen)
            )
        )
    }

    fn function(&mut self) -> Result<Command, ParseError> {
        let token = self.tokens[self.pos].clone();
        let name = self
            .keyword()
            .filter(|name| is_name(name))
            .ok_or_else(|| ParseError::new("bad function name", token.line, token.column))?;
        self.pos += 3;
        self.skip_newlines();
        let body = self.command()?;
        Ok(Command::Function {
            name,
            body: Arc::new(body),
        })
    }

    fn for_loop(&mut self) -> Result<Command, ParseError> {
        let for_token = self.tokens[self.pos].clone();
        self.pos += 1;
        let name = self.keyword().filter(|name| is_name(name)).ok_or_else(|| {
            ParseError::new(
                "expected a variable name after 'for'",
                for_token.line,
                for_token.column,
            )
        })?;
        self.pos += 1;
        self.skip_newlines();
        let mut values = None;
        if self.keyword().as_deref() == Some("in") {
            self.pos += 1;
            let mut words = Vec::new();
            while let Some(TokenKind::Word(word, _)) = self.peek_kind() {
                words.push(word.clone());
                self.pos += 1;
            }
            values = Some(words);
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

    fn case_command(&mut self) -> Result<Command, ParseError> {
        let case_token = self.tokens[self.pos].clone();
        self.pos += 1;
        let word = match self.peek_kind() {
            Some(TokenKind::Word(word, _)) => word.clone(),
            _ => {
                return Err(ParseError::new(
                    "expected a word after 'case'",
                    case_token.line,
                    case_token.column,
                ));
            }
        };
        self.pos += 1;
        self.skip_newlines();
        self.expect_keyword("in")?;
        let mut arms = Vec::new();
        loop {
            self.skip_separators();
            if self.keyword().as_deref() == Some("esac") {
                self.pos += 1;
                break;
            }
            if matches!(self.peek_kind(), Some(TokenKind::LParen)) {
                self.pos += 1;
            }
            let mut patterns = Vec::new();
            loop {
                match self.peek_kind() {
                    Some(TokenKind::Word(word, _)) => {
                        patterns.push(word.clone());
                        self.pos += 1;
                    }
                    _ => {
                        let (line, column) = self.position();
                        return Err(ParseError::new("expected a pattern", line, column));
                    }
                }
                match self.peek_kind() {
                    Some(TokenKind::Pipe) => self.pos += 1,
                    Some(TokenKind::RParen) => {
                        self.pos += 1;
                        break;
                    }
                    _ => {
                        let (line, column) = self.position();
                        return Err(ParseError::new("expected ')'", line, column));
                    }
                }
            }
            let body = self.list()?;
            arms.push((patterns, body));
            match self.peek_kind() {
                Some(TokenKind::DoubleSemi) => self.pos += 1,
                _ => {
                    self.expect_keyword("esac")?;
                    break;
                }
            }
        }
        Ok(Command::Case { word, arms })
    }

    /// A redirection at the cursor, if there is one.
    fn redirect(&mut self) -> Result<Option<Redirect>, ParseError> {
        let Some(token) = self.peek().cloned() else {
            return Ok(None);
        };
        let (fd, op) = match token.kind {
            TokenKind::Redirect(fd, op) => (fd, op),
            TokenKind::HereDoc(fd, index) => {
                self.pos += 1;
                return Ok(Some(Redirect {
                    fd,
                    target: RedirectTarget::HereDoc(self.heredocs[index].clone()),
                }));
            }
            _ => return Ok(None),
        };
        self.pos += 1;
        let Some(TokenKind::Word(word, _)) = self.peek_kind().cloned() else {
            return Err(ParseError::new(
                "expected a file name after a redirection",
                token.line,
                token.column,
            ));
        };
        self.pos += 1;
        let target = match op {
            RedirectOp::Out => RedirectTarget::File {
                path: word,
                append: false,
            },
            RedirectOp::Append => RedirectTarget::File {
                path: word,
                append: true,
            },
            RedirectOp::In => RedirectTarget::Input(word),
            RedirectOp::Dup => match word.literal().as_deref() {
                Some("-") => RedirectTarget::Fd(None),
                Some("0") => RedirectTarget::Fd(Some(0)),
                Some("1") => RedirectTarget::Fd(Some(1)),
                Some("2") => RedirectTarget::Fd(Some(2)),
                _ => {
                    return Err(ParseError::new(
                        "unsupported redirection target (only >&0, >&1, >&2 and >&- are interpreted)",
                        token.line,
                        token.column,
                    ));
                }
            },
        };
        Ok(Some(Redirect { fd, target }))
    }

    fn simple(&mut self) -> Result<Command, ParseError> {
        let (line, column) = self.position();
        let mut simple = Simple {
            line,
            ..Simple::default()
        };
        loop {
            if let Some(redirect) = self.redirect()? {
                simple.redirects.push(redirect);
                continue;
            }
            match self.peek_kind() {
                Some(TokenKind::Word(word, _)) => {
                    simple.words.push(word.clone());
                    self.pos += 1;
                }
                _ => break,
            }
        }
        if simple.words.is_empty() && simple.redirects.is_empty() {
            return match self.peek() {
                Some(token) => Err(self.unexpected(token)),
                None => Err(ParseError::new(
                    "expected a command at the end of the script",
                    line,
                    column,
                )),
            };
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
            "echo a | cat | cat; ! true",
            "f() { echo $1; }; f x; (echo sub) 2>&1",
            "case $x in a|b) echo ab;; *) ;; esac",
            "cat <<EOF\n$x\nEOF\necho after",
            "echo $((1 + 2)) ${x:-d} ${x#*/} ${#x} `echo b`",
            "while read l; do echo $l; done < /f",
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
            err("sleep 1 &"),
            "unsupported syntax '&' (background jobs are not interpreted) at line 1, column 9"
        );
        assert!(err("echo $((1 + 2)").contains("unterminated '$(('"));
        assert!(err("echo `date").contains("no closing backquote"));
        assert!(err("cat 3< f").contains("descriptor 3"));
        assert!(err("echo 'open").contains("unterminated quoted string"));
        assert!(err("while true; do sleep 1").contains("expected 'done'"));
        assert!(err("if true; then echo").contains("expected 'fi'"));
        assert!(err("case x in a) echo").contains("expected 'esac'"));
        assert!(err("echo a\n)").contains("line 2, column 1"));
        assert!(err("&& true").contains("unexpected"));
        assert!(err("echo >").contains("expected a file name"));
        assert!(err("done").contains("unexpected 'done'"));
        assert!(err("echo ${x").contains("missing '}'"));
        assert!(err("echo ${%x}").contains("bad substitution"));
        assert!(err("function f { :; }").contains("unsupported shell keyword 'function'"));
        assert!(err("echo $$").contains("special parameter '$$'"));
    }
}
