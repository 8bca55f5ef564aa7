//! The syntax tree of an interpreted script.

/// Commands separated by `;` or newlines, run in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct List(pub Vec<AndOr>);

/// A command followed by `&&`/`||`-connected commands.
#[derive(Debug, Clone, PartialEq)]
pub struct AndOr {
    /// The first command.
    pub first: Command,
    /// The following commands with the operator before each.
    pub rest: Vec<(Connector, Command)>,
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
    /// `for NAME in WORDS; do LIST; done`.
    For {
        /// The loop variable.
        name: String,
        /// The values, in order.
        values: Vec<Word>,
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
    /// `{ LIST; }`.
    Group(List),
}

/// A simple command.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Simple {
    /// The command name and its arguments.
    pub words: Vec<Word>,
    /// Output redirections, in order.
    pub redirects: Vec<Redirect>,
}

/// A word: literal text and variable references, joined without splitting.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Word(pub Vec<Part>);

impl Word {
    /// The word's text if it has no expansions.
    pub fn literal(&self) -> Option<String> {
        self.0
            .iter()
            .map(|part| match part {
                Part::Literal(text) => Some(text.as_str()),
                Part::Var(_) | Part::Status | Part::Command(_) => None,
            })
            .collect()
    }
}

/// A piece of a word.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Text as written (after quote removal).
    Literal(String),
    /// `$NAME`, `${NAME}` or a positional parameter `$1`.
    Var(String),
    /// `$?`: the exit status of the last command.
    Status,
    /// `$(LIST)`: the output of a command list run in a subshell, without its
    /// trailing newlines.
    Command(List),
}

/// An output redirection: `>F`, `>>F`, `2>F`, `2>&1`.
#[derive(Debug, Clone, PartialEq)]
pub struct Redirect {
    /// The redirected descriptor: 1 (stdout) or 2 (stderr).
    pub fd: u8,
    /// Where it goes.
    pub target: RedirectTarget,
}

/// The target of a redirection.
#[derive(Debug, Clone, PartialEq)]
pub enum RedirectTarget {
    /// A file, truncated (`>`) or appended to (`>>`).
    File {
        /// The file name.
        path: Word,
        /// `>>`.
        append: bool,
    },
    /// Another descriptor (`>&1`, `>&2`).
    Fd(u8),
}
