//! Policy at the chokepoint (SPEC §16): the Cedar rules in `$AILERON_HOME/policy/*.cedar`,
//! checked against a schema generated from the installed actions, and evaluated for each run.
//!
//! Named `rules` because `aileron_core::policy` is the connector capability check (the manifest
//! and the action's subset), a different thing.
//!
//! A set is loaded whole or not at all: a file that does not parse, or a rule that does not
//! validate against the schema, and the set is refused with the file, line and a hint (the
//! daemon keeps the set it had). Files named `*.shadow.cedar` form a second set that is
//! evaluated and audited but never enforced. With no files at all, nothing changes: every run
//! is allowed as before.

pub mod admission;
pub mod counters;
mod native;
pub mod replay;
pub mod schema;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use aileron_core::action::ActionFile;
use aileron_core::parse_error::ParseError;
use aileron_core::sha256::Sha256;
use cedar_policy::{
    Authorizer, Context, Decision, Effect, Entities, EntityUid, Policy, PolicyId, PolicySet, Request, Schema,
    ValidationMode, Validator,
};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

pub use schema::ArgTypes;

/// The folder under the home.
pub const POLICY_DIR: &str = "policy";
/// The suffix of a file whose rules are evaluated and audited, never enforced.
pub const SHADOW_SUFFIX: &str = ".shadow.cedar";
/// The id of the permit-all added to a set that has no `permit` (so forbid-only files work).
const IMPLICIT_PERMIT: &str = "aileron:implicit-permit";
/// The annotation that turns a `forbid` into "ask a human".
const ASK: &str = "ask";

/// One loaded policy set: the enforced rules, the shadow rules, and what they were loaded from.
pub struct RuleSet {
    /// `sha256:` over every file's name and bytes, in name order; `none` with no files.
    pub hash: String,
    /// The files read, in name order (names only, under `policy/`).
    pub files: Vec<String>,
    enforced: Option<Compiled>,
    shadow: Option<Compiled>,
    /// Whether any rule reads `runs_last_hour`, `runs_last_day` or `session_runs`: only then is
    /// an admission counted durably.
    pub counts_runs: bool,
    /// Each rule's id with the file it is in and its effect (for `aileron policy check` and the
    /// console).
    pub rules: Vec<RuleInfo>,
}

/// A rule as the CLI and console list it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuleInfo {
    pub id: String,
    pub file: String,
    /// `permit`, `forbid` or `ask`.
    pub effect: &'static str,
    pub shadow: bool,
    /// The rule's text, as Cedar prints it.
    pub text: String,
    /// The one tool its scope names (`resource == Aileron::Tool::"x"`); `None`: it may apply to any.
    pub tool: Option<String>,
}

struct Compiled {
    all: PolicySet,
    /// The `@ask` forbids' reasons.
    asks: HashMap<PolicyId, String>,
    schema: Schema,
    args: ArgTypes,
    authorizer: std::sync::Arc<Authorizer>,
    types: Types,
    /// Per tool and kind of caller, the rules whose scope can match (built on first use): Cedar
    /// walks every rule of a set for each request, so one that names another tool or another
    /// kind of principal is left out of the set asked — it could not apply anyway.
    scoped: std::sync::Mutex<HashMap<(String, bool), std::sync::Arc<Scoped>>>,
    /// Cedar's JSON form of each rule [`native`] can evaluate (those in its subset).
    natives: HashMap<PolicyId, serde_json::Value>,
}

/// The rules that can match one tool and kind of caller.
struct Scoped {
    all: PolicySet,
    /// The same without the `@ask` forbids (what decides whether an ask would be allowed at all).
    without_asks: PolicySet,
    /// All of them compiled for direct evaluation, when every one is in the subset.
    native: Option<native::NativeSet>,
}

/// Who is calling, as the rules see them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A session: its id, the agent's name, whether launch confined it.
    Agent { session_id: String, agent: String, contained: bool },
    /// The local user (`local-user`) or the web page (`web`).
    Human { id: String },
}

impl Subject {
    /// Who the rules see calling: an agent's session (its id, the agent `agent_of` names, and
    /// whether launch contained it), or a human. An approved entry asked for without a session
    /// is carried out by the approval executor (a service actor): it was the local user's call.
    pub fn of(
        actor: &aileron_core::audit::Actor,
        session_id: Option<&str>,
        approved: bool,
        contained: bool,
        agent_of: impl FnOnce(&str) -> String,
    ) -> Subject {
        use aileron_core::audit::ActorType;
        match (actor.r#type, session_id) {
            (ActorType::Agent, session) => {
                let session_id = session.unwrap_or(&actor.id).to_string();
                Subject::Agent { agent: agent_of(&session_id), session_id, contained }
            }
            (ActorType::Service, None) if approved => {
                Subject::Human { id: crate::platform::principal::LOCAL_USER.to_string() }
            }
            _ => Subject::Human { id: actor.id.clone() },
        }
    }

    /// The key runs are counted under.
    pub fn key(&self) -> String {
        match self {
            Subject::Agent { session_id, .. } => format!("agent:{session_id}"),
            Subject::Human { id } => format!("human:{id}"),
        }
    }
}

/// One call to decide on.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub subject: &'a Subject,
    /// `run` or `http_request`.
    pub verb: &'static str,
    /// The action (or proxy operation) name.
    pub tool: &'a str,
    pub connector: &'a str,
    pub approval_required: bool,
    pub args: &'a Map<String, Value>,
    pub now: DateTime<Utc>,
    pub counts: counters::Counts,
}

/// What the rules decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused, by these rules (none: no `permit` matched).
    Forbid {
        rules: Vec<String>,
        errors: Vec<String>,
    },
    /// Allowed only with a human's approval: the `@ask` rules and their reasons.
    Ask {
        rules: Vec<String>,
        reasons: Vec<String>,
    },
}

impl Verdict {
    pub fn outcome(&self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Forbid { .. } => "forbid",
            Verdict::Ask { .. } => "ask",
        }
    }

    /// Whether the call goes on (and so is counted): an allow, or an ask a human approved.
    pub fn admits(&self, approved: bool) -> bool {
        matches!(self, Verdict::Allow) || (approved && matches!(self, Verdict::Ask { .. }))
    }
}

/// `allow`, `forbid by <rules>` (or `forbid: no permit rule matches`, or why the rules could not
/// decide), `ask (<reasons>) by <rules>`:
/// how `aileron policy test` and `replay` say it.
impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Allow => f.write_str("allow"),
            Verdict::Forbid { rules, errors } if rules.is_empty() => match errors.first() {
                Some(error) => write!(f, "forbid: the rules could not decide this call ({error})"),
                None => f.write_str("forbid: no permit rule matches"),
            },
            Verdict::Forbid { rules, .. } => write!(f, "forbid by {}", rules.join(", ")),
            Verdict::Ask { rules, reasons } => write!(f, "ask ({}) by {}", reasons.join("; "), rules.join(", ")),
        }
    }
}

/// Enforced and shadow verdicts of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub enforced: Verdict,
    /// `None` without shadow files.
    pub shadow: Option<Verdict>,
}

impl RuleSet {
    /// The set of a home without policy files: everything allowed.
    pub fn empty() -> RuleSet {
        RuleSet {
            hash: "none".into(),
            files: Vec::new(),
            enforced: None,
            shadow: None,
            counts_runs: false,
            rules: Vec::new(),
        }
    }

    /// The rules that may apply to `tool`: those whose scope names it, and those that name none.
    pub fn rules_for<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a RuleInfo> + 'a {
        self.rules.iter().filter(move |rule| rule.tool.as_deref().is_none_or(|named| named == tool))
    }

    /// Whether there is anything to evaluate.
    pub fn is_empty(&self) -> bool {
        self.enforced.is_none() && self.shadow.is_none()
    }

    /// Reads and checks every `*.cedar` file in `dir` against the schema of `actions`.
    pub fn load<'a>(dir: &Path, actions: impl IntoIterator<Item = &'a ActionFile>) -> Result<RuleSet, Box<ParseError>> {
        let files = policy_files(dir).map_err(|e| {
            Box::new(ParseError::new(
                dir.display().to_string(),
                None,
                None,
                format!("cannot read the policy folder: {e}"),
                "check the folder's permissions",
            ))
        })?;
        let mut sources = Vec::new();
        for path in &files {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Box::new(ParseError::new(path.display().to_string(), None, None, e.to_string(), "check the file"))
            })?;
            sources.push((path.clone(), text));
        }
        RuleSet::from_sources(&sources, actions)
    }

    /// [`RuleSet::load`] over files already read: `(path, text)`, in name order.
    pub fn from_sources<'a>(
        sources: &[(PathBuf, String)],
        actions: impl IntoIterator<Item = &'a ActionFile>,
    ) -> Result<RuleSet, Box<ParseError>> {
        if sources.is_empty() {
            return Ok(RuleSet::empty());
        }
        let args = ArgTypes::of(actions);
        let schema = Schema::from_json_value(args.schema_json()).map_err(|e| {
            Box::new(ParseError::new(
                POLICY_DIR,
                None,
                None,
                format!("the schema generated from the installed actions is not valid Cedar: {e}"),
                "report this: an action's inputs produced a schema Cedar refuses",
            ))
        })?;
        let mut hash = Sha256::new();
        let mut enforced = Vec::new();
        let mut shadow = Vec::new();
        let mut rules = Vec::new();
        let mut ids: BTreeMap<String, String> = BTreeMap::new();
        for (path, text) in sources {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            hash.update((name.len() as u64).to_be_bytes());
            hash.update(name.as_bytes());
            hash.update((text.len() as u64).to_be_bytes());
            hash.update(text.as_bytes());
            let is_shadow = name.ends_with(SHADOW_SUFFIX);
            let shown = format!("{POLICY_DIR}/{name}");
            let set = PolicySet::from_str(text).map_err(|errors| {
                let (line, message) = first_diagnostic(text, &errors);
                Box::new(ParseError::new(
                    &shown,
                    line,
                    None,
                    format!("not valid Cedar: {message}"),
                    "see https://docs.cedarpolicy.com/policies/syntax-policy.html; `aileron policy check` checks \
                     the files without the daemon",
                ))
            })?;
            for (index, policy) in set.policies().enumerate() {
                let id = match policy.annotation("id") {
                    Some(id) => id.to_string(),
                    None => format!("{name}#{}", index + 1),
                };
                if let Some(other) = ids.insert(id.clone(), shown.clone()) {
                    return Err(Box::new(ParseError::new(
                        &shown,
                        None,
                        None,
                        format!("two rules have the id `{id}` (the other is in {other})"),
                        "give each rule its own @id(\"...\")",
                    )));
                }
                let policy = policy.new_id(PolicyId::new(&id));
                let ask = policy.annotation(ASK).map(str::to_string);
                if ask.is_some() && policy.effect() == Effect::Permit {
                    return Err(Box::new(ParseError::new(
                        &shown,
                        None,
                        None,
                        format!("rule `{id}` is a permit with @ask: only a forbid can ask"),
                        "write it as forbid(...) with @ask(\"why\"): the call then waits for approval instead of \
                         being refused",
                    )));
                }
                rules.push(RuleInfo {
                    id: id.clone(),
                    file: shown.clone(),
                    effect: match (policy.effect(), &ask) {
                        (Effect::Permit, _) => "permit",
                        (Effect::Forbid, Some(_)) => "ask",
                        (Effect::Forbid, None) => "forbid",
                    },
                    shadow: is_shadow,
                    text: policy.to_string(),
                    tool: match policy.resource_constraint() {
                        cedar_policy::ResourceConstraint::Eq(uid) | cedar_policy::ResourceConstraint::In(uid) => {
                            Some(uid.id().unescaped().to_string())
                        }
                        _ => None,
                    },
                });
                let entry = (policy, ask, shown.clone(), text.clone());
                if is_shadow { shadow.push(entry) } else { enforced.push(entry) }
            }
        }
        let counts_runs = enforced
            .iter()
            .chain(&shadow)
            .any(|(policy, ..)| reads(policy, &["runs_last_hour", "runs_last_day", "session_runs"]));
        Ok(RuleSet {
            hash: format!("sha256:{}", hex::encode(hash.finalize())),
            files: sources
                .iter()
                .filter_map(|(path, _)| Some(path.file_name()?.to_string_lossy().into_owned()))
                .collect(),
            enforced: compile(enforced, &schema, &args)?,
            shadow: compile(shadow, &schema, &args)?,
            counts_runs,
            rules,
        })
    }

    /// The verdicts on `call`: the enforced set's, and the shadow set's when there is one.
    pub fn decide(&self, call: &Call<'_>) -> Decided {
        let enforced = match &self.enforced {
            Some(compiled) => compiled.decide(call),
            None => Verdict::Allow,
        };
        Decided { enforced, shadow: self.shadow.as_ref().map(|compiled| compiled.decide(call)) }
    }
}

impl RuleSet {
    /// This set's enforced rules without those that read `context.args` (for a replay over the
    /// audit log, which keeps no argument values), and the ids left out.
    pub fn without_argument_rules(&self) -> (RuleSet, Vec<String>) {
        let mut skipped = Vec::new();
        let enforced = self.enforced.as_ref().and_then(|compiled| {
            let mut entries = Vec::new();
            for policy in compiled.all.policies() {
                let id = policy.id().to_string();
                if id == IMPLICIT_PERMIT {
                    continue;
                }
                if reads(policy, &["args"]) {
                    skipped.push(id);
                    continue;
                }
                let ask = compiled.asks.get(policy.id()).cloned();
                entries.push((policy.clone(), ask, String::new(), String::new()));
            }
            compile(entries, &compiled.schema, &compiled.args).ok().flatten()
        });
        let set = RuleSet {
            hash: self.hash.clone(),
            files: self.files.clone(),
            enforced,
            shadow: None,
            counts_runs: self.counts_runs,
            rules: Vec::new(),
        };
        (set, skipped)
    }
}

/// Whether `policy` reads `context.<name>` for any of `names` (`context.name`, `context has
/// name`): looked for in Cedar's JSON form of the rule (made once), where a comment is gone, a
/// string literal cannot pass for an attribute and `context.args.name` is another thing.
fn reads(policy: &Policy, names: &[&str]) -> bool {
    fn walk(json: &Value, names: &[&str]) -> bool {
        match json {
            Value::Object(object) => {
                let on_context = object.get("left").and_then(|left| left.get("Var")).is_some_and(|v| v == "context");
                let attr = object.get("attr").and_then(Value::as_str);
                (on_context && attr.is_some_and(|attr| names.contains(&attr)))
                    || object.values().any(|value| walk(value, names))
            }
            Value::Array(items) => items.iter().any(|item| walk(item, names)),
            _ => false,
        }
    }
    policy.to_json().is_ok_and(|json| walk(&json, names))
}

/// The policy files in `dir`, in name order; none when it does not exist.
pub fn policy_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.ends_with(".cedar") && !name.starts_with('.') && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The first diagnostic's line in `text` and its message (with its help, when it has one).
fn first_diagnostic(text: &str, diagnostic: &dyn miette::Diagnostic) -> (Option<usize>, String) {
    let line = diagnostic.labels().and_then(|mut labels| labels.next()).map(|label| line_at(text, label.offset()));
    let mut message = diagnostic.to_string();
    if let Some(related) = diagnostic.related().and_then(|mut related| related.next()) {
        message = related.to_string();
        if let Some(help) = related.help() {
            message = format!("{message} ({help})");
        }
        let line = related.labels().and_then(|mut labels| labels.next()).map(|label| line_at(text, label.offset()));
        return (line, message);
    }
    if let Some(help) = diagnostic.help() {
        message = format!("{message} ({help})");
    }
    (line, message)
}

/// The 1-based line of byte `offset` in `text`.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

type Entry = (Policy, Option<String>, String, String);

/// Validates `entries` (strictly) against `schema` and builds the sets evaluation needs.
fn compile(entries: Vec<Entry>, schema: &Schema, args: &ArgTypes) -> Result<Option<Compiled>, Box<ParseError>> {
    if entries.is_empty() {
        return Ok(None);
    }
    let mut all = PolicySet::new();
    let mut asks = HashMap::new();
    let mut sources = HashMap::new();
    let has_permit = entries.iter().any(|(policy, ..)| policy.effect() == Effect::Permit);
    for (policy, ask, file, text) in entries {
        sources.insert(policy.id().clone(), (file, text));
        if let Some(reason) = ask {
            asks.insert(policy.id().clone(), reason);
        }
        all.add(policy).expect("ids are unique");
    }
    let validation = Validator::new(schema.clone()).validate(&all, ValidationMode::Strict);
    if let Some(error) = validation.validation_errors().next() {
        let (file, text) = sources.get(error.policy_id()).cloned().unwrap_or_default();
        let (line, message) = first_diagnostic(&text, error);
        let hint = args.hint_for(&message).unwrap_or_else(|| {
            "rules see principal (Aileron::Agent with agent and contained, or Aileron::Human), action \
             (Aileron::Action::\"run\" or \"http_request\"), resource (Aileron::Tool with connector and approval_required) and context \
             (args, now, runs_last_hour, runs_last_day, session_runs); an argument is read after `context.args has \
             <name>`"
                .to_string()
        });
        return Err(Box::new(ParseError::new(
            file,
            line,
            None,
            format!("rule `{}` does not fit the installed actions: {message}", error.policy_id()),
            hint,
        )));
    }
    if !has_permit {
        let permit = Policy::parse(Some(PolicyId::new(IMPLICIT_PERMIT)), "permit(principal, action, resource);")
            .expect("a constant rule parses");
        all.add(permit).expect("a reserved id");
    }
    Ok(Some(Compiled {
        natives: natives(&all),
        all,
        asks,
        schema: schema.clone(),
        args: args.clone(),
        authorizer: std::sync::Arc::new(Authorizer::new()),
        types: Types::new(),
        scoped: Default::default(),
    }))
}

impl Compiled {
    fn decide(&self, call: &Call<'_>) -> Verdict {
        let scoped = self.scoped_for(call);
        let args = match self.args.native_args(call.args) {
            Ok(args) => args,
            // Fails closed: a value rules cannot hold as sent would pass a rule that names it.
            Err(error) => return Verdict::Forbid { rules: Vec::new(), errors: vec![error] },
        };
        self.decide_natively(call, &scoped, &args).unwrap_or_else(|| self.decide_with_cedar(call, &scoped, &args))
    }

    /// What [`native`] decides, when every rule that can match is in its subset and none gave up.
    fn decide_natively(&self, call: &Call<'_>, scoped: &Scoped, args: &[(&str, native::Val<'_>)]) -> Option<Verdict> {
        let (forbids, only_asks, permitted) = scoped.native.as_ref()?.decide(&native::Facts::new(call, args)).ok()?;
        let ids = || forbids.iter().map(|id| id.to_string()).collect::<Vec<_>>();
        // Cedar's semantics: a satisfied forbid refuses, unless every one is an `@ask` and a
        // permit is satisfied (then it asks); no permit, no call.
        Some(match (forbids.is_empty(), only_asks, permitted) {
            (true, _, true) => Verdict::Allow,
            (false, true, true) => Verdict::Ask {
                reasons: forbids.iter().map(|id| self.asks[&PolicyId::new(*id)].clone()).collect(),
                rules: ids(),
            },
            (false, false, _) => Verdict::Forbid { rules: ids(), errors: Vec::new() },
            (_, _, false) => Verdict::Forbid { rules: Vec::new(), errors: Vec::new() },
        })
    }

    /// What Cedar decides: for a call whose rules are not all in [`native`]'s subset, or one it
    /// gave up on.
    fn decide_with_cedar(&self, call: &Call<'_>, scoped: &Scoped, args: &[(&str, native::Val<'_>)]) -> Verdict {
        let (request, entities) = match self.request(call, args) {
            Ok(built) => built,
            // Fails closed: a call the rules cannot be asked about is not run.
            Err(error) => return Verdict::Forbid { rules: Vec::new(), errors: vec![error] },
        };
        let authorizer = &self.authorizer;
        let (all, without_asks) = (&scoped.all, &scoped.without_asks);
        let response = authorizer.is_authorized(&request, all, &entities);
        // A rule that errs (it cannot, once validated, but a forbid that might have refused
        // is never read as silence): the call is refused.
        let errors: Vec<String> = response.diagnostics().errors().map(|error| error.to_string()).collect();
        let erring_forbid = response
            .diagnostics()
            .errors()
            .map(|cedar_policy::AuthorizationError::PolicyEvaluationError(error)| error.policy_id().clone())
            .find(|id| all.policy(id).is_some_and(|p| p.effect() == Effect::Forbid));
        if let Some(id) = erring_forbid {
            return Verdict::Forbid { rules: vec![id.to_string()], errors };
        }
        // In id order: Cedar's reasons are a set.
        let mut reasons: Vec<PolicyId> = response.diagnostics().reason().cloned().collect();
        reasons.sort_by_key(ToString::to_string);
        match response.decision() {
            Decision::Allow => Verdict::Allow,
            Decision::Deny if !reasons.is_empty() && reasons.iter().all(|id| self.asks.contains_key(id)) => {
                // Only asks stand in the way: allowed with approval, if the rest allows it.
                let rest = authorizer.is_authorized(&request, without_asks, &entities);
                match rest.decision() {
                    Decision::Allow => Verdict::Ask {
                        reasons: reasons.iter().map(|id| self.asks[id].clone()).collect(),
                        rules: reasons.iter().map(ToString::to_string).collect(),
                    },
                    Decision::Deny => {
                        let mut rules: Vec<String> = rest.diagnostics().reason().map(ToString::to_string).collect();
                        rules.sort();
                        Verdict::Forbid { rules, errors }
                    }
                }
            }
            Decision::Deny => Verdict::Forbid { rules: reasons.iter().map(ToString::to_string).collect(), errors },
        }
    }

    /// The sets of rules whose scope can match `call`'s tool and kind of caller.
    fn scoped_for(&self, call: &Call<'_>) -> std::sync::Arc<Scoped> {
        let agent = matches!(call.subject, Subject::Agent { .. });
        let key = (call.tool.to_string(), agent);
        let mut scoped = self.scoped.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(sets) = scoped.get(&key) {
            return sets.clone();
        }
        let principal = if agent { &self.types.agent } else { &self.types.human };
        let mut sets = Scoped {
            all: PolicySet::new(),
            without_asks: PolicySet::new(),
            native: Some(native::NativeSet::default()),
        };
        for policy in self.all.policies().filter(|p| may_match(p, principal, &self.types.tool, call.tool)) {
            let ask = self.asks.contains_key(policy.id());
            if !ask {
                sets.without_asks.add(policy.clone()).expect("ids are unique");
            }
            let compiled = self.natives.get(policy.id()).is_some_and(|json| {
                sets.native
                    .as_mut()
                    .is_some_and(|rules| rules.add(&policy.id().to_string(), policy.effect(), json, ask))
            });
            if !compiled {
                sets.native = None;
            }
            sets.all.add(policy.clone()).expect("ids are unique");
        }
        let sets = std::sync::Arc::new(sets);
        scoped.insert(key, sets.clone());
        sets
    }

    /// The request and entities of `call`, built with Cedar's constructors rather than parsed
    /// from JSON, and not validated against the schema each time: the set was (strictly) when it
    /// loaded, and every value here has the schema's type by construction (the arguments through
    /// [`ArgTypes::native_args`], which keeps only those it types).
    fn request(&self, call: &Call<'_>, args: &[(&str, native::Val<'_>)]) -> Result<(Request, Entities), String> {
        use cedar_policy::{Entity, EntityId, RestrictedExpression as Expr};
        let uid = |kind: &cedar_policy::EntityTypeName, id: &str| {
            EntityUid::from_type_name_and_id(kind.clone(), EntityId::new(id))
        };
        let (principal, attrs) = match call.subject {
            Subject::Agent { session_id, agent, contained } => (
                uid(&self.types.agent, session_id),
                HashMap::from([
                    ("agent".to_string(), Expr::new_string(agent.clone())),
                    ("contained".to_string(), Expr::new_bool(*contained)),
                ]),
            ),
            Subject::Human { id } => (uid(&self.types.human, id), HashMap::new()),
        };
        let action = if call.verb == "run" { self.types.run.clone() } else { self.types.http_request.clone() };
        let resource = uid(&self.types.tool, call.tool);
        let tool = Entity::new(
            resource.clone(),
            HashMap::from([
                ("connector".to_string(), Expr::new_string(call.connector.to_string())),
                ("approval_required".to_string(), Expr::new_bool(call.approval_required)),
            ]),
            std::collections::HashSet::new(),
        )
        .map_err(|e| format!("the tool: {e}"))?;
        let caller = Entity::new(principal.clone(), attrs, std::collections::HashSet::new())
            .map_err(|e| format!("the principal: {e}"))?;
        let entities = Entities::from_entities([tool, caller], None).map_err(|e| format!("the entities: {e}"))?;
        let context = Context::from_pairs([
            ("args".to_string(), ArgTypes::args_expression(args).map_err(|e| format!("the arguments: {e}"))?),
            ("now".to_string(), Expr::new_datetime(call.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))),
            ("runs_last_hour".to_string(), Expr::new_long(call.counts.last_hour)),
            ("runs_last_day".to_string(), Expr::new_long(call.counts.last_day)),
            ("session_runs".to_string(), Expr::new_long(call.counts.session)),
        ])
        .map_err(|e| format!("the context: {e}"))?;
        let request =
            Request::new(principal, action, resource, context, None).map_err(|e| format!("the request: {e}"))?;
        Ok((request, entities))
    }
}

/// The rules of `all` that [`native`] can evaluate.
fn natives(all: &PolicySet) -> HashMap<PolicyId, serde_json::Value> {
    all.policies().filter_map(|policy| Some((policy.id().clone(), native::NativeSet::json(policy)?))).collect()
}

/// Whether `policy`'s scope can match a call of `tool` by a principal of type `principal`
/// (entities here have no parents, so `in` matches only the entity itself).
fn may_match(
    policy: &Policy,
    principal: &cedar_policy::EntityTypeName,
    tool_type: &cedar_policy::EntityTypeName,
    tool: &str,
) -> bool {
    use cedar_policy::{PrincipalConstraint as P, ResourceConstraint as R};
    let principal_ok = match policy.principal_constraint() {
        P::Any => true,
        P::Is(kind) | P::IsIn(kind, _) => &kind == principal,
        P::Eq(uid) | P::In(uid) => uid.type_name() == principal,
    };
    let names_tool = |uid: &EntityUid| uid.type_name() == tool_type && uid.id().unescaped() == tool;
    let resource_ok = match policy.resource_constraint() {
        R::Any => true,
        R::Is(kind) => &kind == tool_type,
        R::Eq(uid) | R::In(uid) => names_tool(&uid),
        R::IsIn(kind, uid) => &kind == tool_type && names_tool(&uid),
    };
    principal_ok && resource_ok
}

/// The entity types and actions of SPEC §16, parsed once.
#[derive(Clone)]
struct Types {
    agent: cedar_policy::EntityTypeName,
    human: cedar_policy::EntityTypeName,
    tool: cedar_policy::EntityTypeName,
    run: EntityUid,
    http_request: EntityUid,
}

impl Types {
    fn new() -> Types {
        let kind = |name: &str| cedar_policy::EntityTypeName::from_str(name).expect("a constant type name");
        let action =
            |id: &str| EntityUid::from_type_name_and_id(kind("Aileron::Action"), cedar_policy::EntityId::new(id));
        Types {
            agent: kind("Aileron::Agent"),
            human: kind("Aileron::Human"),
            tool: kind("Aileron::Tool"),
            run: action("run"),
            http_request: action("http_request"),
        }
    }
}

/// The daemon's policy: the set in force, why a newer one was refused, and the run counters.
pub struct LiveRules {
    dir: PathBuf,
    current: std::sync::RwLock<std::sync::Arc<RuleSet>>,
    /// Why the files on disk are not what is in force (they failed to load), if they are not.
    problem: std::sync::RwLock<Option<String>>,
    /// The files and action generation the set in force (or the refusal) was made from.
    seen: std::sync::Mutex<Option<Fingerprint>>,
    pub counters: counters::Counters,
}

/// What a reload compares: each policy file's name, length and modification time, and the
/// action set's generation (a new action changes the schema).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    files: Vec<(PathBuf, u64, Option<std::time::SystemTime>)>,
    actions: u64,
}

/// What [`LiveRules::reload`] did.
#[derive(Debug)]
pub enum Reloaded {
    /// Nothing changed on disk.
    Unchanged,
    /// A new set is in force.
    Loaded { hash: String, files: Vec<String> },
    /// The files changed and do not load: the previous set stays.
    Refused(Box<ParseError>),
}

impl LiveRules {
    /// The policy of `home_dir/policy`, loaded now against `actions`. Files that do not load at
    /// start leave no earlier set to keep: every run is refused until they are fixed (a rule
    /// meant to forbid must never be dropped by a typo).
    pub fn open(home_dir: &Path, generation: u64, actions: Vec<std::sync::Arc<ActionFile>>) -> LiveRules {
        let live = LiveRules {
            dir: home_dir.join(POLICY_DIR),
            current: std::sync::RwLock::new(std::sync::Arc::new(RuleSet::empty())),
            problem: std::sync::RwLock::new(None),
            seen: std::sync::Mutex::new(None),
            counters: counters::Counters::default(),
        };
        if let Reloaded::Refused(error) = live.reload(generation, || actions) {
            *live.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
                std::sync::Arc::new(RuleSet::refusing(&error));
        }
        live
    }

    /// The set in force.
    pub fn current(&self) -> std::sync::Arc<RuleSet> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Why the files on disk are not in force, when they are not.
    pub fn problem(&self) -> Option<String> {
        self.problem.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The policy folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Loads the files again if they (or the actions) changed since the last look. `actions`
    /// lists the installed actions, and is called only then: the daemon looks twice a second,
    /// and listing 10,000 actions each time for nothing would walk them all.
    pub fn reload(&self, generation: u64, actions: impl FnOnce() -> Vec<std::sync::Arc<ActionFile>>) -> Reloaded {
        let fingerprint = Fingerprint { files: fingerprint(&self.dir), actions: generation };
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.as_ref() == Some(&fingerprint) {
            return Reloaded::Unchanged;
        }
        *seen = Some(fingerprint);
        let actions = actions();
        match RuleSet::load(&self.dir, actions.iter().map(|action| action.as_ref())) {
            Ok(set) => {
                let reloaded = Reloaded::Loaded { hash: set.hash.clone(), files: set.files.clone() };
                let unchanged = self.current().hash == set.hash && self.problem().is_none();
                *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = std::sync::Arc::new(set);
                *self.problem.write().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                if unchanged { Reloaded::Unchanged } else { reloaded }
            }
            Err(error) => {
                *self.problem.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(error.to_string());
                Reloaded::Refused(error)
            }
        }
    }
}

fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<std::time::SystemTime>)> {
    policy_files(dir)
        .unwrap_or_default()
        .into_iter()
        .map(|path| {
            let metadata = std::fs::metadata(&path).ok();
            let len = metadata.as_ref().map_or(0, std::fs::Metadata::len);
            let modified = metadata.and_then(|m| m.modified().ok());
            (path, len, modified)
        })
        .collect()
}

impl RuleSet {
    /// A set that refuses every call, for files that failed to load at start.
    fn refusing(error: &ParseError) -> RuleSet {
        let schema = Schema::from_json_value(ArgTypes::default().schema_json()).expect("the base schema is valid");
        let forbid =
            Policy::parse(Some(PolicyId::new("aileron:policy-not-loaded")), "forbid(principal, action, resource);")
                .expect("a constant rule parses");
        let mut all = PolicySet::new();
        all.add(forbid).expect("one rule");
        let compiled = Compiled {
            natives: natives(&all),
            all,
            asks: HashMap::new(),
            schema,
            args: ArgTypes::default(),
            authorizer: std::sync::Arc::new(Authorizer::new()),
            types: Types::new(),
            scoped: Default::default(),
        };
        RuleSet {
            hash: "unloaded".into(),
            files: Vec::new(),
            enforced: Some(compiled),
            shadow: None,
            counts_runs: false,
            rules: vec![RuleInfo {
                id: "aileron:policy-not-loaded".into(),
                file: error.file.clone(),
                effect: "forbid",
                shadow: false,
                text: format!("every call is refused until the policy files load: {error}"),
                tool: None,
            }],
        }
    }
}

#[cfg(test)]
impl RuleSet {
    /// The enforced verdict [`native`] gives (`None`: it leaves the call to Cedar) and Cedar's.
    fn decide_both_ways(&self, call: &Call<'_>) -> (Option<Verdict>, Verdict) {
        let compiled = self.enforced.as_ref().expect("rules");
        let scoped = compiled.scoped_for(call);
        match compiled.args.native_args(call.args) {
            Ok(args) => {
                (compiled.decide_natively(call, &scoped, &args), compiled.decide_with_cedar(call, &scoped, &args))
            }
            // Refused before either is asked, as `decide` refuses it.
            Err(error) => {
                let refused = Verdict::Forbid { rules: Vec::new(), errors: vec![error] };
                (Some(refused.clone()), refused)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::counters::{Counters, Counts};
    use super::*;

    /// The `send` action the rules' tests decide calls of: `to` (string, required), `amount`
    /// (number), `count` (integer), `tags` (array of strings).
    pub(super) const SEND: &str = "+++\nname = \"send\"\nversion = \"1.0.0\"\n\n[[requires.connectors]]\nname = \
        \"github://acme/mail\"\nversion = \"1.0.0\"\nhash = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n\
        capabilities = [\"send\"]\n\n[match]\nintent = \"send mail\"\n\n[[inputs]]\nname = \"to\"\ntype = \"string\"\n\
        required = true\ndescription = \"to\"\n\n[[inputs]]\nname = \"amount\"\ntype = \"number\"\nrequired = false\n\
        description = \"amount\"\n\n[[inputs]]\nname = \"count\"\ntype = \"integer\"\nrequired = false\n\
        description = \"count\"\n\n[[inputs]]\nname = \"tags\"\ntype = \"array\"\nitems_type = \"string\"\n\
        required = false\ndescription = \"tags\"\n\n[[execute]]\nid = \"main\"\nconnector = \"github://acme/mail\"\nop = \"send\"\n+++\n# Send\n";

    fn send() -> ActionFile {
        aileron_core::action::parse_action(SEND, "send.md").unwrap()
    }

    fn set(files: &[(&str, &str)]) -> Result<RuleSet, Box<ParseError>> {
        let sources: Vec<(PathBuf, String)> =
            files.iter().map(|(name, text)| (PathBuf::from(format!("policy/{name}")), text.to_string())).collect();
        let action = send();
        RuleSet::from_sources(&sources, [&action])
    }

    fn call<'a>(subject: &'a Subject, args: &'a Map<String, Value>, counts: Counts) -> Call<'a> {
        Call {
            subject,
            verb: "run",
            tool: "send",
            connector: "github://acme/mail",
            approval_required: false,
            args,
            now: Utc::now(),
            counts,
        }
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_rule_that_does_not_fit_the_actions_is_refused_at_load_with_its_line() {
        let unknown = set(&[(
            "org.cedar",
            "// org\n\nforbid(principal, action, resource)\nwhen { context.args.too == \"x\" };\n",
        )]);
        let error = unknown.err().expect("an argument no action has");
        assert_eq!((error.file.as_str(), error.line), ("policy/org.cedar", Some(4)), "{error}");
        let wrong_type = set(&[(
            "t.cedar",
            "forbid(principal, action, resource) when { context.args has to && context.args.to > 3 };",
        )]);
        assert!(wrong_type.is_err(), "a string compared as a number");
        let unguarded = set(&[("t.cedar", "forbid(principal, action, resource) when { context.args.to == \"x\" };")]);
        assert!(unguarded.err().unwrap().hint.contains("has"), "an optional argument read without `has`");
        let syntax = set(&[("s.cedar", "permit(principal, action, resource)\n")]).err().unwrap();
        assert!(syntax.message.contains("not valid Cedar"), "{syntax}");
        assert!(set(&[]).unwrap().is_empty());
    }

    #[test]
    fn forbid_only_files_permit_the_rest_and_an_ask_forbid_asks() {
        let rules = set(&[
            (
                "org.cedar",
                "@id(\"org-only\")\nforbid(principal, action, resource == Aileron::Tool::\"send\")\nwhen { \
                 context.args has to && !(context.args.to like \"*@example.com\") };",
            ),
            (
                "ask.cedar",
                "@id(\"big\") @ask(\"amounts over 100 need a human\")\nforbid(principal, action, resource)\nwhen { \
                 context.args has amount && context.args.amount.greaterThan(decimal(\"100.0\")) };",
            ),
            ("watch.shadow.cedar", "@id(\"agents\") forbid(principal is Aileron::Agent, action, resource);"),
        ])
        .unwrap();
        let human = Subject::Human { id: "local-user".into() };
        let agent = Subject::Agent { session_id: "s1".into(), agent: "claude".into(), contained: true };
        let ok = args(json!({"to": "a@example.com", "amount": 5}));
        assert_eq!(rules.decide(&call(&human, &ok, Counts::default())).enforced, Verdict::Allow);
        let outside = args(json!({"to": "a@evil.test"}));
        assert_eq!(
            rules.decide(&call(&human, &outside, Counts::default())).enforced,
            Verdict::Forbid { rules: vec!["org-only".into()], errors: vec![] }
        );
        let big = args(json!({"to": "a@example.com", "amount": 250.5}));
        assert_eq!(
            rules.decide(&call(&human, &big, Counts::default())).enforced,
            Verdict::Ask { rules: vec!["big".into()], reasons: vec!["amounts over 100 need a human".into()] }
        );
        // Both an ask and a plain forbid: refused.
        let both = args(json!({"to": "a@evil.test", "amount": 250}));
        assert!(matches!(rules.decide(&call(&human, &both, Counts::default())).enforced, Verdict::Forbid { .. }));
        // Shadow rules decide beside, never instead.
        let decided = rules.decide(&call(&agent, &ok, Counts::default()));
        assert_eq!(decided.enforced, Verdict::Allow);
        assert!(matches!(decided.shadow, Some(Verdict::Forbid { .. })));
        assert!(rules.decide(&call(&human, &ok, Counts::default())).shadow == Some(Verdict::Allow));
        assert_eq!(rules.rules.iter().map(|r| r.effect).collect::<Vec<_>>(), ["forbid", "ask", "forbid"]);
    }

    /// Only the rules whose scope can match are asked (per tool and kind of caller); what they
    /// decide is what the whole set would.
    #[test]
    fn rules_scoped_to_another_tool_or_kind_of_caller_are_left_out_and_the_verdicts_stand() {
        let text = "@id(\"other-tool\") forbid(principal, action, resource == Aileron::Tool::\"other\");\n\
                    @id(\"humans\") forbid(principal is Aileron::Human, action, resource == Aileron::Tool::\"send\");\n\
                    @id(\"agents-ask\") @ask(\"agents ask\") forbid(principal is Aileron::Agent, action, resource is Aileron::Tool);";
        let rules = set(&[("scoped.cedar", text)]).unwrap();
        let human = Subject::Human { id: "local-user".into() };
        let agent = Subject::Agent { session_id: "s1".into(), agent: "claude".into(), contained: true };
        let none = Map::new();
        let verdict = |subject: &Subject, tool: &str| {
            rules.decide(&Call { tool, ..call(subject, &none, Counts::default()) }).enforced
        };
        assert_eq!(verdict(&human, "send"), Verdict::Forbid { rules: vec!["humans".into()], errors: vec![] });
        assert_eq!(verdict(&human, "other"), Verdict::Forbid { rules: vec!["other-tool".into()], errors: vec![] });
        assert_eq!(verdict(&human, "third"), Verdict::Allow);
        let asked = Verdict::Ask { rules: vec!["agents-ask".into()], reasons: vec!["agents ask".into()] };
        assert_eq!(verdict(&agent, "send"), asked);
        assert_eq!(verdict(&agent, "third"), asked);
        assert_eq!(
            verdict(&agent, "other"),
            Verdict::Forbid { rules: vec!["agents-ask".into(), "other-tool".into()], errors: vec![] },
            "a forbid beside an ask refuses"
        );
        let scoped = rules.enforced.as_ref().unwrap().scoped.lock().unwrap();
        let asked: Vec<String> =
            scoped[&("third".to_string(), false)].all.policies().map(|p| p.id().to_string()).collect();
        assert_eq!(asked, [IMPLICIT_PERMIT], "none of the file's rules can apply to a human's call of `third`");
    }

    /// The property of SPEC §16's counters: however many calls race, a limit of `k` admits
    /// exactly `k` — 1,000 rounds of 6 threads making 2 calls each against limits from 1 to 6.
    #[test]
    fn racing_calls_against_a_limit_of_k_admit_exactly_k() {
        let sets: Vec<Arc<RuleSet>> = (1..=6)
            .map(|limit| {
                let rule = format!("forbid(principal, action, resource) when {{ context.runs_last_hour >= {limit} }};");
                Arc::new(set(&[("limit.cedar", &rule)]).unwrap())
            })
            .collect();
        for round in 0..1000u64 {
            let limit = 1 + round % 6;
            let rules = sets[(limit - 1) as usize].clone();
            let counters = Arc::new(Counters::default());
            let threads: Vec<_> = (0..6)
                .map(|_| {
                    let (rules, counters) = (rules.clone(), counters.clone());
                    std::thread::spawn(move || {
                        let subject = Subject::Agent { session_id: "s".into(), agent: "a".into(), contained: true };
                        let no_args = Map::new();
                        (0..2)
                            .filter(|_| {
                                let now = Utc::now();
                                counters
                                    .admit(
                                        &subject.key(),
                                        "send",
                                        now,
                                        |counts| rules.decide(&Call { now, ..call(&subject, &no_args, counts) }),
                                        |decided| decided.enforced == Verdict::Allow,
                                    )
                                    .counted
                            })
                            .count()
                    })
                })
                .collect();
            let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
            assert_eq!(admitted as u64, limit, "round {round}");
        }
    }
}
