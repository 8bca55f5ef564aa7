//! From Go declarations to the tables of `src/wire/schema.rs`: every struct reachable from
//! the root types, each field with its JSON name and options, its type with named types
//! resolved to what they are underneath, and how server-side apply sees it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::rc::Rc;

use super::go::{self, Expr, GoField};

/// A Go type by the import path of its package and its name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TypeId {
    pub package: String,
    pub name: String,
}

impl TypeId {
    pub fn new(package: &str, name: &str) -> Self {
        TypeId {
            package: package.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The package's short name as the tables are named and sorted by: the API group
    /// (`core` of `k8s.io/api/core/v1`, `meta` of `.../apis/meta/v1`).
    pub fn group(&self) -> &str {
        let mut parts = self.package.rsplit('/');
        parts.next();
        parts.next().unwrap_or(&self.package)
    }

    /// `core.PodSpec`.
    pub fn display(&self) -> String {
        format!("{}.{}", self.group(), self.name)
    }

    /// `CORE_POD_SPEC`.
    pub fn const_name(&self) -> String {
        format!(
            "{}_{}",
            self.group().to_uppercase(),
            screaming_snake(&self.name)
        )
    }
}

/// `AWSElasticBlockStore` → `AWS_ELASTIC_BLOCK_STORE`: a word starts at an upper-case
/// letter after a lower-case one or a digit, or at the last capital of an acronym when a
/// lower-case letter follows (`SELinux` → `SE_LINUX`).
fn screaming_snake(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1);
        let starts_word = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_uppercase() && next.is_some_and(|n| n.is_lowercase()))
            });
        if starts_word {
            out.push('_');
        }
        out.extend(c.to_uppercase());
    }
    out
}

/// How a Go type is encoded: `src/wire/mod.rs`'s `Ty`, a struct by its table's name.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    Str,
    Int,
    Float,
    Bool,
    Bytes,
    Time,
    MicroTime,
    Quantity,
    IntOrString,
    Raw,
    Ptr(Box<Ty>),
    Slice(Box<Ty>),
    Map(Box<Ty>),
    Struct(String),
}

/// A list's semantics for server-side apply.
#[derive(Debug, Clone, PartialEq)]
pub enum List {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// One field of a table.
#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub ty: Ty,
    pub omitempty: bool,
    pub omitzero: bool,
    pub inline: bool,
    pub list: List,
    pub atomic: bool,
}

/// One struct: a `pub static` table.
#[derive(Debug)]
pub struct Table {
    pub id: TypeId,
    pub fields: Vec<Field>,
}

/// The types that encode themselves (`MarshalJSON`), so that their Go fields say nothing
/// of their JSON, and what they encode as.
fn encodes_itself(id: &TypeId) -> Option<Ty> {
    const META: &str = "k8s.io/apimachinery/pkg/apis/meta/v1";
    Some(match (id.package.as_str(), id.name.as_str()) {
        (META, "Time") => Ty::Time,
        (META, "MicroTime") => Ty::MicroTime,
        (META, "FieldsV1") => Ty::Raw,
        ("k8s.io/apimachinery/pkg/runtime", "RawExtension") => Ty::Raw,
        ("k8s.io/apimachinery/pkg/api/resource", "Quantity") => Ty::Quantity,
        ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString") => Ty::IntOrString,
        _ => return None,
    })
}

/// Go's predeclared types.
fn predeclared(name: &str) -> Option<Ty> {
    Some(match name {
        "string" => Ty::Str,
        "bool" => Ty::Bool,
        "int" | "int8" | "int16" | "int32" | "int64" | "uint" | "uint8" | "uint16" | "uint32"
        | "uint64" | "uintptr" | "byte" | "rune" => Ty::Int,
        "float32" | "float64" => Ty::Float,
        _ => return None,
    })
}

/// A `type` declaration with the imports of the file it is in.
struct Decl {
    ty: Expr,
    doc: Vec<String>,
    imports: Rc<BTreeMap<String, String>>,
}

#[derive(Default)]
struct Package {
    types: HashMap<String, Decl>,
    methods: BTreeSet<(String, String)>,
}

/// The Go packages under a `staging/src/k8s.io`-like directory, each read when first
/// needed.
pub struct Sources {
    dir: PathBuf,
    packages: HashMap<String, Package>,
}

impl Sources {
    pub fn new(dir: PathBuf) -> Self {
        Sources {
            dir,
            packages: HashMap::new(),
        }
    }

    fn package(&mut self, path: &str) -> Result<&Package, String> {
        if !self.packages.contains_key(path) {
            let package = self.read(path)?;
            self.packages.insert(path.to_owned(), package);
        }
        Ok(&self.packages[path])
    }

    fn read(&self, path: &str) -> Result<Package, String> {
        let rel = path
            .strip_prefix("k8s.io/")
            .ok_or_else(|| format!("{path} is not a k8s.io package"))?;
        let dir = self.dir.join(rel);
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|x| x == "go")
                    && !p.to_string_lossy().ends_with("_test.go")
            })
            .collect();
        files.sort();
        let mut package = Package::default();
        for file in files {
            let src =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            if go::skipped(&src) {
                continue;
            }
            let parsed = go::parse_file(&src).map_err(|e| format!("{}: {e}", file.display()))?;
            let imports = Rc::new(parsed.imports);
            for decl in parsed.types {
                let previous = package.types.insert(
                    decl.name.clone(),
                    Decl {
                        ty: decl.ty,
                        doc: decl.doc,
                        imports: Rc::clone(&imports),
                    },
                );
                if previous.is_some() {
                    return Err(format!("{path}.{} is declared twice", decl.name));
                }
            }
            package.methods.extend(parsed.methods);
        }
        Ok(package)
    }

    fn decl(&mut self, id: &TypeId) -> Result<&Decl, String> {
        self.package(&id.package)?
            .types
            .get(&id.name)
            .ok_or_else(|| format!("{}.{} is not declared", id.package, id.name))
    }
}

/// The tables of every struct reachable from `roots`, sorted as the file is (by group,
/// then Go name).
pub fn tables(sources: &mut Sources, roots: &[TypeId]) -> Result<Vec<Table>, String> {
    let mut walk = Walk {
        sources,
        queue: roots.to_vec(),
        names: BTreeMap::new(),
    };
    let mut tables = BTreeMap::new();
    while let Some(id) = walk.queue.pop() {
        let key = (id.group().to_owned(), id.name.clone());
        if tables.contains_key(&key) {
            continue;
        }
        let fields = walk
            .table(&id)
            .map_err(|e| format!("{}: {e}", id.display()))?;
        tables.insert(key, Table { id, fields });
    }
    Ok(tables.into_values().collect())
}

struct Walk<'a> {
    sources: &'a mut Sources,
    queue: Vec<TypeId>,
    /// Each table's name and its type, so two types never share one.
    names: BTreeMap<String, TypeId>,
}

/// Where a type expression is: the package and the imports of its file.
struct Scope {
    package: String,
    imports: Rc<BTreeMap<String, String>>,
}

impl Walk<'_> {
    fn table(&mut self, id: &TypeId) -> Result<Vec<Field>, String> {
        let decl = self.sources.decl(id)?;
        let Expr::Struct(go_fields) = decl.ty.clone() else {
            return Err("not a struct".into());
        };
        let scope = Scope {
            package: id.package.clone(),
            imports: Rc::clone(&decl.imports),
        };
        let mut fields = Vec::new();
        for go_field in &go_fields {
            let field = self.field(&scope, go_field).map_err(|e| {
                format!("{}: {e}", go_field.name.as_deref().unwrap_or("(embedded)"))
            })?;
            fields.extend(field);
        }
        Ok(fields)
    }

    /// A struct field as encoding/json sees it; `None` for one it leaves out (unexported,
    /// or `json:"-"`).
    fn field(&mut self, scope: &Scope, f: &GoField) -> Result<Option<Field>, String> {
        if f.name
            .as_deref()
            .is_some_and(|n| !n.starts_with(char::is_uppercase))
        {
            return Ok(None);
        }
        let json = go::tag_value(&f.tag, "json").unwrap_or("");
        if json == "-" {
            return Ok(None);
        }
        let mut options = json.split(',');
        let json_name = options.next().unwrap_or("");
        let options: Vec<&str> = options.collect();
        // encoding/json inlines an embedded struct without a JSON name (Kubernetes writes
        // `json:",inline"`, an option encoding/json does not know); any other field
        // without one goes by its Go name.
        let inline = f.name.is_none() && json_name.is_empty();
        let name = match &f.name {
            Some(go_name) if json_name.is_empty() => go_name.clone(),
            _ => json_name.to_owned(),
        };
        let ty = self.resolve(scope, &f.ty)?;
        let list = match deref(&ty) {
            Ty::Slice(_) => Self::list(f)?,
            _ => List::Atomic,
        };
        let atomic = self.atomic(f, &ty, &list)?;
        Ok(Some(Field {
            name,
            ty,
            omitempty: options.contains(&"omitempty"),
            omitzero: options.contains(&"omitzero"),
            inline,
            list,
            atomic,
        }))
    }

    /// The named type `expr` is (through pointers), as a [`TypeId`].
    fn named(&self, scope: &Scope, expr: &Expr) -> Result<Option<TypeId>, String> {
        match expr {
            Expr::Ptr(inner) => self.named(scope, inner),
            Expr::Named { pkg: None, name } if predeclared(name).is_some() => Ok(None),
            Expr::Named { pkg: None, name } => Ok(Some(TypeId::new(&scope.package, name))),
            Expr::Named {
                pkg: Some(alias),
                name,
            } => {
                let path = scope
                    .imports
                    .get(alias)
                    .ok_or_else(|| format!("no import named {alias}"))?;
                Ok(Some(TypeId::new(path, name)))
            }
            _ => Ok(None),
        }
    }

    fn resolve(&mut self, scope: &Scope, expr: &Expr) -> Result<Ty, String> {
        match expr {
            Expr::Named { name, .. } => match self.named(scope, expr)? {
                Some(id) => self.resolve_named(&id),
                None => Ok(predeclared(name).expect("only a predeclared type has no TypeId")),
            },
            Expr::Ptr(inner) => Ok(Ty::Ptr(Box::new(self.resolve(scope, inner)?))),
            Expr::Slice(item) => match &**item {
                Expr::Named { pkg: None, name } if name == "byte" || name == "uint8" => {
                    Ok(Ty::Bytes)
                }
                _ => Ok(Ty::Slice(Box::new(self.resolve(scope, item)?))),
            },
            Expr::Map(_, value) => Ok(Ty::Map(Box::new(self.resolve(scope, value)?))),
            Expr::Struct(_) => Err("an anonymous struct has no table".into()),
            Expr::Other(what) => Err(format!("{what} cannot be encoded")),
        }
    }

    /// A named type: a struct is its table (walked in turn), any other type what it is
    /// declared as (`type PodPhase string` is a string).
    fn resolve_named(&mut self, id: &TypeId) -> Result<Ty, String> {
        if let Some(ty) = encodes_itself(id) {
            return Ok(ty);
        }
        let decl = self.sources.decl(id)?;
        let (ty, imports) = (decl.ty.clone(), Rc::clone(&decl.imports));
        let methods = &self.sources.package(&id.package)?.methods;
        if methods.contains(&(id.name.clone(), "MarshalJSON".to_owned())) {
            return Err(format!(
                "{}.{} has its own MarshalJSON: say what it encodes as in encodes_itself",
                id.package, id.name
            ));
        }
        if let Expr::Struct(_) = ty {
            let name = id.const_name();
            if let Some(other) = self.names.insert(name.clone(), id.clone())
                && other != *id
            {
                return Err(format!("{other:?} and {id:?} would both be {name}"));
            }
            self.queue.push(id.clone());
            return Ok(Ty::Struct(name));
        }
        let scope = Scope {
            package: id.package.clone(),
            imports,
        };
        self.resolve(&scope, &ty)
            .map_err(|e| format!("{}: {e}", id.display()))
    }

    /// A slice's semantics, as kube-openapi's `getListElementRelationship` (schemaconv)
    /// derives them for kube-apiserver's field manager: the field's `+listType`, else its
    /// `+patchStrategy` — `merge` with a `+patchMergeKey` makes a map by that key,
    /// without one a set — else atomic. openapi-gen reads the patch markers from the
    /// comment and refuses a field whose struct tags say otherwise; so does this.
    fn list(f: &GoField) -> Result<List, String> {
        let markers = go::markers(&f.doc);
        let marker = |key: &str| markers.iter().find(|(k, _)| *k == key).map(|m| m.1);
        for key in ["patchStrategy", "patchMergeKey"] {
            if marker(key) != go::tag_value(&f.tag, key) {
                return Err(format!("its +{key} marker and struct tag differ"));
            }
        }
        Ok(match marker("listType") {
            Some("map") => {
                let keys: Vec<String> = markers
                    .iter()
                    .filter(|(k, _)| *k == "listMapKey")
                    .map(|(_, v)| v.to_string())
                    .collect();
                if keys.is_empty() {
                    return Err("+listType=map without +listMapKey".into());
                }
                List::Map(keys)
            }
            Some("set") => List::Set,
            Some("atomic") => List::Atomic,
            Some(other) => return Err(format!("+listType={other}")),
            None => match marker("patchStrategy") {
                Some("merge" | "merge,retainKeys") => match marker("patchMergeKey") {
                    Some(key) => List::Map(vec![key.to_owned()]),
                    None => List::Set,
                },
                Some("retainKeys") | None => List::Atomic,
                Some(other) => return Err(format!("+patchStrategy={other}")),
            },
        })
    }

    /// Whether the field is owned whole: its own `+structType`/`+mapType` marker, else
    /// that of the struct it is (an OpenAPI definition's `x-kubernetes-map-type`); for a
    /// keyed list, whether its items are. Any other list is one value whatever its items.
    fn atomic(&mut self, f: &GoField, ty: &Ty, list: &List) -> Result<bool, String> {
        if let Some(atomic) = atomic_marker(&f.doc) {
            return Ok(atomic);
        }
        let ty = match (deref(ty), list) {
            (Ty::Slice(item), List::Map(_)) => deref(item),
            (other, _) => other,
        };
        let Ty::Struct(table) = ty else {
            return Ok(false);
        };
        let id = self.names[table].clone();
        Ok(atomic_marker(&self.sources.decl(&id)?.doc).unwrap_or(false))
    }
}

/// What a `+structType` or `+mapType` marker says: `atomic` or `granular`.
fn atomic_marker(doc: &[String]) -> Option<bool> {
    go::markers(doc)
        .into_iter()
        .find(|(k, _)| *k == "structType" || *k == "mapType")
        .map(|(_, v)| v == "atomic")
}

fn deref(ty: &Ty) -> &Ty {
    match ty {
        Ty::Ptr(inner) => deref(inner),
        other => other,
    }
}
