//! Field sets: which fields of an object a manager owns, as a tree of path elements, and
//! their `FieldsV1` form (`{"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}}}}}`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One step into an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Element {
    /// A field of a struct or a key of a map: `f:name`.
    Field(String),
    /// An item of a keyed list, by its key fields (JSON, keys sorted): `k:{"name":"c"}`.
    Key(String),
    /// An item of a set, by its value (JSON): `v:"x"`.
    Value(String),
}

impl Element {
    fn encode(&self) -> String {
        match self {
            Element::Field(f) => format!("f:{f}"),
            Element::Key(k) => format!("k:{k}"),
            Element::Value(v) => format!("v:{v}"),
        }
    }

    fn decode(s: &str) -> Option<Self> {
        let (kind, rest) = s.split_at_checked(2)?;
        match kind {
            "f:" => Some(Element::Field(rest.to_owned())),
            "k:" => Some(Element::Key(rest.to_owned())),
            "v:" => Some(Element::Value(rest.to_owned())),
            _ => None,
        }
    }
}

/// A set of field paths: `member` says whether the path leading here is in the set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    /// This path itself is in the set (FieldsV1's `.`).
    pub member: bool,
    /// Paths below this one.
    pub children: BTreeMap<Element, Set>,
}

impl Set {
    /// Whether no path is in the set.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(Set::is_empty)
    }

    /// The set below `e`, made if needed.
    pub fn child(&mut self, e: Element) -> &mut Set {
        self.children.entry(e).or_default()
    }

    /// Adds every path of `other`.
    pub fn union(&mut self, other: &Set) {
        self.member |= other.member;
        for (e, s) in &other.children {
            self.child(e.clone()).union(s);
        }
    }

    /// Removes every path of `other`.
    pub fn subtract(&mut self, other: &Set) {
        if other.member {
            self.member = false;
        }
        for (e, s) in &other.children {
            if let Some(mine) = self.children.get_mut(e) {
                mine.subtract(s);
            }
        }
        self.prune();
    }

    /// Removes every path at or below the paths of `other` (a removed subtree).
    pub fn subtract_subtrees(&mut self, other: &Set) {
        for (e, s) in &other.children {
            if s.member {
                self.children.remove(e);
            } else if let Some(mine) = self.children.get_mut(e) {
                mine.subtract_subtrees(s);
            }
        }
        self.prune();
    }

    /// The paths in both.
    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (e, s) in &self.children {
            if let Some(o) = other.children.get(e) {
                let both = s.intersection(o);
                if !both.is_empty() {
                    out.children.insert(e.clone(), both);
                }
            }
        }
        out
    }

    fn prune(&mut self) {
        self.children.retain(|_, s| !s.is_empty());
    }

    /// Every member path, as element lists.
    pub fn paths(&self) -> Vec<Vec<Element>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<Element>, out: &mut Vec<Vec<Element>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (e, s) in &self.children {
            prefix.push(e.clone());
            s.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` form.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (e, s) in &self.children {
            if !s.is_empty() {
                map.insert(e.encode(), s.to_fields_v1());
            }
        }
        Value::Object(map)
    }

    /// Reads `FieldsV1`; `None` when it is not one.
    pub fn from_fields_v1(v: &Value) -> Option<Set> {
        let map = v.as_object()?;
        let mut out = Set {
            // A leaf (`{}`) is a member; so is a node with `.`.
            member: map.is_empty() || map.contains_key("."),
            children: BTreeMap::new(),
        };
        for (k, v) in map {
            if k == "." {
                continue;
            }
            out.children
                .insert(Element::decode(k)?, Set::from_fields_v1(v)?);
        }
        Some(out)
    }
}

/// A path as upstream prints it in a conflict: `.spec.containers[name="c"].image`.
pub fn path_string(path: &[Element]) -> String {
    let mut out = String::new();
    for e in path {
        match e {
            Element::Field(f) => {
                out.push('.');
                out.push_str(f);
            }
            Element::Key(k) => {
                let fields: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            Element::Value(v) => out.push_str(&format!("[={v}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trips() {
        let v = json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}});
        let set = Set::from_fields_v1(&v).unwrap();
        assert_eq!(set.to_fields_v1(), v);
        assert_eq!(set.paths().len(), 4);
        let mut other = set.clone();
        other.subtract(&set);
        assert!(other.is_empty());
    }
}
