//! A parser for the Erlang terms of basho_bench config files (`file:consult`).
//!
//! A file is a sequence of terms, each ending in `.`; `%` starts a comment
//! that runs to the end of the line. Supported values: atoms (`max`,
//! `'quoted atom'`), integers (`42`, `-1`, `16#ff`), floats (`0.2`, `1.0e3`),
//! strings (`"..."`, Erlang char lists), binaries (`<<"abc">>`, `<<>>`,
//! `<<1,2,3>>`), tuples and lists. The elision `...` that documents use in
//! place of an address list (e.g. `{pb_ips, [ ... ]}.` in the Riak 2.9.1
//! volume-test config) is read as the atom `'...'`. Every error carries the
//! line (1-based) where it was found.

use std::fmt;

/// One Erlang term.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// An atom, unquoted (`max`) or quoted (`'a b'`).
    Atom(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string literal (a char list in Erlang).
    Str(String),
    /// A binary `<<...>>`.
    Bin(Vec<u8>),
    /// A tuple `{...}`.
    Tuple(Vec<Term>),
    /// A list `[...]`.
    List(Vec<Term>),
}

impl Term {
    /// The atom's name, if this is an atom.
    pub fn as_atom(&self) -> Option<&str> {
        match self {
            Term::Atom(a) => Some(a),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Term::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// A number (integer or float) as `f64`.
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Term::Int(i) => Some(*i as f64),
            Term::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// Text of a string, binary or atom (paths and names may be any of these).
    pub fn as_text(&self) -> Option<String> {
        match self {
            Term::Str(s) | Term::Atom(s) => Some(s.clone()),
            Term::Bin(b) => Some(String::from_utf8_lossy(b).into_owned()),
            // An Erlang string of integers, e.g. "" written as [].
            Term::List(items) if items.is_empty() => Some(String::new()),
            _ => None,
        }
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn join(f: &mut fmt::Formatter<'_>, items: &[Term]) -> fmt::Result {
            for (i, t) in items.iter().enumerate() {
                if i > 0 {
                    write!(f, ",")?;
                }
                write!(f, "{t}")?;
            }
            Ok(())
        }
        match self {
            Term::Atom(a) => {
                let plain = a.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && a.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '@');
                if plain {
                    write!(f, "{a}")
                } else {
                    write!(f, "'{}'", a.replace('\'', "\\'"))
                }
            }
            Term::Int(i) => write!(f, "{i}"),
            Term::Float(x) => write!(f, "{x:?}"),
            Term::Str(s) => write!(f, "{s:?}"),
            Term::Bin(b) => match std::str::from_utf8(b) {
                Ok(s) => write!(f, "<<{s:?}>>"),
                Err(_) => {
                    write!(f, "<<")?;
                    for (i, x) in b.iter().enumerate() {
                        if i > 0 {
                            write!(f, ",")?;
                        }
                        write!(f, "{x}")?;
                    }
                    write!(f, ">>")
                }
            },
            Term::Tuple(items) => {
                write!(f, "{{")?;
                join(f, items)?;
                write!(f, "}}")
            }
            Term::List(items) => {
                write!(f, "[")?;
                join(f, items)?;
                write!(f, "]")
            }
        }
    }
}

/// A syntax error at a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct SyntaxError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open(char),
    Close(char),
    Comma,
    Bar,
    Dot,
    BinOpen,
    BinClose,
    Term(Term),
}

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, SyntaxError> {
    Err(SyntaxError {
        line,
        message: message.into(),
    })
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str) -> Self {
        Lexer {
            chars: text.chars().peekable(),
            line: 1,
        }
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next();
        if c == Some('\n') {
            self.line += 1;
        }
        c
    }

    fn skip_space(&mut self) {
        while let Some(&c) = self.chars.peek() {
            if c == '%' {
                while let Some(c) = self.bump() {
                    if c == '\n' {
                        break;
                    }
                }
            } else if c.is_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
    }

    /// The next token and the line it starts on; `None` at end of input.
    fn next(&mut self) -> Result<Option<(Tok, usize)>, SyntaxError> {
        self.skip_space();
        let line = self.line;
        let Some(c) = self.bump() else {
            return Ok(None);
        };
        let tok = match c {
            '{' | '[' => Tok::Open(c),
            '}' | ']' => Tok::Close(c),
            ',' => Tok::Comma,
            '|' => Tok::Bar,
            '.' => {
                if self.chars.peek() == Some(&'.') {
                    self.bump();
                    if self.chars.peek() == Some(&'.') {
                        self.bump();
                        Tok::Term(Term::Atom("...".into()))
                    } else {
                        return err(line, "unexpected `..`");
                    }
                } else {
                    Tok::Dot
                }
            }
            '<' => {
                if self.chars.peek() == Some(&'<') {
                    self.bump();
                    Tok::BinOpen
                } else {
                    return err(line, "unexpected `<` (binaries are written <<...>>)");
                }
            }
            '>' => {
                if self.chars.peek() == Some(&'>') {
                    self.bump();
                    Tok::BinClose
                } else {
                    return err(line, "unexpected `>`");
                }
            }
            '"' => Tok::Term(Term::Str(self.quoted('"', line)?)),
            '\'' => Tok::Term(Term::Atom(self.quoted('\'', line)?)),
            '$' => match self.bump() {
                Some('\\') => {
                    let e = self.escape(line)?;
                    Tok::Term(Term::Int(e as i64))
                }
                Some(ch) => Tok::Term(Term::Int(ch as i64)),
                None => return err(line, "`$` at end of input"),
            },
            c if c.is_ascii_digit() || c == '-' || c == '+' => self.number(c, line)?,
            c if c.is_ascii_lowercase() => {
                let mut s = String::from(c);
                while let Some(&n) = self.chars.peek() {
                    if n.is_ascii_alphanumeric() || n == '_' || n == '@' {
                        s.push(n);
                        self.bump();
                    } else {
                        break;
                    }
                }
                Tok::Term(Term::Atom(s))
            }
            c if c.is_ascii_uppercase() || c == '_' => {
                return err(
                    line,
                    format!(
                        "variables are not allowed in a config (found one starting with `{c}`)"
                    ),
                )
            }
            other => return err(line, format!("unexpected character `{other}`")),
        };
        Ok(Some((tok, line)))
    }

    fn escape(&mut self, line: usize) -> Result<char, SyntaxError> {
        Ok(match self.bump() {
            Some('n') => '\n',
            Some('t') => '\t',
            Some('r') => '\r',
            Some('s') => ' ',
            Some('e') => '\x1b',
            Some('0') => '\0',
            Some(c) => c,
            None => return err(line, "escape at end of input"),
        })
    }

    fn quoted(&mut self, q: char, line: usize) -> Result<String, SyntaxError> {
        let mut s = String::new();
        loop {
            match self.bump() {
                None => return err(line, format!("unterminated {q}...{q} starting here")),
                Some('\\') => s.push(self.escape(line)?),
                Some(c) if c == q => return Ok(s),
                Some(c) => s.push(c),
            }
        }
    }

    fn number(&mut self, first: char, line: usize) -> Result<Tok, SyntaxError> {
        let mut s = String::from(first);
        if first == '-' || first == '+' {
            match self.chars.peek() {
                Some(c) if c.is_ascii_digit() => {}
                _ => return err(line, format!("unexpected `{first}`")),
            }
        }
        let mut is_float = false;
        while let Some(&c) = self.chars.peek() {
            if c.is_ascii_digit() {
                s.push(c);
                self.bump();
            } else if c == '#' {
                // Based integer: 16#ff.
                self.bump();
                let base: u32 = s
                    .trim_start_matches(['-', '+'])
                    .parse()
                    .ok()
                    .filter(|b| (2..=36).contains(b))
                    .map_or_else(|| err(line, format!("bad integer base in `{s}#`")), Ok)?;
                let mut digits = String::new();
                while let Some(&d) = self.chars.peek() {
                    if d.is_ascii_alphanumeric() {
                        digits.push(d);
                        self.bump();
                    } else {
                        break;
                    }
                }
                let v = i64::from_str_radix(&digits, base)
                    .map_or_else(|_| err(line, format!("bad integer `{s}#{digits}`")), Ok)?;
                return Ok(Tok::Term(Term::Int(if s.starts_with('-') {
                    -v
                } else {
                    v
                })));
            } else if c == '_' {
                // Digit separators (OTP 23+).
                self.bump();
            } else if c == '.' && !is_float {
                // A float needs a digit after the dot; `1.` ends a term.
                let mut look = self.chars.clone();
                look.next();
                if look.peek().is_some_and(|d| d.is_ascii_digit()) {
                    is_float = true;
                    s.push('.');
                    self.bump();
                } else {
                    break;
                }
            } else if (c == 'e' || c == 'E') && is_float {
                s.push('e');
                self.bump();
                if let Some(&sign) = self.chars.peek() {
                    if sign == '-' || sign == '+' {
                        s.push(sign);
                        self.bump();
                    }
                }
            } else {
                break;
            }
        }
        if is_float {
            s.parse::<f64>()
                .map(|f| Tok::Term(Term::Float(f)))
                .map_or_else(|_| err(line, format!("bad float `{s}`")), Ok)
        } else {
            s.parse::<i64>()
                .map(|i| Tok::Term(Term::Int(i)))
                .map_or_else(|_| err(line, format!("bad integer `{s}`")), Ok)
        }
    }
}

struct Parser<'a> {
    lex: Lexer<'a>,
    peeked: Option<(Tok, usize)>,
}

impl<'a> Parser<'a> {
    fn peek(&mut self) -> Result<Option<&(Tok, usize)>, SyntaxError> {
        if self.peeked.is_none() {
            self.peeked = self.lex.next()?;
        }
        Ok(self.peeked.as_ref())
    }

    fn take(&mut self) -> Result<Option<(Tok, usize)>, SyntaxError> {
        if let Some(t) = self.peeked.take() {
            return Ok(Some(t));
        }
        self.lex.next()
    }

    fn expect_any(&mut self, what: &str) -> Result<(Tok, usize), SyntaxError> {
        match self.take()? {
            Some(t) => Ok(t),
            None => err(
                self.lex.line,
                format!("unexpected end of file, expected {what}"),
            ),
        }
    }

    fn term(&mut self) -> Result<Term, SyntaxError> {
        let (tok, line) = self.expect_any("a term")?;
        match tok {
            Tok::Term(t) => Ok(t),
            Tok::Open('{') => Ok(Term::Tuple(self.seq('}', line)?)),
            Tok::Open(_) => Ok(Term::List(self.seq(']', line)?)),
            Tok::BinOpen => self.binary(line),
            other => err(line, format!("expected a term, found {}", describe(&other))),
        }
    }

    fn seq(&mut self, close: char, open_line: usize) -> Result<Vec<Term>, SyntaxError> {
        let mut items = Vec::new();
        if let Some((Tok::Close(c), _)) = self.peek()? {
            if *c == close {
                self.take()?;
                return Ok(items);
            }
        }
        loop {
            items.push(self.term()?);
            let (tok, line) = self.expect_any(&format!("`,` or `{close}`"))?;
            match tok {
                Tok::Comma => continue,
                Tok::Close(c) if c == close => return Ok(items),
                Tok::Bar if close == ']' => {
                    // [H | T]: append a proper tail.
                    match self.term()? {
                        Term::List(tail) => items.extend(tail),
                        other => return err(line, format!("improper list tail {other}")),
                    }
                    let (tok, line) = self.expect_any("`]`")?;
                    if tok != Tok::Close(']') {
                        return err(line, format!("expected `]`, found {}", describe(&tok)));
                    }
                    return Ok(items);
                }
                other => {
                    return err(
                        line,
                        format!(
                            "expected `,` or `{close}` (opened on line {open_line}), found {}",
                            describe(&other)
                        ),
                    )
                }
            }
        }
    }

    fn binary(&mut self, open_line: usize) -> Result<Term, SyntaxError> {
        let mut bytes = Vec::new();
        if let Some((Tok::BinClose, _)) = self.peek()? {
            self.take()?;
            return Ok(Term::Bin(bytes));
        }
        loop {
            let (tok, line) = self.expect_any("a binary segment")?;
            match tok {
                Tok::Term(Term::Str(s)) => bytes.extend_from_slice(s.as_bytes()),
                Tok::Term(Term::Int(i)) if (0..=255).contains(&i) => bytes.push(i as u8),
                other => {
                    return err(
                        line,
                        format!(
                            "binary segments must be strings or bytes 0..255, found {}",
                            describe(&other)
                        ),
                    )
                }
            }
            let (tok, line) = self.expect_any("`,` or `>>`")?;
            match tok {
                Tok::Comma => continue,
                Tok::BinClose => return Ok(Term::Bin(bytes)),
                other => {
                    return err(
                        line,
                        format!(
                            "expected `,` or `>>` (binary opened on line {open_line}), found {}",
                            describe(&other)
                        ),
                    )
                }
            }
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Open(c) | Tok::Close(c) => format!("`{c}`"),
        Tok::Comma => "`,`".into(),
        Tok::Bar => "`|`".into(),
        Tok::Dot => "`.`".into(),
        Tok::BinOpen => "`<<`".into(),
        Tok::BinClose => "`>>`".into(),
        Tok::Term(t) => format!("`{t}`"),
    }
}

/// Parses every term of `text`; returns each with the line where it starts.
pub fn parse_terms(text: &str) -> Result<Vec<(Term, usize)>, SyntaxError> {
    let mut p = Parser {
        lex: Lexer::new(text),
        peeked: None,
    };
    let mut out = Vec::new();
    loop {
        let line = match p.peek()? {
            None => return Ok(out),
            Some((_, line)) => *line,
        };
        let t = p.term()?;
        match p.take()? {
            Some((Tok::Dot, _)) => out.push((t, line)),
            Some((other, l)) => {
                return err(
                    l,
                    format!(
                        "expected `.` after the term that starts on line {line}, found {}",
                        describe(&other)
                    ),
                )
            }
            None => {
                return err(
                    p.lex.line,
                    format!("missing `.` after the term that starts on line {line}"),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Term {
        let mut v = parse_terms(s).expect("parses");
        assert_eq!(v.len(), 1);
        v.remove(0).0
    }

    #[test]
    fn scalars_and_nesting() {
        assert_eq!(
            one("{mode, {rate, 5}}."),
            Term::Tuple(vec![
                Term::Atom("mode".into()),
                Term::Tuple(vec![Term::Atom("rate".into()), Term::Int(5)])
            ])
        );
        assert_eq!(one("-3."), Term::Int(-3));
        assert_eq!(one("16#ff."), Term::Int(255));
        assert_eq!(one("0.2."), Term::Float(0.2));
        assert_eq!(one("1.5e3."), Term::Float(1500.0));
        assert_eq!(one("'Quoted atom'."), Term::Atom("Quoted atom".into()));
        assert_eq!(one("\"a\\\"b\"."), Term::Str("a\"b".into()));
        assert_eq!(one("<<\"test\">>."), Term::Bin(b"test".to_vec()));
        assert_eq!(one("<<>>."), Term::Bin(vec![]));
        assert_eq!(one("<<1,2,255>>."), Term::Bin(vec![1, 2, 255]));
        assert_eq!(
            one("[{127,0,0,1}, \"h\" | [x]]."),
            Term::List(vec![
                Term::Tuple(vec![
                    Term::Int(127),
                    Term::Int(0),
                    Term::Int(0),
                    Term::Int(1)
                ]),
                Term::Str("h".into()),
                Term::Atom("x".into())
            ])
        );
        assert_eq!(one("{pb_ips, [ ... ]}.").to_string(), "{pb_ips,['...']}");
    }

    #[test]
    fn comments_and_lines() {
        let v = parse_terms("% header\n{a, 1}. % trailing\n\n{b,\n  2}.\n").expect("parses");
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].1, 2);
        assert_eq!(v[1].1, 4);
    }

    #[test]
    fn errors_carry_lines() {
        let e = parse_terms("{a, 1}.\n{b, 2}\n{c, 3}.").expect_err("missing dot");
        assert_eq!(e.line, 3, "{e}");
        let e = parse_terms("{a, 1}.\n\n{b, [1, 2}.").expect_err("bad close");
        assert_eq!(e.line, 3, "{e}");
        let e = parse_terms("{a, \"open}.\n").expect_err("unterminated");
        assert_eq!(e.line, 1);
        let e = parse_terms("\n{a, X}.").expect_err("variable");
        assert_eq!(e.line, 2);
        assert!(parse_terms("{a, 1}").is_err());
    }
}
