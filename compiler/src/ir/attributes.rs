//! Operator attributes as the textual mid-IR prints them: by name, in
//! declaration order, each value on one short line.
//!
//! Every attribute struct derives `Debug`, which writes its fields by name,
//! in order and deterministically (no attribute struct holds a hash map or
//! a pointer). [`of_debug`] reads the top-level fields back out of that
//! text, so every operator prints its attributes by name without a
//! hand-written method per struct; lists keep their first
//! [`LIST_HEAD`] elements, so a regex's DFA or an encoder's table never
//! floods the output. A family whose fields are bulky or internal (trees,
//! subgraphs) overrides [`crate::ops::Operator::attributes`] with a summary.

use std::fmt;

/// One attribute: `name=value` in the textual mid-IR.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    pub name: String,
    pub value: String,
}

impl Attribute {
    pub fn new(name: &str, value: impl fmt::Display) -> Attribute {
        Attribute { name: name.to_string(), value: value.to_string() }
    }
}

impl fmt::Display for Attribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.value)
    }
}

/// Elements a printed list keeps before `… N items`.
pub const LIST_HEAD: usize = 8;

/// The fields of `op`'s derived `Debug` form: `Conv { group: 1, .. }` gives
/// `group=1, ..`; a tuple struct's fields are named `0`, `1`...; a unit
/// struct has none.
pub fn of_debug<T: fmt::Debug + ?Sized>(op: &T) -> Vec<Attribute> {
    let text = format!("{op:?}");
    // After the type's name: ` { a: 1, .. }`, `(1, ..)` or nothing.
    let fields = text.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_').trim_start();
    if fields.len() < 2 {
        return Vec::new();
    }
    let body = fields[1..fields.len() - 1].trim();
    let named = !fields.starts_with('(');
    top_level_items(body)
        .into_iter()
        .enumerate()
        .map(|(k, item)| match item.split_once(": ").filter(|_| named) {
            Some((name, value)) => Attribute::new(name, shorten_lists(value)),
            None => Attribute::new(&k.to_string(), shorten_lists(item)),
        })
        .collect()
}

/// `of_debug(op)` without the fields that only repeat the operator's
/// `name` (a table-driven family's `op_type: "Relu"`, `func: Relu`): the
/// default of [`crate::ops::Operator::attributes`].
pub fn of_operator<T: fmt::Debug + ?Sized>(op: &T, name: &str) -> Vec<Attribute> {
    let quoted = format!("{name:?}");
    of_debug(op).into_iter().filter(|a| a.value != name && a.value != quoted).collect()
}

/// `of_debug(op)` without the fields named in `skip` (subgraphs, printed
/// on their own).
pub fn of_debug_except<T: fmt::Debug + ?Sized>(op: &T, skip: &[&str]) -> Vec<Attribute> {
    of_debug(op).into_iter().filter(|a| !skip.contains(&a.name.as_str())).collect()
}

/// Where a scan of `Debug` text stands: inside a string or char literal
/// (and just after a backslash in it), or at some bracket depth.
#[derive(Default)]
struct Scan {
    quote: Option<char>,
    escaped: bool,
}

impl Scan {
    /// Steps over `c`; true when `c` is outside any literal (brackets and
    /// commas there are structure).
    fn structural(&mut self, c: char) -> bool {
        match self.quote {
            Some(_) if self.escaped => self.escaped = false,
            Some(_) if c == '\\' => self.escaped = true,
            Some(q) if c == q => self.quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => self.quote = Some(c),
            None => return true,
        }
        false
    }
}

/// `body` split at its top-level `", "` separators.
fn top_level_items(body: &str) -> Vec<&str> {
    let (mut items, mut start, mut depth, mut scan) = (Vec::new(), 0, 0usize, Scan::default());
    for (i, c) in body.char_indices() {
        if !scan.structural(c) {
            continue;
        }
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(body[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !body[start..].trim().is_empty() {
        items.push(body[start..].trim());
    }
    items
}

/// `value` with every list, at any depth, cut after [`LIST_HEAD`]
/// elements: `[1, 2, … 300 items]`.
fn shorten_lists(value: &str) -> String {
    // Per open bracket: whether it is a list, and its elements so far.
    let (mut out, mut open, mut scan) = (String::new(), Vec::<(bool, usize)>::new(), Scan::default());
    // The depth of the list being skipped, once it has shown its head.
    let mut skipping: Option<usize> = None;
    for c in value.chars() {
        if scan.structural(c) {
            match c {
                '{' | '[' | '(' => open.push((c == '[', 1)),
                '}' | ']' | ')' => {
                    let (_, count) = open.pop().unwrap_or((false, 0));
                    if skipping == Some(open.len()) {
                        skipping = None;
                        out.push_str(&format!(", … {count} items"));
                    }
                }
                ',' => match open.last_mut() {
                    Some((true, count)) if skipping.is_none() && *count == LIST_HEAD => {
                        *count += 1;
                        skipping = Some(open.len() - 1);
                    }
                    Some((_, count)) => *count += 1,
                    None => {}
                },
                _ => {}
            }
        }
        if skipping.is_none() {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    #[allow(dead_code)] // read through Debug only
    struct Sample {
        axis: i64,
        table: Vec<u8>,
        label: &'static str,
        nested: Option<(Vec<i32>, char)>,
    }

    #[derive(Debug)]
    struct Unit;

    #[derive(Debug)]
    #[allow(dead_code)] // read through Debug only
    struct Pair(i64, bool);

    #[test]
    fn fields_print_by_name_with_long_lists_cut() {
        let op = Sample { axis: -1, table: (0..20).collect(), label: "a, [b", nested: Some(((0..9).collect(), ']')) };
        let printed: Vec<String> = of_debug(&op).iter().map(Attribute::to_string).collect();
        assert_eq!(
            printed,
            [
                "axis=-1",
                "table=[0, 1, 2, 3, 4, 5, 6, 7, … 20 items]",
                "label=\"a, [b\"",
                "nested=Some(([0, 1, 2, 3, 4, 5, 6, 7, … 9 items], ']'))",
            ]
        );
    }

    #[derive(Debug)]
    enum Func {
        Elu,
    }

    #[derive(Debug)]
    #[allow(dead_code)] // read through Debug only
    struct Table {
        op_type: &'static str,
        func: Func,
        alpha: f32,
        label: &'static str,
    }

    #[test]
    fn fields_repeating_the_operator_name_are_left_out() {
        let op = Table { op_type: "Elu", func: Func::Elu, alpha: 0.5, label: "Elu2" };
        assert_eq!(of_operator(&op, "Elu"), [Attribute::new("alpha", "0.5"), Attribute::new("label", "\"Elu2\"")]);
    }

    #[test]
    fn unit_and_tuple_structs() {
        assert!(of_debug(&Unit).is_empty());
        let printed: Vec<String> = of_debug(&Pair(3, true)).iter().map(Attribute::to_string).collect();
        assert_eq!(printed, ["0=3", "1=true"]);
        assert_eq!(of_debug_except(&Pair(3, true), &["0"]), [Attribute::new("1", true)]);
    }
}
