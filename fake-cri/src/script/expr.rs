//! busybox's `expr`: integer arithmetic, comparisons, `&`, `|`, `STRING :
//! REGEX` (a basic regular expression anchored at the start) and `length`,
//! with its precedence, output and statuses (1 when the result is 0 or empty,
//! 2 for an error).

use super::shell::{Shell, Stream};
use super::text_applets::bre_to_regex;

/// Why an expression fails, worded as busybox does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ExprError {
    #[error("syntax error")]
    Syntax,
    #[error("too few arguments")]
    TooFew,
    #[error("non-numeric argument")]
    NonNumeric,
    #[error("division by zero")]
    DivideByZero,
}

/// A value: busybox keeps integers and strings apart.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i64),
    Str(String),
}

impl Value {
    fn text(&self) -> String {
        match self {
            Self::Int(n) => n.to_string(),
            Self::Str(s) => s.clone(),
        }
    }

    fn int(&self) -> Option<i64> {
        match self {
            Self::Int(n) => Some(*n),
            Self::Str(s) => s.parse().ok(),
        }
    }

    /// Null: 0 or the empty string (false, and exit 1).
    fn null(&self) -> bool {
        match self {
            Self::Int(n) => *n == 0,
            Self::Str(s) => s.is_empty() || s == "0",
        }
    }
}

struct Parser<'a> {
    args: &'a [String],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.args.get(self.pos).map(String::as_str)
    }

    fn take_if(&mut self, ops: &[&str]) -> Option<String> {
        let op = self.peek().filter(|op| ops.contains(op))?.to_owned();
        self.pos += 1;
        Some(op)
    }

    fn or(&mut self) -> Result<Value, ExprError> {
        let mut left = self.and()?;
        while self.take_if(&["|"]).is_some() {
            let right = self.and()?;
            if left.null() {
                left = if right.null() { Value::Int(0) } else { right };
            }
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Value, ExprError> {
        let mut left = self.compare()?;
        while self.take_if(&["&"]).is_some() {
            let right = self.compare()?;
            if left.null() || right.null() {
                left = Value::Int(0);
            }
        }
        Ok(left)
    }

    fn compare(&mut self) -> Result<Value, ExprError> {
        let mut left = self.sum()?;
        while let Some(op) = self.take_if(&["=", "==", "!=", "<", "<=", ">", ">="]) {
            let right = self.sum()?;
            let ordering = match (left.int(), right.int()) {
                (Some(a), Some(b)) => a.cmp(&b),
                _ => left.text().cmp(&right.text()),
            };
            let holds = match op.as_str() {
                "=" | "==" => ordering.is_eq(),
                "!=" => !ordering.is_eq(),
                "<" => ordering.is_lt(),
                "<=" => ordering.is_le(),
                ">" => ordering.is_gt(),
                _ => ordering.is_ge(),
            };
            left = Value::Int(i64::from(holds));
        }
        Ok(left)
    }

    fn sum(&mut self) -> Result<Value, ExprError> {
        let mut left = self.product()?;
        while let Some(op) = self.take_if(&["+", "-"]) {
            let right = self.product()?;
            let (a, b) = numbers(&left, &right)?;
            left = Value::Int(if op == "+" {
                a.wrapping_add(b)
            } else {
                a.wrapping_sub(b)
            });
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Value, ExprError> {
        let mut left = self.matching()?;
        while let Some(op) = self.take_if(&["*", "/", "%"]) {
            let right = self.matching()?;
            let (a, b) = numbers(&left, &right)?;
            left = Value::Int(match op.as_str() {
                "*" => a.wrapping_mul(b),
                _ if b == 0 => return Err(ExprError::DivideByZero),
                "/" => a.wrapping_div(b),
                _ => a.wrapping_rem(b),
            });
        }
        Ok(left)
    }

    fn matching(&mut self) -> Result<Value, ExprError> {
        let mut left = self.primary()?;
        while self.take_if(&[":"]).is_some() {
            let pattern = self.primary()?.text();
            let regex = regex::Regex::new(&format!("^(?:{})", bre_to_regex(&pattern)))
                .map_err(|_| ExprError::Syntax)?;
            let text = left.text();
            left = match regex.captures(&text) {
                Some(caps) if regex.captures_len() > 1 => {
                    Value::Str(caps.get(1).map_or("", |m| m.as_str()).to_owned())
                }
                Some(caps) => Value::Int(caps[0].chars().count() as i64),
                None if regex.captures_len() > 1 => Value::Str(String::new()),
                None => Value::Int(0),
            };
        }
        Ok(left)
    }

    fn primary(&mut self) -> Result<Value, ExprError> {
        let Some(token) = self.peek().map(str::to_owned) else {
            return Err(ExprError::Syntax);
        };
        self.pos += 1;
        match token.as_str() {
            "(" => {
                let value = self.or()?;
                self.take_if(&[")"]).ok_or(ExprError::Syntax)?;
                Ok(value)
            }
            "length" if self.peek().is_some() => {
                let value = self.primary()?;
                Ok(Value::Int(value.text().chars().count() as i64))
            }
            _ => Ok(match token.parse::<i64>() {
                Ok(n) => Value::Int(n),
                Err(_) => Value::Str(token),
            }),
        }
    }
}

fn numbers(left: &Value, right: &Value) -> Result<(i64, i64), ExprError> {
    match (left.int(), right.int()) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(ExprError::NonNumeric),
    }
}

fn evaluate(args: &[String]) -> Result<Value, ExprError> {
    if args.is_empty() {
        return Err(ExprError::TooFew);
    }
    let mut parser = Parser { args, pos: 0 };
    let value = parser.or()?;
    if parser.pos != args.len() {
        return Err(ExprError::Syntax);
    }
    Ok(value)
}

impl Shell<'_> {
    /// `expr EXPRESSION…`.
    pub(super) fn expr(&mut self, args: &[String]) -> i32 {
        match evaluate(args) {
            Ok(value) => {
                self.emit(Stream::Stdout, &format!("{}\n", value.text()));
                i32::from(value.null())
            }
            Err(error) => {
                self.emit(Stream::Stderr, &format!("expr: {error}\n"));
                2
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str) -> Result<String, ExprError> {
        let args: Vec<String> = text.split(' ').map(str::to_owned).collect();
        evaluate(&args).map(|v| v.text())
    }

    #[test]
    fn busybox_results() {
        assert_eq!(eval("1 + 2 * 3"), Ok("7".into()));
        assert_eq!(eval("abc : a\\(.\\)"), Ok("b".into()));
        assert_eq!(eval("abcd : .*"), Ok("4".into()));
        assert_eq!(eval("a < b"), Ok("1".into()));
        assert_eq!(eval("10 < 9"), Ok("0".into()));
        assert_eq!(eval("1 / 0"), Err(ExprError::DivideByZero));
        assert_eq!(eval("a + 1"), Err(ExprError::NonNumeric));
        assert_eq!(eval("1 +"), Err(ExprError::Syntax));
    }
}
