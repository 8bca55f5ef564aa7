//! Just enough of Go to read the API types: the declarations of a package's files (its
//! `import`s, its `type`s with their doc comments, which methods a type has), struct fields
//! with their tags, and `// +` markers. Function bodies, constants and variables are
//! skipped whole, so nothing of Go's expression syntax is needed: statements end where Go
//! inserts its semicolons, and a declaration is everything up to the first one outside
//! brackets.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::lex::{Kind, Token, lex};

/// A Go type expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `Name` or `pkg.Name` (`pkg` is the file's name for an import).
    Named {
        pkg: Option<String>,
        name: String,
    },
    Ptr(Box<Expr>),
    Slice(Box<Expr>),
    Map(Box<Expr>, Box<Expr>),
    Struct(Vec<GoField>),
    /// What JSON cannot carry or the types never use: arrays, interfaces, funcs, chans,
    /// generics. Kept so that only a reachable one is an error.
    Other(String),
}

/// One field of a struct; `name` is `None` for an embedded one.
#[derive(Debug, Clone, PartialEq)]
pub struct GoField {
    pub name: Option<String>,
    pub ty: Expr,
    pub tag: String,
    pub doc: Vec<String>,
}

/// A `type` declaration.
#[derive(Debug, Clone)]
pub struct TypeDecl {
    pub name: String,
    pub ty: Expr,
    pub doc: Vec<String>,
}

/// What one file declares.
#[derive(Debug, Default)]
pub struct File {
    pub package: String,
    /// The name each import goes by in this file, and its path.
    pub imports: BTreeMap<String, String>,
    pub types: Vec<TypeDecl>,
    /// `(receiver type, method name)` of each method.
    pub methods: BTreeSet<(String, String)>,
}

/// Where parsing stopped, by line.
#[derive(Debug)]
pub struct Error {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The value of `key` in a struct tag, as `reflect.StructTag.Lookup` finds it.
pub fn tag_value<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = tag.trim_start();
    while !rest.is_empty() {
        let colon = rest.find(':')?;
        let (k, after) = (&rest[..colon], &rest[colon + 1..]);
        let body = after.strip_prefix('"')?;
        let end = body.find('"')?;
        if k == key {
            return Some(&body[..end]);
        }
        rest = body[end + 1..].trim_start();
    }
    None
}

/// The `// +name=value` markers of a doc comment, in order (`+optional` has value `""`).
pub fn markers(doc: &[String]) -> Vec<(&str, &str)> {
    doc.iter()
        .filter_map(|line| line.trim().strip_prefix('+'))
        .map(|m| m.split_once('=').unwrap_or((m, "")))
        .collect()
}

/// Whether a file is the code generators' (`// Code generated ... DO NOT EDIT.` above its
/// package clause) or for a build other than the default one (a `//go:build` line false
/// with no tags set): neither declares a type kube-apiserver encodes.
pub fn skipped(src: &str) -> bool {
    for line in src.lines().map(str::trim) {
        if line.starts_with("package ") {
            break;
        }
        if line.starts_with("// Code generated ") && line.ends_with(" DO NOT EDIT.") {
            return true;
        }
        if line
            .strip_prefix("//go:build ")
            .is_some_and(|expr| !build_constraint(expr))
        {
            return true;
        }
    }
    false
}

/// A `//go:build` expression with no tags set: `!tag` holds, `tag` does not.
fn build_constraint(expr: &str) -> bool {
    let spaced = expr
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace('!', " ! ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let mut pos = 0;
    or_expr(&words, &mut pos)
}

fn or_expr(w: &[&str], pos: &mut usize) -> bool {
    let mut value = and_expr(w, pos);
    while w.get(*pos) == Some(&"||") {
        *pos += 1;
        value |= and_expr(w, pos);
    }
    value
}

fn and_expr(w: &[&str], pos: &mut usize) -> bool {
    let mut value = unary(w, pos);
    while w.get(*pos) == Some(&"&&") {
        *pos += 1;
        value &= unary(w, pos);
    }
    value
}

fn unary(w: &[&str], pos: &mut usize) -> bool {
    let word = w.get(*pos).copied().unwrap_or("");
    *pos += 1;
    match word {
        "!" => !unary(w, pos),
        "(" => {
            let value = or_expr(w, pos);
            *pos += 1; // ")"
            value
        }
        _ => false,
    }
}

/// Parses the declarations of one Go file.
pub fn parse_file(src: &str) -> Result<File, Error> {
    let mut p = Parser {
        tokens: lex(src),
        pos: 0,
    };
    let mut file = File::default();
    while !p.at_end() {
        if p.eat(&Kind::Semi) {
            continue;
        }
        let doc = p.peek_doc();
        match p.ident().as_deref() {
            Some("package") => file.package = p.expect_ident()?,
            Some("import") => p.group(|p| p.import_spec(&mut file))?,
            Some("type") => {
                let grouped = p.is(&Kind::Punct('('));
                p.group(|p| {
                    let spec_doc = if grouped { p.peek_doc() } else { doc.clone() };
                    let decl = p.type_spec(spec_doc)?;
                    file.types.push(decl);
                    Ok(())
                })?;
            }
            Some("func") => {
                if let Some(method) = p.method_name() {
                    file.methods.insert(method);
                }
                p.skip_statement();
            }
            _ => p.skip_statement(),
        }
    }
    Ok(file)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn at_end(&self) -> bool {
        self.pos >= self.tokens.len()
    }

    fn peek(&self) -> Option<&Kind> {
        self.tokens.get(self.pos).map(|t| &t.kind)
    }

    fn peek_at(&self, ahead: usize) -> Option<&Kind> {
        self.tokens.get(self.pos + ahead).map(|t| &t.kind)
    }

    fn peek_doc(&self) -> Vec<String> {
        self.tokens
            .get(self.pos)
            .map(|t| t.doc.clone())
            .unwrap_or_default()
    }

    fn is(&self, kind: &Kind) -> bool {
        self.peek() == Some(kind)
    }

    fn eat(&mut self, kind: &Kind) -> bool {
        let found = self.is(kind);
        if found {
            self.pos += 1;
        }
        found
    }

    fn error(&self, message: impl Into<String>) -> Error {
        let line = self
            .tokens
            .get(self.pos.min(self.tokens.len().saturating_sub(1)))
            .map_or(0, |t| t.line);
        Error {
            line,
            message: message.into(),
        }
    }

    fn expect(&mut self, kind: Kind) -> Result<(), Error> {
        if self.eat(&kind) {
            Ok(())
        } else {
            Err(self.error(format!("expected {kind:?}, found {:?}", self.peek())))
        }
    }

    /// The identifier here, consumed; `None` (consuming nothing) if there is none.
    fn ident(&mut self) -> Option<String> {
        match self.peek() {
            Some(Kind::Ident(name)) => {
                let name = name.clone();
                self.pos += 1;
                Some(name)
            }
            _ => None,
        }
    }

    fn expect_ident(&mut self) -> Result<String, Error> {
        self.ident()
            .ok_or_else(|| self.error(format!("expected a name, found {:?}", self.peek())))
    }

    fn string(&mut self) -> Option<String> {
        match self.peek() {
            Some(Kind::Str(s)) => {
                let s = s.clone();
                self.pos += 1;
                Some(s)
            }
            _ => None,
        }
    }

    /// Skips this statement and the `;` that ends it.
    fn skip_statement(&mut self) {
        self.skip_to_end();
        self.eat(&Kind::Semi);
    }

    /// Skips to the `;` that ends this statement outside brackets (or to a `)` closing the
    /// group it is in).
    fn skip_to_end(&mut self) {
        let mut depth = 0usize;
        while let Some(kind) = self.peek() {
            match kind {
                Kind::Semi if depth == 0 => return,
                Kind::Punct(')') if depth == 0 => return,
                Kind::Punct('(' | '[' | '{') => depth += 1,
                Kind::Punct(')' | ']' | '}') => depth = depth.saturating_sub(1),
                _ => {}
            }
            self.pos += 1;
        }
    }

    /// `spec` once, or for each spec of a parenthesized group (`import (...)`, `type (...)`).
    fn group(&mut self, mut spec: impl FnMut(&mut Self) -> Result<(), Error>) -> Result<(), Error> {
        if !self.eat(&Kind::Punct('(')) {
            return spec(self);
        }
        loop {
            while self.eat(&Kind::Semi) {}
            if self.eat(&Kind::Punct(')')) {
                return Ok(());
            }
            if self.at_end() {
                return Err(self.error("unclosed group"));
            }
            spec(self)?;
        }
    }

    fn import_spec(&mut self, file: &mut File) -> Result<(), Error> {
        // `name "path"`, `_ "path"` (an identifier too) or `. "path"`.
        let alias = match self.eat(&Kind::Punct('.')) {
            true => Some(".".to_owned()),
            false => self.ident(),
        };
        let path = self
            .string()
            .ok_or_else(|| self.error("expected an import path"))?;
        // Without a name an import goes by its package's name, the last element of its
        // path for every package the API types import.
        let name = alias.unwrap_or_else(|| path.rsplit('/').next().unwrap_or(&path).to_owned());
        file.imports.insert(name, path);
        Ok(())
    }

    /// `Name Type` or `Name = Type`; a type this parser does not know is kept as
    /// [`Expr::Other`], so only using it is an error.
    fn type_spec(&mut self, doc: Vec<String>) -> Result<TypeDecl, Error> {
        let name = self.expect_ident()?;
        self.eat(&Kind::Punct('='));
        let start = self.pos;
        let ty = match self.peek() {
            // `Name[T any] ...`: a generic type.
            Some(Kind::Punct('[')) if matches!(self.peek_at(1), Some(Kind::Ident(_))) => None,
            _ => self.type_expr().ok(),
        };
        let ty = match ty {
            Some(ty) if matches!(self.peek(), Some(Kind::Semi | Kind::Punct(')')) | None) => ty,
            _ => {
                self.pos = start;
                self.skip_to_end();
                Expr::Other(format!("type {name} (not parsed)"))
            }
        };
        Ok(TypeDecl { name, ty, doc })
    }

    fn type_expr(&mut self) -> Result<Expr, Error> {
        match self.peek().cloned() {
            Some(Kind::Punct('*')) => {
                self.pos += 1;
                Ok(Expr::Ptr(Box::new(self.type_expr()?)))
            }
            Some(Kind::Punct('(')) => {
                self.pos += 1;
                let ty = self.type_expr()?;
                self.expect(Kind::Punct(')'))?;
                Ok(ty)
            }
            Some(Kind::Punct('[')) => {
                self.pos += 1;
                if self.eat(&Kind::Punct(']')) {
                    return Ok(Expr::Slice(Box::new(self.type_expr()?)));
                }
                while !self.eat(&Kind::Punct(']')) {
                    if self.at_end() {
                        return Err(self.error("unclosed array length"));
                    }
                    self.pos += 1;
                }
                let item = self.type_expr()?;
                Ok(Expr::Other(format!("array of {item:?}")))
            }
            Some(Kind::Ident(word)) => {
                self.pos += 1;
                match word.as_str() {
                    "map" => {
                        self.expect(Kind::Punct('['))?;
                        let key = self.type_expr()?;
                        self.expect(Kind::Punct(']'))?;
                        Ok(Expr::Map(Box::new(key), Box::new(self.type_expr()?)))
                    }
                    "struct" => self.struct_body(),
                    "interface" | "func" | "chan" => {
                        Err(self.error(format!("{word} types are not supported")))
                    }
                    _ if self.eat(&Kind::Punct('.')) => Ok(Expr::Named {
                        pkg: Some(word),
                        name: self.expect_ident()?,
                    }),
                    _ => Ok(Expr::Named {
                        pkg: None,
                        name: word,
                    }),
                }
            }
            other => Err(self.error(format!("expected a type, found {other:?}"))),
        }
    }

    fn struct_body(&mut self) -> Result<Expr, Error> {
        self.expect(Kind::Punct('{'))?;
        let mut fields = Vec::new();
        loop {
            while self.eat(&Kind::Semi) {}
            if self.eat(&Kind::Punct('}')) {
                return Ok(Expr::Struct(fields));
            }
            let doc = self.peek_doc();
            // `Type`, `pkg.Type` or `*Type`, maybe with a tag: an embedded field.
            let embedded = matches!(
                (self.peek(), self.peek_at(1)),
                (Some(Kind::Punct('*')), _)
                    | (
                        Some(Kind::Ident(_)),
                        Some(Kind::Punct('.' | '}') | Kind::Str(_) | Kind::Semi)
                    )
            );
            let mut names = Vec::new();
            if !embedded {
                names.push(self.expect_ident()?);
                while self.eat(&Kind::Punct(',')) {
                    names.push(self.expect_ident()?);
                }
            }
            let ty = self.type_expr()?;
            let tag = self.string().unwrap_or_default();
            if names.is_empty() {
                fields.push(GoField {
                    name: None,
                    ty,
                    tag,
                    doc,
                });
            } else {
                fields.extend(names.into_iter().map(|name| GoField {
                    name: Some(name),
                    ty: ty.clone(),
                    tag: tag.clone(),
                    doc: doc.clone(),
                }));
            }
            if !self.eat(&Kind::Semi) && !self.is(&Kind::Punct('}')) {
                return Err(self.error(format!(
                    "expected the end of a field, found {:?}",
                    self.peek()
                )));
            }
        }
    }

    /// After `func`: the receiver's type name and the method's name, for a method.
    fn method_name(&self) -> Option<(String, String)> {
        if self.peek() != Some(&Kind::Punct('(')) {
            return None;
        }
        let close =
            (self.pos..self.tokens.len()).find(|&i| self.tokens[i].kind == Kind::Punct(')'))?;
        let receiver = self.tokens[self.pos..close]
            .iter()
            .rev()
            .find_map(|t| match &t.kind {
                Kind::Ident(name) => Some(name.clone()),
                _ => None,
            })?;
        match &self.tokens.get(close + 1)?.kind {
            Kind::Ident(method) => Some((receiver, method.clone())),
            _ => None,
        }
    }
}
