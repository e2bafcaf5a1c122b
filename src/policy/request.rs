//! The request model: one admission request (or object read from a file)
//! as the policies see it.

use super::*;

/// `oldObject`: parsed, or the request's text of it, parsed when first
/// read. Most policies never read it, and it is as large as `object`.
#[derive(Debug, Clone, Default)]
pub enum OldObject<'a> {
    #[default]
    None,
    Json(&'a Json),
    /// Valid JSON text (the server parsed it as a raw value).
    Text(&'a str, OnceCell<Json>),
}

impl OldObject<'_> {
    pub fn get(&self) -> Option<&Json> {
        match self {
            OldObject::None => None,
            OldObject::Json(j) => Some(j),
            OldObject::Text(text, parsed) => Some(parsed.get_or_init(|| {
                serde_json::from_str(text).unwrap_or_else(|e| {
                    // Only nesting deeper than the server's parser allows
                    // gets here; the object is then read as null.
                    tracing::warn!(error = %e, "oldObject could not be parsed");
                    Json::Null
                })
            })),
        }
    }
}

/// The operation of a request. Offline requests (`check`, `test`, `eval`)
/// are a CREATE, UPDATE or DELETE; kube-apiserver also sends CONNECT.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Operation {
    #[default]
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    /// As AdmissionRequest spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }

    /// `CREATE`, `UPDATE` or `DELETE` (as AdmissionRequest spells them):
    /// the operations a request made offline can have.
    pub fn parse(s: &str) -> Option<Operation> {
        match s {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            _ => None,
        }
    }
}

/// The identity offline requests are made as (`check`, `audit`, `test`,
/// `eval --policy`): a fixed auditor, see docs/architecture.md.
pub const OFFLINE_USER: &str = "system:serviceaccount:interlock-system:auditor";

/// How a request made offline (`check`, `test`, `eval`) sends an object:
/// everything of an AdmissionRequest that the object does not say.
#[derive(Debug, Clone, Default)]
pub struct RequestShape {
    pub operation: Operation,
    pub user: String,
    /// `None`: `system:authenticated` only.
    pub groups: Option<Vec<String>>,
    pub subresource: String,
    pub dry_run: bool,
}

impl RequestShape {
    /// A CREATE by `user`, as `interlock check` sends every object.
    pub fn create(user: &str) -> RequestShape {
        RequestShape {
            user: user.into(),
            ..RequestShape::default()
        }
    }
}

/// An admission request, or an object checked offline as one.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub operation: Operation,
    pub object: Option<&'a Json>,
    pub old_object: OldObject<'a>,
    /// The kind of the object (its group, version and kind).
    pub gvk: GroupVersionKind,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub username: String,
    pub groups: Vec<String>,
    pub dry_run: bool,
    pub uid: String,
    /// Whether the object is the cluster's (an admission request, an audit,
    /// a group's validation) rather than one read from files (`check`,
    /// `test`), which an InterlockPolicy's `checkActions` apply to.
    pub live: bool,
    /// Who answers `authorizer...check()`: only admission requests under
    /// `serve` have one; offline the check is an evaluation error.
    pub authorizer: Option<RequestAuthorizer<'a>>,
}

/// The authorizer of an admission request, with what of its user the
/// request's own fields (`username`, `groups`) lack.
#[derive(Debug, Clone, Copy)]
pub struct RequestAuthorizer<'a> {
    pub authorizer: &'a Arc<dyn k8s_authz::Authorizer>,
    pub uid: &'a str,
    pub extra: Option<&'a std::collections::BTreeMap<String, Vec<String>>>,
}

impl<'a> Request<'a> {
    /// The request `interlock check` makes for each object: a CREATE.
    ///
    /// An object with only `metadata.generateName` (a Helm hook Job, a
    /// `kubectl create` Job) is a request too: kube-apiserver runs admission
    /// before it generates the name, so policies see the generateName and an
    /// empty `request.name`. `None` only without apiVersion, kind or metadata.
    pub fn create(object: &'a Json, username: &str) -> Option<Request<'a>> {
        Request::build(object, None, &RequestShape::create(username))
    }

    /// The request that `shape` makes of `object`: a CREATE or UPDATE
    /// sends it (an UPDATE with `old` as oldObject), a DELETE sends it as
    /// oldObject and no object, as kube-apiserver does. `None` as for
    /// [`Request::create`].
    pub fn build(
        object: &'a Json,
        old: Option<&'a Json>,
        shape: &RequestShape,
    ) -> Option<Request<'a>> {
        let mut r = Request::named(object, &shape.user)?;
        r.operation = shape.operation;
        match shape.operation {
            Operation::Create | Operation::Connect => {}
            Operation::Update => r.old_object = old.map_or(OldObject::None, OldObject::Json),
            Operation::Delete => {
                r.object = None;
                r.old_object = OldObject::Json(object);
            }
        }
        if let Some(groups) = &shape.groups {
            r.groups = groups.clone();
        }
        r.subresource = shape.subresource.clone();
        r.dry_run = shape.dry_run;
        Some(r)
    }

    /// A CREATE of `object` by `username`.
    pub(super) fn named(object: &'a Json, username: &str) -> Option<Request<'a>> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let meta = object.get("metadata")?;
        let field = |f: &str| meta.get(f).and_then(Json::as_str).unwrap_or("");
        let (group, name) = (resources::group_of(api_version), field("name"));
        if name.is_empty() && field("generateName").is_empty() {
            return None;
        }
        // A Namespace request carries the Namespace's own name as namespace.
        let namespace = if group.is_empty() && kind == "Namespace" {
            name
        } else {
            field("namespace")
        };
        Some(Request {
            operation: Operation::Create,
            object: Some(object),
            old_object: OldObject::None,
            gvk: GroupVersionKind::from_api_version(api_version, kind),
            resource: resources::resource_of(group, kind),
            subresource: String::new(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            username: username.to_string(),
            groups: vec!["system:authenticated".into()],
            dry_run: false,
            uid: String::new(),
            live: false,
            authorizer: None,
        })
    }

    /// What the `authorizer` variable asks, for the request's user.
    pub(super) fn authority(&self) -> Option<Arc<k8s_authz::Authority>> {
        let a = self.authorizer?;
        Some(Arc::new(k8s_authz::Authority {
            authorizer: a.authorizer.clone(),
            user: k8s_authz::UserInfo {
                username: self.username.clone(),
                uid: a.uid.to_string(),
                groups: self.groups.clone(),
                extra: a.extra.cloned().unwrap_or_default(),
            },
        }))
    }

    /// Is this a request on a Namespace itself? Its `namespace` is then the
    /// Namespace's name, but it is cluster-scoped and has no namespaceObject.
    pub fn is_namespace_request(&self) -> bool {
        self.gvk.group().is_empty() && self.resource == "namespaces"
    }

    /// Is this a request from kube-apiserver (which gives every admission
    /// request a uid), rather than one made offline by `check`, an audit or
    /// a group's validation (which have none)?
    pub fn is_admission(&self) -> bool {
        !self.uid.is_empty()
    }

    /// Is the requested object namespaced?
    pub fn is_namespaced(&self) -> bool {
        !self.namespace.is_empty() && !self.is_namespace_request()
    }

    /// The `request` variable, shaped like kube-apiserver's AdmissionRequest:
    /// subResource is left out for the main resource, and name and namespace
    /// when empty (reading them is "no such key"). Built as CEL values, not
    /// JSON: policies read a field or two of it on every request.
    pub fn to_value(&self) -> Value<'static> {
        fn map(entries: Vec<(&'static str, Value<'static>)>) -> Value<'static> {
            Value::map(
                entries
                    .into_iter()
                    .map(|(k, v)| (Key::String(Str::Borrowed(k)), v))
                    .collect(),
            )
        }
        let s = |v: &str| Value::string(v);
        let gvk = |last: &'static str, value: &str| {
            map(vec![
                ("group", s(self.gvk.group())),
                ("version", s(self.gvk.version())),
                (last, s(value)),
            ])
        };
        let kind = gvk("kind", self.gvk.kind());
        let resource = gvk("resource", &self.resource);
        let mut entries = vec![
            ("uid", s(&self.uid)),
            ("kind", kind.clone()),
            ("resource", resource.clone()),
        ];
        if !self.subresource.is_empty() {
            entries.push(("subResource", s(&self.subresource)));
        }
        entries.extend([("requestKind", kind), ("requestResource", resource)]);
        if !self.name.is_empty() {
            entries.push(("name", s(&self.name)));
        }
        if !self.namespace.is_empty() {
            entries.push(("namespace", s(&self.namespace)));
        }
        let groups = self.groups.iter().map(|g| s(g)).collect();
        entries.extend([
            ("operation", s(self.operation.as_str())),
            (
                "userInfo",
                map(vec![
                    ("username", s(&self.username)),
                    ("groups", Value::list(groups)),
                ]),
            ),
            ("dryRun", Value::Bool(self.dry_run)),
        ]);
        map(entries)
    }

    pub(crate) fn reviewed(&self) -> Option<&Json> {
        self.object.or_else(|| self.old_object.get())
    }
}
