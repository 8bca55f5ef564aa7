//! Arithmetic expansion, `$((…))`: signed 64-bit integers with C's
//! operators and precedence (as busybox ash), variables by name, and the
//! assignment operators. Parsed into a tree first, so `&&`, `||` and `?:`
//! evaluate (and assign) only the side they take.

/// Why an expression cannot be evaluated, worded as busybox does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ArithError {
    /// Not an expression.
    #[error("arithmetic syntax error")]
    Syntax,
    /// `/ 0` or `% 0`.
    #[error("divide by zero")]
    DivideByZero,
}

/// The variables an expression reads and assigns.
pub(super) trait Vars {
    /// A variable's value (`None`: unset).
    fn get(&self, name: &str) -> Option<String>;
    /// Assigns a variable.
    fn set(&mut self, name: &str, value: i64);
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(i64),
    Name(String),
    Op(&'static str),
}

/// Operators, longest first so that `<<=` is read before `<<` and `<`.
const OPS: &[&str] = &[
    "<<=", ">>=", "**", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=",
    "*=", "/=", "%=", "&=", "^=", "|=", "+", "-", "*", "/", "%", "<", ">", "&", "^", "|", "!", "~",
    "?", ":", "=", "(", ")",
];

fn tokenize(text: &str) -> Result<Vec<Token>, ArithError> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let literal: String = chars[start..i].iter().collect();
            tokens.push(Token::Num(number(&literal).ok_or(ArithError::Syntax)?));
        } else if c == '_' || c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i] == '_' || chars[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            tokens.push(Token::Name(chars[start..i].iter().collect()));
        } else {
            let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
            let op = OPS
                .iter()
                .find(|op| rest.starts_with(*op))
                .ok_or(ArithError::Syntax)?;
            i += op.len();
            tokens.push(Token::Op(op));
        }
    }
    Ok(tokens)
}

/// A number as C writes it: decimal, `0x` hexadecimal, `0` octal.
pub(super) fn number(text: &str) -> Option<i64> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let value = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        u64::from_str_radix(hex, 16).ok()? as i64
    } else if digits.len() > 1 && digits.starts_with('0') {
        u64::from_str_radix(&digits[1..], 8).ok()? as i64
    } else {
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        digits.parse::<u64>().ok()? as i64
    };
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

#[derive(Debug, Clone)]
enum Expr {
    Num(i64),
    Var(String),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `NAME OP= EXPR` (`=` for a plain assignment).
    Assign(String, &'static str, Box<Expr>),
    /// `++NAME`, `NAME--`…: the name, +1/-1, and whether the old value is the result.
    Step(String, i64, bool),
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

/// Binding power of a binary operator (higher binds tighter).
fn precedence(op: &str) -> Option<u8> {
    Some(match op {
        "||" => 1,
        "&&" => 2,
        "|" => 3,
        "^" => 4,
        "&" => 5,
        "==" | "!=" => 6,
        "<" | "<=" | ">" | ">=" => 7,
        "<<" | ">>" => 8,
        "+" | "-" => 9,
        "*" | "/" | "%" => 10,
        "**" => 11,
        _ => return None,
    })
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn peek_op(&self) -> Option<&'static str> {
        match self.peek() {
            Some(Token::Op(op)) => Some(op),
            _ => None,
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), ArithError> {
        if self.peek_op() == Some(op) {
            self.pos += 1;
            Ok(())
        } else {
            Err(ArithError::Syntax)
        }
    }

    /// An assignment or a conditional expression.
    fn assignment(&mut self) -> Result<Expr, ArithError> {
        if let (Some(Token::Name(name)), Some(Token::Op(op))) =
            (self.tokens.get(self.pos), self.tokens.get(self.pos + 1))
            && op.ends_with('=')
            && !matches!(*op, "==" | "!=" | "<=" | ">=")
        {
            let (name, op) = (name.clone(), *op);
            self.pos += 2;
            let value = self.assignment()?;
            return Ok(Expr::Assign(name, op, Box::new(value)));
        }
        self.conditional()
    }

    fn conditional(&mut self) -> Result<Expr, ArithError> {
        let condition = self.binary(1)?;
        if self.peek_op() != Some("?") {
            return Ok(condition);
        }
        self.pos += 1;
        let yes = self.assignment()?;
        self.expect(":")?;
        let no = self.assignment()?;
        Ok(Expr::Cond(Box::new(condition), Box::new(yes), Box::new(no)))
    }

    fn binary(&mut self, min: u8) -> Result<Expr, ArithError> {
        let mut left = self.unary()?;
        while let Some(op) = self.peek_op() {
            let Some(power) = precedence(op).filter(|p| *p >= min) else {
                break;
            };
            self.pos += 1;
            // `**` is right-associative, the others left.
            let next = if op == "**" { power } else { power + 1 };
            let right = self.binary(next)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ArithError> {
        match self.peek().cloned() {
            Some(Token::Op(op @ ("++" | "--"))) => {
                self.pos += 1;
                match self.peek().cloned() {
                    Some(Token::Name(name)) => {
                        self.pos += 1;
                        Ok(Expr::Step(name, if op == "++" { 1 } else { -1 }, false))
                    }
                    _ => Err(ArithError::Syntax),
                }
            }
            Some(Token::Op(op @ ("-" | "+" | "!" | "~"))) => {
                self.pos += 1;
                Ok(Expr::Unary(op, Box::new(self.unary()?)))
            }
            Some(Token::Op("(")) => {
                self.pos += 1;
                let inner = self.assignment()?;
                self.expect(")")?;
                Ok(inner)
            }
            Some(Token::Num(n)) => {
                self.pos += 1;
                Ok(Expr::Num(n))
            }
            Some(Token::Name(name)) => {
                self.pos += 1;
                match self.peek_op() {
                    Some(op @ ("++" | "--")) => {
                        self.pos += 1;
                        Ok(Expr::Step(name, if op == "++" { 1 } else { -1 }, true))
                    }
                    _ => Ok(Expr::Var(name)),
                }
            }
            _ => Err(ArithError::Syntax),
        }
    }
}

/// Evaluates an expression (already expanded: its `$x` are text).
pub(super) fn evaluate(text: &str, vars: &mut dyn Vars) -> Result<i64, ArithError> {
    let tokens = tokenize(text)?;
    if tokens.is_empty() {
        return Ok(0);
    }
    let mut parser = Parser { tokens, pos: 0 };
    let expr = parser.assignment()?;
    if parser.pos != parser.tokens.len() {
        return Err(ArithError::Syntax);
    }
    eval(&expr, vars)
}

fn value(name: &str, vars: &dyn Vars) -> Result<i64, ArithError> {
    match vars.get(name) {
        None => Ok(0),
        Some(text) if text.trim().is_empty() => Ok(0),
        Some(text) => number(&text).ok_or(ArithError::Syntax),
    }
}

fn binary(op: &str, a: i64, b: i64) -> Result<i64, ArithError> {
    Ok(match op {
        "+" => a.wrapping_add(b),
        "-" => a.wrapping_sub(b),
        "*" => a.wrapping_mul(b),
        "/" | "%" if b == 0 => return Err(ArithError::DivideByZero),
        "/" => a.wrapping_div(b),
        "%" => a.wrapping_rem(b),
        "**" => {
            if b < 0 {
                return Err(ArithError::Syntax);
            }
            a.wrapping_pow(u32::try_from(b).unwrap_or(u32::MAX))
        }
        "<<" => a.wrapping_shl(b as u32),
        ">>" => a.wrapping_shr(b as u32),
        "<" => i64::from(a < b),
        "<=" => i64::from(a <= b),
        ">" => i64::from(a > b),
        ">=" => i64::from(a >= b),
        "==" => i64::from(a == b),
        "!=" => i64::from(a != b),
        "&" => a & b,
        "^" => a ^ b,
        "|" => a | b,
        _ => return Err(ArithError::Syntax),
    })
}

fn eval(expr: &Expr, vars: &mut dyn Vars) -> Result<i64, ArithError> {
    Ok(match expr {
        Expr::Num(n) => *n,
        Expr::Var(name) => value(name, vars)?,
        Expr::Unary(op, inner) => {
            let v = eval(inner, vars)?;
            match *op {
                "-" => v.wrapping_neg(),
                "!" => i64::from(v == 0),
                "~" => !v,
                _ => v,
            }
        }
        Expr::Binary("&&", a, b) => i64::from(eval(a, vars)? != 0 && eval(b, vars)? != 0),
        Expr::Binary("||", a, b) => i64::from(eval(a, vars)? != 0 || eval(b, vars)? != 0),
        Expr::Binary(op, a, b) => {
            let a = eval(a, vars)?;
            let b = eval(b, vars)?;
            binary(op, a, b)?
        }
        Expr::Cond(c, yes, no) => {
            if eval(c, vars)? != 0 {
                eval(yes, vars)?
            } else {
                eval(no, vars)?
            }
        }
        Expr::Assign(name, op, inner) => {
            let v = eval(inner, vars)?;
            let v = match op.strip_suffix('=') {
                Some("") | None => v,
                Some(binop) => binary(binop, value(name, vars)?, v)?,
            };
            vars.set(name, v);
            v
        }
        Expr::Step(name, delta, post) => {
            let old = value(name, vars)?;
            let new = old.wrapping_add(*delta);
            vars.set(name, new);
            if *post { old } else { new }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    impl Vars for HashMap<String, String> {
        fn get(&self, name: &str) -> Option<String> {
            HashMap::get(self, name).cloned()
        }
        fn set(&mut self, name: &str, value: i64) {
            self.insert(name.to_owned(), value.to_string());
        }
    }

    fn eval_str(text: &str) -> Result<i64, ArithError> {
        let mut vars = HashMap::from([("x".to_owned(), "5".to_owned())]);
        evaluate(text, &mut vars)
    }

    #[test]
    fn precedence_and_operators() {
        assert_eq!(eval_str("1 + 2 * 3"), Ok(7));
        assert_eq!(eval_str("(1 + 2) * 3"), Ok(9));
        assert_eq!(eval_str("x * 2"), Ok(10));
        assert_eq!(eval_str("2 ** 3 ** 2"), Ok(512));
        assert_eq!(eval_str("7 % 3 == 1 && 1 || 0"), Ok(1));
        assert_eq!(eval_str("x > 3 ? 10 : 20"), Ok(10));
        assert_eq!(eval_str("x += 2"), Ok(7));
        assert_eq!(eval_str("-x + 0x10 + 010"), Ok(19));
        assert_eq!(eval_str("1 / 0"), Err(ArithError::DivideByZero));
        assert_eq!(eval_str("1 +"), Err(ArithError::Syntax));
    }
}
