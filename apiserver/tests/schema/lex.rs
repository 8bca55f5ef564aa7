//! Go's tokens, as far as declarations need them: identifiers, strings (struct tags),
//! brackets, and the semicolons Go inserts at line ends, each token with the comment
//! block right above it (where gengo finds a declaration's `// +` markers).

/// A token, with the comment block right above it (its doc comment, `//` stripped).
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: Kind,
    pub line: usize,
    pub doc: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// An identifier or keyword.
    Ident(String),
    /// A string literal, unquoted (struct tags are raw strings, so escapes barely matter).
    Str(String),
    /// A number or rune literal: never needed, only skipped.
    Literal,
    /// An explicit `;` or one Go inserts at the end of a line.
    Semi,
    /// Any other punctuation, one character at a time (`++` and `--` are all that the
    /// semicolon rule needs of longer operators).
    Punct(char),
    IncDec,
}

/// Splits `src` into tokens, inserting semicolons as Go does and keeping each token's doc
/// comment: the `//` lines right above it. A comment after code on its line belongs to
/// that code, not to what follows, and a blank line ends a comment block.
pub fn lex(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let (mut i, mut line) = (0, 1);
    let mut tokens: Vec<Token> = Vec::new();
    let mut block: Vec<String> = Vec::new();
    let mut block_end = 0; // the line the comment block's last line is on
    let mut token_line = 0; // the line of the last token
    let ends_statement = |t: Option<&Token>| {
        matches!(
            t.map(|t| &t.kind),
            Some(
                Kind::Ident(_)
                    | Kind::Str(_)
                    | Kind::Literal
                    | Kind::IncDec
                    | Kind::Punct(')' | ']' | '}')
            )
        )
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            if ends_statement(tokens.last()) {
                tokens.push(Token {
                    kind: Kind::Semi,
                    line,
                    doc: vec![],
                });
            }
            line += 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && matches!(next, Some('/' | '*')) {
            let start = i;
            let text = if next == Some('/') {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                chars[start + 2..i].iter().collect::<String>()
            } else {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
                i += 2;
                String::new()
            };
            if token_line != line {
                if block_end + 1 < line {
                    block.clear();
                }
                block.push(text.strip_prefix(' ').unwrap_or(&text).to_owned());
                block_end = line;
            }
            continue;
        }
        let doc = if block_end + 1 == line {
            std::mem::take(&mut block)
        } else {
            block.clear();
            vec![]
        };
        let kind = if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            Kind::Ident(chars[start..i].iter().collect())
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            Kind::Literal
        } else if c == '"' || c == '`' || c == '\'' {
            let start = i + 1;
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' && c != '`' && i + 1 < chars.len() {
                    i += 1;
                }
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            let text: String = chars[start..i.min(chars.len())].iter().collect();
            i += 1;
            match c {
                '\'' => Kind::Literal,
                '`' => Kind::Str(text),
                _ => Kind::Str(text.replace("\\\"", "\"").replace("\\\\", "\\")),
            }
        } else if (c == '+' || c == '-') && next == Some(c) {
            i += 2;
            Kind::IncDec
        } else {
            i += 1;
            Kind::Punct(c)
        };
        token_line = line;
        tokens.push(Token { kind, line, doc });
    }
    tokens
}
