//! The syntax tree of an interpreted script.

use std::sync::Arc;

/// Commands separated by `;` or newlines, run in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct List(pub Vec<AndOr>);

/// A pipeline followed by `&&`/`||`-connected pipelines.
#[derive(Debug, Clone, PartialEq)]
pub struct AndOr {
    /// The first pipeline.
    pub first: Pipeline,
    /// The following pipelines with the operator before each.
    pub rest: Vec<(Connector, Pipeline)>,
}

/// `[!] COMMAND [| COMMAND]…`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// `!`: the status is negated.
    pub negated: bool,
    /// The stages, in order (one for a plain command).
    pub commands: Vec<Command>,
}

/// `&&` or `||`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connector {
    /// `&&`: run the next command if the previous one succeeded.
    And,
    /// `||`: run the next command if the previous one failed.
    Or,
}

/// One command.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// A simple command: words and redirections.
    Simple(Simple),
    /// `while LIST; do LIST; done` (or `until`, with `until` set).
    While {
        /// `until` instead of `while`: loop while the condition fails.
        until: bool,
        /// The condition.
        condition: List,
        /// The loop body.
        body: List,
    },
    /// `for NAME [in WORDS]; do LIST; done`.
    For {
        /// The loop variable.
        name: String,
        /// The values, in order; `None` without `in`: the positional parameters.
        values: Option<Vec<Word>>,
        /// The loop body.
        body: List,
    },
    /// `if LIST; then LIST; [elif LIST; then LIST;]… [else LIST;] fi`.
    If {
        /// Each condition with its branch, in order.
        branches: Vec<(List, List)>,
        /// The `else` branch.
        otherwise: Option<List>,
    },
    /// `case WORD in PATTERN[|PATTERN]) LIST ;; … esac`.
    Case {
        /// The word matched.
        word: Word,
        /// The arms, in order.
        arms: Vec<(Vec<Word>, List)>,
    },
    /// `{ LIST; }`.
    Group(List),
    /// `( LIST )`: run in a subshell.
    Subshell(List),
    /// `NAME() COMMAND`: defines a function.
    Function {
        /// The function's name.
        name: String,
        /// Its body (shared with the table of functions).
        body: Arc<Command>,
    },
    /// A compound command with redirections after it.
    Redirected(Box<Command>, Vec<Redirect>),
}

/// A simple command.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Simple {
    /// The command name and its arguments.
    pub words: Vec<Word>,
    /// Its redirections, in order.
    pub redirects: Vec<Redirect>,
    /// The 1-based line it starts on (busybox's messages name it).
    pub line: usize,
}

/// A word: literal text and expansions, as written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Word(pub Vec<Part>);

impl Word {
    /// The word's text if it has no expansions.
    pub fn literal(&self) -> Option<String> {
        self.0
            .iter()
            .map(|part| match part {
                Part::Literal(text) | Part::Quoted(text) => Some(text.as_str()),
                Part::Param(..) | Part::Command(..) | Part::Arith(..) => None,
            })
            .collect()
    }
}

/// A piece of a word.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Unquoted text (a pattern's special characters are active in it).
    Literal(String),
    /// Quoted or backslash-escaped text: never split, never a pattern.
    Quoted(String),
    /// A parameter expansion; `true` inside double quotes.
    Param(Box<Param>, bool),
    /// `$(LIST)` or `` `LIST` ``: the output of a list run in a subshell,
    /// without its trailing newlines; `true` inside double quotes.
    Command(List, bool),
    /// `$((EXPRESSION))`: the expression's text (expanded, then evaluated);
    /// `true` inside double quotes.
    Arith(Word, bool),
}

/// `$NAME`, `${NAME}`, `${NAME OP WORD}`, `$1`, `$@`, `$?`…
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The name, a positional parameter's number or a special parameter's character.
    pub name: String,
    /// What is done with the value.
    pub op: ParamOp,
}

/// The operator of a `${…}` expansion.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamOp {
    /// The value.
    Plain,
    /// `${#NAME}`: its length.
    Length,
    /// `${NAME:-WORD}` (`colon`) or `${NAME-WORD}`.
    Default(bool, Word),
    /// `${NAME:=WORD}` or `${NAME=WORD}`.
    Assign(bool, Word),
    /// `${NAME:?WORD}` or `${NAME?WORD}`.
    Error(bool, Word),
    /// `${NAME:+WORD}` or `${NAME+WORD}`.
    Alternative(bool, Word),
    /// `${NAME%PATTERN}`, `${NAME%%PATTERN}` (`true`: the longest match).
    TrimSuffix(bool, Word),
    /// `${NAME#PATTERN}`, `${NAME##PATTERN}`.
    TrimPrefix(bool, Word),
    /// `${NAME/PATTERN/WORD}`, `${NAME//PATTERN/WORD}` (`true`: every match).
    Replace(bool, Word, Word),
    /// `${NAME:OFFSET}`, `${NAME:OFFSET:LENGTH}`.
    Substring(Word, Option<Word>),
}

/// A redirection of descriptor `fd` (0, 1 or 2).
#[derive(Debug, Clone, PartialEq)]
pub struct Redirect {
    /// The redirected descriptor.
    pub fd: u8,
    /// What it is redirected to.
    pub target: RedirectTarget,
}

/// The target of a redirection.
#[derive(Debug, Clone, PartialEq)]
pub enum RedirectTarget {
    /// `>F`, `>|F` (truncated) or `>>F` (appended to).
    File {
        /// The file name.
        path: Word,
        /// `>>`.
        append: bool,
    },
    /// `<F`.
    Input(Word),
    /// `>&N`, `<&N`: a copy of another descriptor; `None` closes it (`>&-`).
    Fd(Option<u8>),
    /// A here-document: its text (expanded unless the delimiter was quoted).
    HereDoc(Word),
}
