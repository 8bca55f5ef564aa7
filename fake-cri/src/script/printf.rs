//! `printf FORMAT [ARGUMENT…]` as busybox's: `%s %b %c %d %i %u %x %X %o %%`
//! with flags (`-+ 0#`), width and precision; the format's escapes; the
//! format reused while arguments remain. Also the escapes of `echo -e`.

use super::arith::number;
use super::shell::{Shell, Stream};

impl Shell<'_> {
    pub(super) fn printf(&mut self, args: &[String]) -> i32 {
        let Some((format, mut rest)) = args.split_first() else {
            self.emit(Stream::Stderr, "sh: usage: printf FORMAT [ARGUMENT...]\n");
            return 2;
        };
        let mut out = String::new();
        let mut status = 0;
        loop {
            let before = rest.len();
            match self.format_once(format, &mut rest, &mut out, &mut status) {
                Ok(true) => break,
                Ok(false) => {}
                Err(message) => {
                    self.emit(Stream::Stdout, &out);
                    self.emit(Stream::Stderr, &format!("sh: {message}\n"));
                    return 1;
                }
            }
            // Reused only while it takes arguments and some remain.
            if rest.is_empty() || rest.len() == before {
                break;
            }
        }
        self.emit(Stream::Stdout, &out);
        status
    }

    /// One pass over the format; true when `\c` stopped the output.
    fn format_once(
        &mut self,
        format: &str,
        rest: &mut &[String],
        out: &mut String,
        status: &mut i32,
    ) -> Result<bool, String> {
        let chars: Vec<char> = format.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => {
                    let (text, used, stop) = escape(&chars[i + 1..], false);
                    out.push_str(&text);
                    if stop {
                        return Ok(true);
                    }
                    i += 1 + used;
                }
                '%' => {
                    let start = i;
                    i += 1;
                    let mut flags = String::new();
                    while i < chars.len() && "-+ 0#".contains(chars[i]) {
                        flags.push(chars[i]);
                        i += 1;
                    }
                    let mut width = String::new();
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        width.push(chars[i]);
                        i += 1;
                    }
                    let mut precision = None;
                    if chars.get(i) == Some(&'.') {
                        i += 1;
                        let mut digits = String::new();
                        while i < chars.len() && chars[i].is_ascii_digit() {
                            digits.push(chars[i]);
                            i += 1;
                        }
                        precision = Some(digits.parse::<usize>().unwrap_or(0));
                    }
                    let Some(&conversion) = chars.get(i) else {
                        let spec: String = chars[start..].iter().collect();
                        return Err(format!("{spec}: invalid format"));
                    };
                    i += 1;
                    let width = width.parse::<usize>().unwrap_or(0);
                    let left = flags.contains('-');
                    let text = match conversion {
                        '%' => {
                            out.push('%');
                            continue;
                        }
                        's' | 'b' | 'c' => {
                            let arg = next(rest);
                            let mut text = match conversion {
                                'b' => {
                                    let (text, stop) = escapes(&arg, true);
                                    if stop {
                                        out.push_str(&text);
                                        return Ok(true);
                                    }
                                    text
                                }
                                'c' => arg.chars().take(1).collect(),
                                _ => arg,
                            };
                            if let Some(p) = precision {
                                text = text.chars().take(p).collect();
                            }
                            pad(text, width, left, false)
                        }
                        'd' | 'i' | 'u' | 'x' | 'X' | 'o' => {
                            let arg = next(rest);
                            let value = match integer(&arg) {
                                Some(value) => value,
                                None => {
                                    // busybox says so, prints 0 and goes on; status 1.
                                    self.emit(Stream::Stdout, out);
                                    out.clear();
                                    self.emit(
                                        Stream::Stderr,
                                        &format!("sh: invalid number '{arg}'\n"),
                                    );
                                    *status = 1;
                                    0
                                }
                            };
                            let mut digits = match conversion {
                                'x' => format!("{value:x}"),
                                'X' => format!("{value:X}"),
                                'o' => format!("{value:o}"),
                                'u' => format!("{}", value as u64),
                                _ => value.unsigned_abs().to_string(),
                            };
                            if let Some(p) = precision
                                && digits.len() < p
                            {
                                digits = format!("{}{digits}", "0".repeat(p - digits.len()));
                            }
                            if flags.contains('#') && value != 0 {
                                match conversion {
                                    'x' => digits = format!("0x{digits}"),
                                    'X' => digits = format!("0X{digits}"),
                                    'o' => digits = format!("0{digits}"),
                                    _ => {}
                                }
                            }
                            let sign = match conversion {
                                'd' | 'i' if value < 0 => "-",
                                'd' | 'i' if flags.contains('+') => "+",
                                'd' | 'i' if flags.contains(' ') => " ",
                                _ => "",
                            };
                            let zero = flags.contains('0') && !left && precision.is_none();
                            if zero && digits.len() + sign.len() < width {
                                let fill = "0".repeat(width - digits.len() - sign.len());
                                format!("{sign}{fill}{digits}")
                            } else {
                                pad(format!("{sign}{digits}"), width, left, false)
                            }
                        }
                        other => {
                            let spec: String = chars[start..i].iter().collect();
                            let _ = other;
                            return Err(format!("{spec}: invalid format"));
                        }
                    };
                    out.push_str(&text);
                }
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        Ok(false)
    }
}

fn next(rest: &mut &[String]) -> String {
    match rest.split_first() {
        Some((first, tail)) => {
            *rest = tail;
            first.clone()
        }
        None => String::new(),
    }
}

/// A `printf` integer argument: a number, or `'c` / `"c` (the character's code).
fn integer(arg: &str) -> Option<i64> {
    if let Some(c) = arg
        .strip_prefix('\'')
        .or_else(|| arg.strip_prefix('"'))
        .and_then(|rest| rest.chars().next())
    {
        return Some(i64::from(u32::from(c)));
    }
    number(arg)
}

fn pad(text: String, width: usize, left: bool, _zero: bool) -> String {
    let len = text.chars().count();
    if len >= width {
        text
    } else if left {
        format!("{text}{}", " ".repeat(width - len))
    } else {
        format!("{}{text}", " ".repeat(width - len))
    }
}

/// Expands the backslash escapes of `text` (`echo -e`, `printf %b`);
/// true when `\c` ends the output there.
pub(super) fn escapes(text: &str, zero_octal: bool) -> (String, bool) {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' {
            let (expanded, used, stop) = escape(&chars[i + 1..], zero_octal);
            out.push_str(&expanded);
            if stop {
                return (out, true);
            }
            i += 1 + used;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    (out, false)
}

/// One escape after its backslash: the text, how many characters it used,
/// and whether it is `\c`. `zero_octal`: octal escapes are `\0NNN` (echo,
/// `%b`) rather than `\NNN` (a printf format).
fn escape(rest: &[char], zero_octal: bool) -> (String, usize, bool) {
    let Some(&c) = rest.first() else {
        return ("\\".to_owned(), 0, false);
    };
    let simple = match c {
        'n' => Some('\n'),
        't' => Some('\t'),
        'r' => Some('\r'),
        'a' => Some('\x07'),
        'b' => Some('\x08'),
        'f' => Some('\x0c'),
        'v' => Some('\x0b'),
        'e' => Some('\x1b'),
        '\\' => Some('\\'),
        '"' if !zero_octal => Some('"'),
        _ => None,
    };
    if let Some(s) = simple {
        return (s.to_string(), 1, false);
    }
    match c {
        'c' => (String::new(), 1, true),
        'x' => {
            let digits: String = rest[1..]
                .iter()
                .take(2)
                .take_while(|c| c.is_ascii_hexdigit())
                .collect();
            if digits.is_empty() {
                return ("\\x".to_owned(), 1, false);
            }
            let value = u32::from_str_radix(&digits, 16).unwrap_or(0);
            (byte_char(value), 1 + digits.len(), false)
        }
        '0'..='7' => {
            let (skip, max) = if zero_octal && c == '0' {
                (1, 3)
            } else {
                (0, 3)
            };
            if zero_octal && c != '0' {
                // `\1` without the leading 0 is not an escape for echo.
                return (format!("\\{c}"), 1, false);
            }
            let digits: String = rest[skip..]
                .iter()
                .take(max)
                .take_while(|c| ('0'..='7').contains(*c))
                .collect();
            let value = u32::from_str_radix(&digits, 8).unwrap_or(0);
            (byte_char(value), skip + digits.len(), false)
        }
        other => (format!("\\{other}"), 1, false),
    }
}

fn byte_char(value: u32) -> String {
    char::from_u32(value & 0xff).map_or_else(String::new, |c| c.to_string())
}
