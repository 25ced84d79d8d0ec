//! Regular expressions compiled at compile time into DFA tables, for
//! RegexFullMatch: pattern (RE2 syntax) → syntax tree → Thompson NFA over
//! UTF-8 bytes → DFA by subset construction → the table that the kernel
//! `onnxc_regex_full_match` walks (layout documented there). Nothing of a
//! regex engine runs when the model runs.
//!
//! Assertions (`^`, `$`, `\A`, `\z`, `\b`, `\B`) depend on the bytes on
//! either side of a position. The DFA state carries what they need to know
//! about the previous byte (start of text, word byte, other byte); the
//! next byte is the one being stepped on (or the end of the text when
//! deciding acceptance), so each transition resolves them exactly.
//!
//! Supported: literals (UTF-8), `.`, classes `[...]` of ASCII characters
//! and ranges (with `\d \w \s` and their negations inside), `\d \D \w \W
//! \s \S`, escapes of punctuation and `\n \t \r \f \v \xHH`, groups
//! `(...)`, `(?:...)`, `(?P<name>...)`, alternation, `* + ? {n} {n,}
//! {n,m}` (lazy forms too: full matching makes them equivalent), and the
//! assertions above. Negated classes, `\D \W \S` and `.` match any
//! non-ASCII character as a whole UTF-8 sequence; `\w \d \s` and `\b` are
//! ASCII, as in RE2. Anything else (flags, backreferences, lookaround,
//! Unicode classes, non-ASCII characters inside `[...]`) is an error.

use std::collections::{BTreeSet, HashMap};

/// Most NFA states and DFA states a pattern may produce.
const MAX_STATES: usize = 20_000;
/// Largest repetition count, as in RE2.
const MAX_REPEAT: u32 = 1000;

/// A set of characters: ASCII members, plus whether it holds every
/// non-ASCII character.
#[derive(Clone, Debug, PartialEq)]
struct CharSet {
    ascii: [bool; 128],
    non_ascii: bool,
}

impl CharSet {
    fn empty() -> CharSet {
        CharSet { ascii: [false; 128], non_ascii: false }
    }

    fn of(pred: impl Fn(u8) -> bool) -> CharSet {
        let mut s = CharSet::empty();
        for b in 0..128u8 {
            s.ascii[b as usize] = pred(b);
        }
        s
    }

    fn negated(&self) -> CharSet {
        let mut s = self.clone();
        s.ascii.iter_mut().for_each(|m| *m = !*m);
        s.non_ascii = !s.non_ascii;
        s
    }

    fn add(&mut self, other: &CharSet) {
        for (m, o) in self.ascii.iter_mut().zip(other.ascii) {
            *m |= o;
        }
        self.non_ascii |= other.non_ascii;
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Look {
    Start,
    End,
    WordBoundary,
    NotWordBoundary,
}

#[derive(Clone, Debug)]
enum Ast {
    Empty,
    Set(CharSet),
    /// The bytes of one non-ASCII character.
    Bytes(Vec<u8>),
    Look(Look),
    Concat(Vec<Ast>),
    Alt(Vec<Ast>),
    Repeat(Box<Ast>, u32, Option<u32>),
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(c);
        self.pos += hit as usize;
        hit
    }

    fn next(&mut self) -> Result<char, String> {
        let c = self.peek().ok_or("the pattern ends too early")?;
        self.pos += 1;
        Ok(c)
    }

    fn alternation(&mut self) -> Result<Ast, String> {
        let mut alts = vec![self.concat()?];
        while self.eat('|') {
            alts.push(self.concat()?);
        }
        Ok(if alts.len() == 1 { alts.remove(0) } else { Ast::Alt(alts) })
    }

    fn concat(&mut self) -> Result<Ast, String> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            items.push(self.repeats(atom)?);
        }
        Ok(match items.len() {
            0 => Ast::Empty,
            1 => items.remove(0),
            _ => Ast::Concat(items),
        })
    }

    fn repeats(&mut self, mut atom: Ast) -> Result<Ast, String> {
        let mut quantified = false;
        loop {
            let (min, max) = match self.peek() {
                Some('{') => match self.counted()? {
                    Some(r) => r,
                    None => return Ok(atom),
                },
                Some(c @ ('*' | '+' | '?')) => {
                    self.pos += 1;
                    (u32::from(c == '+'), (c == '?').then_some(1))
                }
                _ => return Ok(atom),
            };
            if quantified {
                return Err(format!("repetition operator at {} repeats a repetition", self.pos));
            }
            self.eat('?'); // lazy: the same language under full matching
            if matches!(atom, Ast::Look(_) | Ast::Empty) {
                return Err(format!("repetition operator at {} has nothing to repeat", self.pos));
            }
            atom = Ast::Repeat(Box::new(atom), min, max);
            quantified = true;
        }
    }

    /// `{n}`, `{n,}` or `{n,m}` at the cursor (consumed), or `None` (and
    /// nothing consumed) when the brace does not start one.
    fn counted(&mut self) -> Result<Option<(u32, Option<u32>)>, String> {
        let start = self.pos;
        self.pos += 1;
        let number = |p: &mut Parser| -> Option<u32> {
            let from = p.pos;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.pos += 1;
            }
            p.chars[from..p.pos].iter().collect::<String>().parse().ok()
        };
        let Some(min) = number(self) else {
            self.pos = start;
            return Ok(None);
        };
        let max = if self.eat(',') { number(self) } else { Some(min) };
        if !self.eat('}') {
            self.pos = start;
            return Ok(None);
        }
        if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT || m < min) {
            return Err(format!("bad repetition count at {start}"));
        }
        Ok(Some((min, max)))
    }

    fn atom(&mut self) -> Result<Ast, String> {
        let at = self.pos;
        match self.next()? {
            '(' => {
                if self.eat('?') {
                    if self.eat(':') {
                    } else if self.eat('P') || self.peek() == Some('<') {
                        if !self.eat('<') {
                            return Err(format!("unsupported group syntax at {at}"));
                        }
                        while self.next()? != '>' {}
                    } else {
                        return Err(format!("unsupported group syntax (flags or lookaround) at {at}"));
                    }
                }
                let inner = self.alternation()?;
                if !self.eat(')') {
                    return Err(format!("missing ) for the group at {at}"));
                }
                Ok(inner)
            }
            ')' => Err(format!("unexpected ) at {at}")),
            '[' => self.class(at),
            '.' => {
                let mut any = CharSet::of(|b| b != b'\n');
                any.non_ascii = true;
                Ok(Ast::Set(any))
            }
            '^' => Ok(Ast::Look(Look::Start)),
            '$' => Ok(Ast::Look(Look::End)),
            '*' | '+' | '?' => Err(format!("repetition operator at {at} has nothing to repeat")),
            '\\' => self.escape(at, false),
            c => Ok(literal(c)),
        }
    }

    fn escape(&mut self, at: usize, in_class: bool) -> Result<Ast, String> {
        let c = self.next()?;
        let set = |s: CharSet| Ok(Ast::Set(s));
        match c {
            'd' => set(CharSet::of(|b| b.is_ascii_digit())),
            'D' => set(CharSet::of(|b| b.is_ascii_digit()).negated()),
            'w' => set(CharSet::of(is_word)),
            'W' => set(CharSet::of(is_word).negated()),
            's' => set(space()),
            'S' => set(space().negated()),
            'b' if !in_class => Ok(Ast::Look(Look::WordBoundary)),
            'B' if !in_class => Ok(Ast::Look(Look::NotWordBoundary)),
            'A' if !in_class => Ok(Ast::Look(Look::Start)),
            'z' if !in_class => Ok(Ast::Look(Look::End)),
            'n' => Ok(literal('\n')),
            't' => Ok(literal('\t')),
            'r' => Ok(literal('\r')),
            'f' => Ok(literal('\x0c')),
            'v' => Ok(literal('\x0b')),
            'x' => {
                let hex: String = [self.next()?, self.next()?].iter().collect();
                let v = u8::from_str_radix(&hex, 16).map_err(|_| format!("bad \\x escape at {at}"))?;
                Ok(literal(char::from(v)))
            }
            c if c.is_ascii_punctuation() => Ok(literal(c)),
            c => Err(format!("unsupported escape \\{c} at {at}")),
        }
    }

    fn class(&mut self, at: usize) -> Result<Ast, String> {
        let negate = self.eat('^');
        let mut set = CharSet::empty();
        let mut first = true;
        loop {
            let c = self.next().map_err(|_| format!("missing ] for the class at {at}"))?;
            if c == ']' && !first {
                break;
            }
            first = false;
            if c == '[' && self.peek() == Some(':') {
                return Err(format!("POSIX classes like [:alpha:] are not supported (at {at})"));
            }
            if c == '\\' {
                match self.escape(self.pos - 1, true)? {
                    Ast::Set(s) => set.add(&s),
                    _ => return Err(format!("unsupported escape in the class at {at}")),
                }
                continue;
            }
            let low = c;
            let high = if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&n| n != ']') {
                self.pos += 1;
                match self.next()? {
                    '\\' => return Err(format!("escapes as range ends are not supported (at {at})")),
                    h => h,
                }
            } else {
                low
            };
            if !low.is_ascii() || !high.is_ascii() {
                return Err(format!("non-ASCII characters in a class are not supported (at {at})"));
            }
            if low > high {
                return Err(format!("bad range {low}-{high} in the class at {at}"));
            }
            for b in low as u8..=high as u8 {
                set.ascii[b as usize] = true;
            }
        }
        Ok(Ast::Set(if negate { set.negated() } else { set }))
    }
}

fn space() -> CharSet {
    CharSet::of(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

fn literal(c: char) -> Ast {
    if c.is_ascii() {
        Ast::Set(CharSet::of(|b| b == c as u8))
    } else {
        Ast::Bytes(c.encode_utf8(&mut [0; 4]).as_bytes().to_vec())
    }
}

/// A Thompson NFA state over bytes.
#[derive(Clone, Debug)]
enum State {
    /// Steps on any byte of the set.
    Byte(Box<[bool; 256]>, usize),
    Split(Vec<usize>),
    Look(Look, usize),
    Match,
}

struct Nfa {
    states: Vec<State>,
}

impl Nfa {
    fn push(&mut self, s: State) -> Result<usize, String> {
        if self.states.len() >= MAX_STATES {
            return Err(format!("the pattern needs more than {MAX_STATES} automaton states"));
        }
        self.states.push(s);
        Ok(self.states.len() - 1)
    }

    fn byte_range(&mut self, lo: u8, hi: u8, next: usize) -> Result<usize, String> {
        let mut set = [false; 256];
        set[lo as usize..=hi as usize].iter_mut().for_each(|m| *m = true);
        self.push(State::Byte(Box::new(set), next))
    }

    /// Compiles `ast` so that it continues at `next`; returns its start.
    fn build(&mut self, ast: &Ast, next: usize) -> Result<usize, String> {
        match ast {
            Ast::Empty => Ok(next),
            Ast::Look(l) => self.push(State::Look(*l, next)),
            Ast::Bytes(bytes) => bytes.iter().rev().try_fold(next, |n, &b| self.byte_range(b, b, n)),
            Ast::Set(set) => {
                let mut ascii = [false; 256];
                ascii[..128].copy_from_slice(&set.ascii);
                let one = self.push(State::Byte(Box::new(ascii), next))?;
                if !set.non_ascii {
                    return Ok(one);
                }
                // Any well-formed multi-byte UTF-8 sequence (lead byte, then
                // 1 to 3 continuation bytes).
                let mut starts = vec![one];
                for (lead_lo, lead_hi, tails) in [(0xc2, 0xdf, 1), (0xe0, 0xef, 2), (0xf0, 0xf4, 3)] {
                    let mut s = next;
                    for _ in 0..tails {
                        s = self.byte_range(0x80, 0xbf, s)?;
                    }
                    starts.push(self.byte_range(lead_lo, lead_hi, s)?);
                }
                self.push(State::Split(starts))
            }
            Ast::Concat(items) => items.iter().rev().try_fold(next, |n, a| self.build(a, n)),
            Ast::Alt(alts) => {
                let starts = alts.iter().map(|a| self.build(a, next)).collect::<Result<Vec<_>, _>>()?;
                self.push(State::Split(starts))
            }
            Ast::Repeat(inner, min, max) => {
                let mut start = match max {
                    None => {
                        // A loop: split into the body (which returns here) or on.
                        let split = self.push(State::Split(Vec::new()))?;
                        let body = self.build(inner, split)?;
                        self.states[split] = State::Split(vec![body, next]);
                        split
                    }
                    Some(max) => {
                        let mut s = next;
                        for _ in *min..*max {
                            let body = self.build(inner, s)?;
                            s = self.push(State::Split(vec![body, next]))?;
                        }
                        s
                    }
                };
                for _ in 0..*min {
                    start = self.build(inner, start)?;
                }
                Ok(start)
            }
        }
    }
}

/// What the assertions know about the byte before a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Prev {
    Start,
    Word,
    Other,
}

/// The byte after a position, or the end of the text.
#[derive(Clone, Copy)]
enum NextByte {
    Byte(u8),
    End,
}

fn holds(look: Look, prev: Prev, next: NextByte) -> bool {
    let word_before = prev == Prev::Word;
    let word_after = matches!(next, NextByte::Byte(b) if is_word(b));
    match look {
        Look::Start => prev == Prev::Start,
        Look::End => matches!(next, NextByte::End),
        Look::WordBoundary => word_before != word_after,
        Look::NotWordBoundary => word_before == word_after,
    }
}

/// A compiled pattern: the DFA over byte classes.
#[derive(Clone, Debug)]
pub struct Dfa {
    class_of: [u32; 256],
    classes: usize,
    /// Row per state, column per class.
    transitions: Vec<u32>,
    accepting: Vec<bool>,
    start: u32,
}

impl Dfa {
    /// The table `onnxc_regex_full_match` walks: little-endian u32 words.
    pub fn table(&self) -> Vec<u8> {
        let header = [self.accepting.len() as u32, self.classes as u32, self.start];
        header
            .iter()
            .chain(&self.class_of)
            .chain(&self.transitions)
            .copied()
            .chain(self.accepting.iter().map(|&a| a as u32))
            .flat_map(u32::to_le_bytes)
            .collect()
    }

    pub fn state_count(&self) -> usize {
        self.accepting.len()
    }
}

/// Compiles `pattern` (RE2 syntax, the subset in the module docs) into a
/// DFA that accepts exactly the byte strings it fully matches.
pub fn compile(pattern: &str) -> Result<Dfa, String> {
    let mut parser = Parser { chars: pattern.chars().collect(), pos: 0 };
    let ast = parser.alternation()?;
    if parser.pos != parser.chars.len() {
        return Err(format!("unexpected ) at {}", parser.pos));
    }
    let mut nfa = Nfa { states: vec![State::Match] };
    let start = nfa.build(&ast, 0)?;
    determinize(&nfa, start)
}

/// The states reachable from `set` without stepping on a byte, given the
/// bytes around the position.
fn closure(nfa: &Nfa, set: &BTreeSet<usize>, prev: Prev, next: NextByte) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<usize> = set.iter().copied().collect();
    while let Some(s) = stack.pop() {
        if !seen.insert(s) {
            continue;
        }
        match &nfa.states[s] {
            State::Split(next_states) => stack.extend(next_states),
            State::Look(look, n) if holds(*look, prev, next) => stack.push(*n),
            _ => {}
        }
    }
    seen
}

/// Byte classes: bytes that every byte set and the word test treat alike.
fn byte_classes(nfa: &Nfa) -> ([u32; 256], usize) {
    let sets: Vec<&[bool; 256]> = nfa
        .states
        .iter()
        .filter_map(|s| match s {
            State::Byte(set, _) => Some(&**set),
            _ => None,
        })
        .collect();
    let mut ids: HashMap<Vec<bool>, u32> = HashMap::new();
    let mut class_of = [0u32; 256];
    for b in 0..256usize {
        let mut signature: Vec<bool> = sets.iter().map(|s| s[b]).collect();
        signature.push(is_word(b as u8));
        let next_id = ids.len() as u32;
        class_of[b] = *ids.entry(signature).or_insert(next_id);
    }
    (class_of, ids.len())
}

fn determinize(nfa: &Nfa, start: usize) -> Result<Dfa, String> {
    let (class_of, classes) = byte_classes(nfa);
    // A representative byte of each class.
    let mut rep = vec![0u8; classes];
    for b in (0..256usize).rev() {
        rep[class_of[b] as usize] = b as u8;
    }
    type Key = (BTreeSet<usize>, Prev);
    // State 0 is the dead state (no NFA state left), whatever came before.
    let dead: Key = (BTreeSet::new(), Prev::Other);
    let mut index: HashMap<Key, u32> = HashMap::from([(dead.clone(), 0)]);
    let mut keys: Vec<Key> = vec![dead];
    let first: Key = (BTreeSet::from([start]), Prev::Start);
    index.insert(first.clone(), 1);
    keys.push(first);
    let mut transitions = Vec::new();
    let mut accepting = Vec::new();
    let mut i = 0;
    while i < keys.len() {
        let (set, prev) = keys[i].clone();
        let at_end = closure(nfa, &set, prev, NextByte::End);
        accepting.push(at_end.iter().any(|&s| matches!(nfa.states[s], State::Match)));
        for &b in &rep {
            let reached = closure(nfa, &set, prev, NextByte::Byte(b));
            let stepped: BTreeSet<usize> = reached
                .iter()
                .filter_map(|&s| match &nfa.states[s] {
                    State::Byte(bytes, n) if bytes[b as usize] => Some(*n),
                    _ => None,
                })
                .collect();
            let key = if stepped.is_empty() {
                (stepped, Prev::Other)
            } else {
                (stepped, if is_word(b) { Prev::Word } else { Prev::Other })
            };
            let id = match index.get(&key) {
                Some(&id) => id,
                None => {
                    if keys.len() >= MAX_STATES {
                        return Err(format!("the pattern needs more than {MAX_STATES} DFA states"));
                    }
                    let id = keys.len() as u32;
                    index.insert(key.clone(), id);
                    keys.push(key);
                    id
                }
            };
            transitions.push(id);
        }
        i += 1;
    }
    Ok(Dfa { class_of, classes, transitions, accepting, start: 1 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnxc_runtime::model::OnnxString;

    /// Full-matches `texts` through the run-time kernel walking the table.
    fn matches(pattern: &str, texts: &[&str]) -> Vec<bool> {
        let table = compile(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}")).table();
        let words: Vec<u32> = table.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let records: Vec<OnnxString> = texts.iter().map(|t| OnnxString { data: t.as_ptr(), len: t.len() }).collect();
        let mut out = vec![0u8; texts.len()];
        // SAFETY: a table from `compile`, one record per text, room for each result.
        let status = unsafe {
            onnxc_runtime::onnxc_regex_full_match(
                words.as_ptr(),
                records.as_ptr(),
                out.as_mut_ptr(),
                texts.len() as i64,
            )
        };
        assert_eq!(status, 0);
        out.iter().map(|&b| b != 0).collect()
    }

    #[test]
    fn the_suite_patterns() {
        let p = r"www\.[\w.-]+\.\bcom\b";
        assert_eq!(matches(p, &["www.google.com", "www.facebook.com", "www.bbc.co.uk"]), [true, true, false]);
        let p = r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)";
        let texts = ["account@gmail.com", "account@hotmail.com", "not email", "account2@yahoo.com"];
        assert_eq!(matches(p, &texts), [true, false, false, true]);
    }

    #[test]
    fn literals_classes_and_repetition() {
        assert_eq!(matches("abc", &["abc", "ab", "abcd", ""]), [true, false, false, false]);
        assert_eq!(matches("a|bc|", &["a", "bc", "", "b"]), [true, true, true, false]);
        assert_eq!(matches("[^a-c]x*", &["dxx", "a", "é", "éx"]), [true, false, true, true]);
        assert_eq!(matches(r"\d{2,3}", &["1", "12", "123", "1234"]), [false, true, true, false]);
        assert_eq!(matches(r"(?:ab)+?", &["ab", "abab", "aba", ""]), [true, true, false, false]);
        assert_eq!(matches(".", &["\n", "x", "中"]), [false, true, true]);
        assert_eq!(matches("中+", &["中中", "中文"]), [true, false]);
        assert_eq!(matches(r"a\Bb|c\b", &["ab", "c"]), [true, true]);
        assert_eq!(matches("x{2}", &["xx", "x{2}"]), [true, false]);
    }

    #[test]
    fn anchors_inside_the_text_never_hold() {
        assert_eq!(matches("a^b", &["ab"]), [false]);
        assert_eq!(matches("a$b", &["ab"]), [false]);
        assert_eq!(matches("^a$", &["a"]), [true]);
    }

    #[test]
    fn unsupported_syntax_is_an_error() {
        for bad in [r"(a)\1", "(?i)a", "(?=a)", r"\p{L}", "[[:alpha:]]", "[é]", "a**", "*", "(a", "a)", "a{5,2}"] {
            assert!(compile(bad).is_err(), "{bad} should be rejected");
        }
    }
}
