//! busybox's text applets that one-line scripts use: `seq`, `wc`, `head`,
//! `tr`, `cut`, `sort`, `grep`, `basename`, `dirname`, each in the forms
//! listed in the README, with busybox's output and messages. An option
//! outside those exits 2 with a message naming fake-cri.

use super::forms::Refused;
use super::shell::{Shell, Stream};

/// Option letters with their values, and operands.
type Parsed = (Vec<(char, String)>, Vec<String>);

/// Splits `args` into option letters (with their values, for the letters in
/// `valued`) and operands; `Err` names an option not in `allowed`.
fn options(name: &str, args: &[String], allowed: &str, valued: &str) -> Result<Parsed, Refused> {
    let mut opts = Vec::new();
    let mut operands = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            operands.extend(rest.cloned());
            break;
        }
        match arg.strip_prefix('-') {
            // `head -5` is `head -n 5`.
            Some(digits)
                if name == "head"
                    && !digits.is_empty()
                    && digits.chars().all(|c| c.is_ascii_digit()) =>
            {
                opts.push(('n', digits.to_owned()));
            }
            // `seq -1 1`: a negative number.
            Some(letters) if name == "seq" && letters.starts_with(|c: char| c.is_ascii_digit()) => {
                operands.push(arg.clone());
            }
            Some(letters) if !letters.is_empty() => {
                let chars: Vec<char> = letters.chars().collect();
                for (i, c) in chars.iter().enumerate() {
                    if !allowed.contains(*c) {
                        return Err(Refused::new(format!(
                            "{name}: option -{c} is not interpreted by fake-cri (only -{})",
                            allowed
                                .chars()
                                .map(String::from)
                                .collect::<Vec<_>>()
                                .join(" -")
                        )));
                    }
                    if valued.contains(*c) {
                        let value: String = chars[i + 1..].iter().collect();
                        let value = if value.is_empty() {
                            rest.next().cloned().ok_or_else(|| {
                                Refused::new(format!(
                                    "{name}: option requires an argument -- '{c}'"
                                ))
                            })?
                        } else {
                            value
                        };
                        opts.push((*c, value));
                        break;
                    }
                    opts.push((*c, String::new()));
                }
            }
            _ => operands.push(arg.clone()),
        }
    }
    Ok((opts, operands))
}

fn has(opts: &[(char, String)], c: char) -> bool {
    opts.iter().any(|(o, _)| *o == c)
}

fn value(opts: &[(char, String)], c: char) -> Option<&str> {
    opts.iter()
        .rev()
        .find(|(o, _)| *o == c)
        .map(|(_, v)| v.as_str())
}

impl Shell<'_> {
    /// Runs a text applet; `None` if `name` is not one.
    pub(super) async fn text_applet(&mut self, name: &str, args: &[String]) -> Option<i32> {
        let parsed = match name {
            "seq" => options(name, args, "", ""),
            "wc" => options(name, args, "lwc", ""),
            "head" => options(name, args, "n", "n"),
            "tr" => options(name, args, "d", ""),
            "cut" => options(name, args, "dfcs", "dfc"),
            "sort" => options(name, args, "nru", ""),
            "grep" => options(name, args, "qvcinxoEFe", "e"),
            "basename" | "dirname" => options(name, args, "", ""),
            _ => return None,
        };
        let (opts, operands) = match parsed {
            Ok(parsed) => parsed,
            Err(message) => {
                self.emit(Stream::Stderr, &format!("{message}\n"));
                return Some(2);
            }
        };
        Some(match name {
            "seq" => self.seq(&operands),
            "basename" | "dirname" => self.path_part(name, &operands),
            "tr" => self.tr(&opts, &operands).await,
            "grep" => self.grep(&opts, operands).await,
            _ => {
                let (inputs, status) = self.inputs(name, &operands).await;
                let code = match name {
                    "wc" => self.wc(&opts, &inputs),
                    "head" => self.head(&opts, &inputs),
                    "cut" => self.cut(&opts, &inputs),
                    _ => self.sort(&opts, &inputs),
                };
                if status != 0 { status } else { code }
            }
        })
    }

    /// The files' contents (standard input without files or for `-`), with
    /// their names; a missing file prints busybox's message (status 1).
    async fn inputs(&mut self, name: &str, files: &[String]) -> (Vec<(String, String)>, i32) {
        let mut inputs = Vec::new();
        let mut status = 0;
        if files.is_empty() {
            let data = self.read_all().await;
            inputs.push((String::new(), String::from_utf8_lossy(&data).into_owned()));
        }
        for file in files {
            if file == "-" {
                let data = self.read_all().await;
                inputs.push((file.clone(), String::from_utf8_lossy(&data).into_owned()));
                continue;
            }
            match self.context.files.read(file) {
                Ok(data) => {
                    inputs.push((file.clone(), String::from_utf8_lossy(&data).into_owned()))
                }
                Err(error) => {
                    self.emit(Stream::Stderr, &format!("{name}: {file}: {error}\n"));
                    status = 1;
                }
            }
        }
        (inputs, status)
    }

    fn seq(&mut self, operands: &[String]) -> i32 {
        let numbers: Option<Vec<i64>> = operands.iter().map(|o| o.parse().ok()).collect();
        let (first, step, last) = match numbers.as_deref() {
            Some([last]) => (1, 1, *last),
            Some([first, last]) => (*first, 1, *last),
            Some([first, step, last]) if *step != 0 => (*first, *step, *last),
            _ => {
                self.emit(
                    Stream::Stderr,
                    "seq: fake-cri interprets only integer 'seq [FIRST [INC]] LAST'\n",
                );
                return 1;
            }
        };
        let mut out = String::new();
        let mut n = first;
        while (step > 0 && n <= last) || (step < 0 && n >= last) {
            out.push_str(&format!("{n}\n"));
            n += step;
        }
        self.emit(Stream::Stdout, &out);
        0
    }

    fn path_part(&mut self, name: &str, operands: &[String]) -> i32 {
        let Some(path) = operands.first() else {
            self.emit(Stream::Stderr, &format!("{name}: missing operand\n"));
            return 1;
        };
        let trimmed = path.trim_end_matches('/');
        let text = if name == "basename" {
            let base = if trimmed.is_empty() && path.starts_with('/') {
                "/".to_owned()
            } else {
                trimmed.rsplit('/').next().unwrap_or_default().to_owned()
            };
            match operands.get(1) {
                Some(suffix) if base != *suffix => base
                    .strip_suffix(suffix.as_str())
                    .unwrap_or(&base)
                    .to_owned(),
                _ => base,
            }
        } else {
            match trimmed.rsplit_once('/') {
                None if path.starts_with('/') => "/".to_owned(),
                None => ".".to_owned(),
                Some((dir, _)) => {
                    let dir = dir.trim_end_matches('/');
                    if dir.is_empty() {
                        "/".to_owned()
                    } else {
                        dir.to_owned()
                    }
                }
            }
        };
        self.emit(Stream::Stdout, &format!("{text}\n"));
        0
    }

    fn wc(&mut self, opts: &[(char, String)], inputs: &[(String, String)]) -> i32 {
        let wanted: Vec<char> = if opts.is_empty() {
            vec!['l', 'w', 'c']
        } else {
            ['l', 'w', 'c']
                .into_iter()
                .filter(|c| has(opts, *c))
                .collect()
        };
        let mut out = String::new();
        let mut totals = [0usize; 3];
        for (name, text) in inputs {
            let counts = [
                text.matches('\n').count(),
                text.split_whitespace().count(),
                text.len(),
            ];
            for (total, count) in totals.iter_mut().zip(counts) {
                *total += count;
            }
            out.push_str(&wc_line(&wanted, counts, name));
        }
        if inputs.len() > 1 {
            out.push_str(&wc_line(&wanted, totals, "total"));
        }
        self.emit(Stream::Stdout, &out);
        0
    }

    fn head(&mut self, opts: &[(char, String)], inputs: &[(String, String)]) -> i32 {
        let n = match value(opts, 'n').map(str::parse::<usize>) {
            None => 10,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                let given = value(opts, 'n').unwrap_or_default();
                self.emit(Stream::Stderr, &format!("head: invalid number '{given}'\n"));
                return 1;
            }
        };
        let mut out = String::new();
        for (index, (name, text)) in inputs.iter().enumerate() {
            if inputs.len() > 1 {
                if index > 0 {
                    out.push('\n');
                }
                out.push_str(&format!("==> {name} <==\n"));
            }
            for line in text.split_inclusive('\n').take(n) {
                out.push_str(line);
            }
        }
        self.emit(Stream::Stdout, &out);
        0
    }

    async fn tr(&mut self, opts: &[(char, String)], operands: &[String]) -> i32 {
        let delete = has(opts, 'd');
        let (from, to) = match (operands, delete) {
            ([from], true) => (expand_set(from), Vec::new()),
            ([from, to], false) => (expand_set(from), expand_set(to)),
            _ => {
                self.emit(
                    Stream::Stderr,
                    "tr: fake-cri interprets only 'tr SET1 SET2' and 'tr -d SET1'\n",
                );
                return 2;
            }
        };
        let data = self.read_all().await;
        let text = String::from_utf8_lossy(&data);
        let mut out = String::new();
        for c in text.chars() {
            match from.iter().position(|f| *f == c) {
                Some(_) if delete => {}
                Some(i) => out.push(*to.get(i).or(to.last()).unwrap_or(&c)),
                None => out.push(c),
            }
        }
        self.emit(Stream::Stdout, &out);
        0
    }

    fn cut(&mut self, opts: &[(char, String)], inputs: &[(String, String)]) -> i32 {
        let (list, chars) = match (value(opts, 'f'), value(opts, 'c')) {
            (Some(list), None) => (list, false),
            (None, Some(list)) => (list, true),
            _ => {
                self.emit(
                    Stream::Stderr,
                    "cut: expected a list of bytes, characters, or fields\n",
                );
                return 1;
            }
        };
        let Some(ranges) = parse_ranges(list) else {
            self.emit(Stream::Stderr, &format!("cut: invalid list '{list}'\n"));
            return 1;
        };
        let delim = value(opts, 'd')
            .and_then(|d| d.chars().next())
            .unwrap_or('\t');
        let only_delimited = has(opts, 's');
        let mut out = String::new();
        for (_, text) in inputs {
            for line in text.lines() {
                if chars {
                    let cs: Vec<char> = line.chars().collect();
                    let picked: String = (1..=cs.len())
                        .filter(|i| in_ranges(&ranges, *i))
                        .map(|i| cs[i - 1])
                        .collect();
                    out.push_str(&picked);
                    out.push('\n');
                    continue;
                }
                if !line.contains(delim) {
                    if !only_delimited {
                        out.push_str(line);
                        out.push('\n');
                    }
                    continue;
                }
                let fields: Vec<&str> = line.split(delim).collect();
                let picked: Vec<&str> = (1..=fields.len())
                    .filter(|i| in_ranges(&ranges, *i))
                    .map(|i| fields[i - 1])
                    .collect();
                out.push_str(&picked.join(&delim.to_string()));
                out.push('\n');
            }
        }
        self.emit(Stream::Stdout, &out);
        0
    }

    fn sort(&mut self, opts: &[(char, String)], inputs: &[(String, String)]) -> i32 {
        let mut lines: Vec<&str> = inputs.iter().flat_map(|(_, t)| t.lines()).collect();
        if has(opts, 'n') {
            let key = |l: &str| -> i64 {
                let t = l.trim_start();
                let end = t
                    .char_indices()
                    .find(|(i, c)| !(c.is_ascii_digit() || (*i == 0 && *c == '-')))
                    .map_or(t.len(), |(i, _)| i);
                t[..end].parse().unwrap_or(0)
            };
            lines.sort_by(|a, b| key(a).cmp(&key(b)).then_with(|| a.cmp(b)));
        } else {
            lines.sort_unstable();
        }
        if has(opts, 'r') {
            lines.reverse();
        }
        if has(opts, 'u') {
            lines.dedup();
        }
        let mut out = String::new();
        for line in lines {
            out.push_str(line);
            out.push('\n');
        }
        self.emit(Stream::Stdout, &out);
        0
    }

    async fn grep(&mut self, opts: &[(char, String)], mut operands: Vec<String>) -> i32 {
        let pattern = match value(opts, 'e') {
            Some(p) => p.to_owned(),
            None if operands.is_empty() => {
                self.emit(
                    Stream::Stderr,
                    "grep: fake-cri needs 'grep [-qvcinxoEF] PATTERN [FILE]…'\n",
                );
                return 2;
            }
            None => operands.remove(0),
        };
        let source = if has(opts, 'F') {
            regex::escape(&pattern)
        } else if has(opts, 'E') {
            pattern.clone()
        } else {
            bre_to_regex(&pattern)
        };
        let source = if has(opts, 'x') {
            format!("^(?:{source})$")
        } else {
            source
        };
        let regex = match regex::RegexBuilder::new(&source)
            .case_insensitive(has(opts, 'i'))
            .build()
        {
            Ok(regex) => regex,
            Err(_) => {
                self.emit(Stream::Stderr, &format!("grep: bad regex '{pattern}'\n"));
                return 2;
            }
        };
        let (inputs, missing) = self.inputs("grep", &operands).await;
        let only = has(opts, 'o');
        let (invert, count, quiet, numbers) = (
            has(opts, 'v'),
            has(opts, 'c'),
            has(opts, 'q'),
            has(opts, 'n'),
        );
        let prefix = inputs.len() > 1;
        let mut found = false;
        let mut out = String::new();
        for (name, text) in &inputs {
            let mut matched = 0;
            for (index, line) in text.lines().enumerate() {
                if regex.is_match(line) == invert {
                    continue;
                }
                matched += 1;
                found = true;
                if quiet {
                    self.emit(Stream::Stdout, &out);
                    return 0;
                }
                if !count {
                    let lead = match (prefix, numbers) {
                        (true, true) => format!("{name}:{}:", index + 1),
                        (true, false) => format!("{name}:"),
                        (false, true) => format!("{}:", index + 1),
                        (false, false) => String::new(),
                    };
                    if only && !invert {
                        // `-o`: each non-empty match on its own line.
                        for found in regex.find_iter(line).filter(|m| !m.as_str().is_empty()) {
                            out.push_str(&format!("{lead}{}\n", found.as_str()));
                        }
                    } else {
                        out.push_str(&format!("{lead}{line}\n"));
                    }
                }
            }
            if count {
                if prefix {
                    out.push_str(&format!("{name}:"));
                }
                out.push_str(&format!("{matched}\n"));
            }
        }
        self.emit(Stream::Stdout, &out);
        // busybox: 2 when a file was missing (even with matches elsewhere).
        if missing != 0 { 2 } else { i32::from(!found) }
    }
}

/// One `wc` line: one count alone unpadded, several in columns of 9.
fn wc_line(wanted: &[char], counts: [usize; 3], name: &str) -> String {
    let values: Vec<usize> = wanted
        .iter()
        .map(|c| match c {
            'l' => counts[0],
            'w' => counts[1],
            _ => counts[2],
        })
        .collect();
    let mut line = if values.len() == 1 {
        values[0].to_string()
    } else {
        values
            .iter()
            .map(|v| format!("{v:>9}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if !name.is_empty() {
        line.push(' ');
        line.push_str(name);
    }
    line.push('\n');
    line
}

/// A `tr` set: characters, `a-z` ranges, `\n` `\t` `\\` escapes.
fn expand_set(set: &str) -> Vec<char> {
    let mut chars = Vec::new();
    let mut raw = set.chars().peekable();
    while let Some(c) = raw.next() {
        let c = if c == '\\' {
            match raw.next() {
                Some('n') => '\n',
                Some('t') => '\t',
                Some(other) => other,
                None => '\\',
            }
        } else {
            c
        };
        chars.push(c);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if i + 2 < chars.len() && chars[i + 1] == '-' && chars[i] <= chars[i + 2] {
            out.extend(chars[i]..=chars[i + 2]);
            i += 3;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// `cut`'s list: `N`, `N-M`, `N-`, `-M`, comma-separated.
fn parse_ranges(list: &str) -> Option<Vec<(usize, usize)>> {
    list.split(',')
        .map(|part| match part.split_once('-') {
            None => part.parse().ok().filter(|n| *n > 0).map(|n| (n, n)),
            Some((a, b)) => {
                let a = if a.is_empty() { 1 } else { a.parse().ok()? };
                let b = if b.is_empty() {
                    usize::MAX
                } else {
                    b.parse().ok()?
                };
                (a > 0 && a <= b).then_some((a, b))
            }
        })
        .collect()
}

fn in_ranges(ranges: &[(usize, usize)], i: usize) -> bool {
    ranges.iter().any(|(a, b)| *a <= i && i <= *b)
}

/// A POSIX basic regular expression in the `regex` crate's syntax: `\( \)
/// \{ \} \| \+ \?` are the operators, `( ) { } | + ?` literal.
pub(super) fn bre_to_regex(bre: &str) -> String {
    let mut out = String::new();
    let mut chars = bre.chars().peekable();
    let mut in_bracket = false;
    let mut at_start = true;
    while let Some(c) = chars.next() {
        if in_bracket {
            out.push(c);
            if c == ']' {
                in_bracket = false;
            }
            continue;
        }
        match c {
            '\\' => match chars.next() {
                Some(op @ ('(' | ')' | '{' | '}' | '|' | '+' | '?')) => out.push(op),
                Some(other) => out.push_str(&regex::escape(&other.to_string())),
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '{' | '}' | '|' | '+' | '?' => {
                out.push('\\');
                out.push(c);
            }
            '*' if at_start => out.push_str("\\*"),
            '[' => {
                in_bracket = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            _ => out.push(c),
        }
        at_start = c == '^' && out.len() == 1;
    }
    out
}
