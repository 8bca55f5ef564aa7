//! The words of Go's `encoding/json` for a body that is not JSON: kube-apiserver passes its
//! decoder's errors on to clients (`invalid character 'n' looking for beginning of object
//! key string`), so the double finds the first error the way Go's scanner does and says it
//! the same way.

/// Go's syntax error for `data`, or `None` when `data` is one valid JSON value.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut s = Scanner { data, pos: 0 };
    s.space();
    if let Err(e) = s.value("looking for beginning of value") {
        return Some(e);
    }
    s.space();
    s.peek().map(|c| invalid(c, "after top-level value"))
}

/// `invalid character 'c' <context>`.
fn invalid(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

/// Go's `quoteChar`: the byte as a rune, quoted as `strconv.Quote` would.
fn quote_char(c: u8) -> String {
    let inner = match c {
        b'\'' => "\\'".to_owned(),
        b'"' => "\"".to_owned(),
        b'\\' => "\\\\".to_owned(),
        0x07 => "\\a".to_owned(),
        0x08 => "\\b".to_owned(),
        0x0c => "\\f".to_owned(),
        b'\n' => "\\n".to_owned(),
        b'\r' => "\\r".to_owned(),
        b'\t' => "\\t".to_owned(),
        0x0b => "\\v".to_owned(),
        c if c < 0x20 || c == 0x7f => format!("\\x{c:02x}"),
        c if (0x80..0xa0).contains(&c) || c == 0xad => format!("\\u{:04x}", u32::from(c)),
        c => char::from(c).to_string(),
    };
    format!("'{inner}'")
}

const END: &str = "unexpected end of JSON input";

struct Scanner<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    fn next(&mut self) -> Result<u8, String> {
        let c = self.peek().ok_or_else(|| END.to_owned())?;
        self.pos += 1;
        Ok(c)
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn value(&mut self, context: &str) -> Result<(), String> {
        match self.next()? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b'-' => self.number(true),
            b'0'..=b'9' => {
                self.pos -= 1;
                self.number(false)
            }
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            c => Err(invalid(c, context)),
        }
    }

    fn object(&mut self) -> Result<(), String> {
        self.space();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            match self.next()? {
                b'"' => self.string()?,
                c => return Err(invalid(c, "looking for beginning of object key string")),
            }
            self.space();
            match self.next()? {
                b':' => {}
                c => return Err(invalid(c, "after object key")),
            }
            self.space();
            self.value("looking for beginning of value")?;
            self.space();
            match self.next()? {
                b',' => self.space(),
                b'}' => return Ok(()),
                c => return Err(invalid(c, "after object key:value pair")),
            }
        }
    }

    fn array(&mut self) -> Result<(), String> {
        self.space();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.value("looking for beginning of value")?;
            self.space();
            match self.next()? {
                b',' => self.space(),
                b']' => return Ok(()),
                c => return Err(invalid(c, "after array element")),
            }
        }
    }

    fn string(&mut self) -> Result<(), String> {
        loop {
            match self.next()? {
                b'"' => return Ok(()),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        for _ in 0..4 {
                            let c = self.next()?;
                            if !c.is_ascii_hexdigit() {
                                return Err(invalid(c, "in \\u hexadecimal character escape"));
                            }
                        }
                    }
                    c => return Err(invalid(c, "in string escape code")),
                },
                c if c < 0x20 => return Err(invalid(c, "in string literal")),
                _ => {}
            }
        }
    }

    fn number(&mut self, negative: bool) -> Result<(), String> {
        if negative {
            match self.next()? {
                b'0'..=b'9' => self.pos -= 1,
                c => return Err(invalid(c, "in numeric literal")),
            }
        }
        if self.next()? == b'0' {
            // A leading zero is followed by nothing but a fraction or exponent.
        } else {
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            match self.next()? {
                b'0'..=b'9' => {}
                c => return Err(invalid(c, "after decimal point in numeric literal")),
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            match self.next()? {
                b'0'..=b'9' => {}
                c => return Err(invalid(c, "in exponent of numeric literal")),
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        Ok(())
    }

    fn literal(&mut self, word: &str) -> Result<(), String> {
        for expected in word.bytes().skip(1) {
            let c = self.next()?;
            if c != expected {
                return Err(invalid(
                    c,
                    &format!("in literal {word} (expecting {})", quote_char(expected)),
                ));
            }
        }
        Ok(())
    }
}

/// The JSON kind of a value as Go's unmarshal errors name it (`cannot unmarshal object …`).
pub fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Object(_) => "object",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Null => "null",
    }
}

/// `summarizeData`: what kube-apiserver quotes of a body it could not decode — up to 30
/// bytes of a body that starts like an object, else up to 30 bytes in hex.
pub fn summarize(data: &[u8]) -> String {
    const MAX: usize = 30;
    let more = if data.len() > MAX { " ..." } else { "" };
    let head = &data[..data.len().min(MAX)];
    match data.first() {
        None => "<empty>".to_owned(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_gos() {
        let e = |s: &str| syntax_error(s.as_bytes());
        assert_eq!(e(r#"{"a": 1}"#), None);
        assert_eq!(e(" [1, -2.5e3, true, null, \"x\\n\"] "), None);
        assert_eq!(
            e("{not json").as_deref(),
            Some("invalid character 'n' looking for beginning of object key string")
        );
        assert_eq!(
            e("{bad").as_deref(),
            Some("invalid character 'b' looking for beginning of object key string")
        );
        assert_eq!(
            e(r#"{"a" 1}"#).as_deref(),
            Some("invalid character '1' after object key")
        );
        assert_eq!(
            e(r#"{"a": 1 "b"}"#).as_deref(),
            Some("invalid character '\"' after object key:value pair")
        );
        assert_eq!(
            e(r#"{"a": tru}"#).as_deref(),
            Some("invalid character '}' in literal true (expecting 'e')")
        );
        assert_eq!(e(r#"{"a":"#).as_deref(), Some(END));
        assert_eq!(
            e("{} x").as_deref(),
            Some("invalid character 'x' after top-level value")
        );
        assert_eq!(
            syntax_error(&[0x9e]).as_deref(),
            Some("invalid character '\\u009e' looking for beginning of value")
        );
        assert_eq!(summarize(b"{not json"), "{not json");
        assert_eq!(summarize(b"abc"), "616263");
    }
}
