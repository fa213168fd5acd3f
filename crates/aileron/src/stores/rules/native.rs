//! The rules users write most — comparisons of arguments, counters and the caller's attributes,
//! `has`, `like`, `&&`/`||`/`!`, `is`, `in`, set membership, `decimal` comparisons — evaluated
//! directly instead of by Cedar's interpreter, which rebuilds each rule's condition for every
//! request (~1 µs a rule). Compiled once per set from Cedar's own JSON form of each rule (so the
//! parser and the strict validator stay Cedar's).
//!
//! Exactness over coverage: a rule with anything outside this subset (arithmetic, `datetime`,
//! tags, record literals) is not compiled, and a call whose rules are not all compiled is decided
//! by Cedar. An evaluation that meets what Cedar would call an error (a missing attribute, a
//! type mismatch) gives up, and Cedar decides that call too, with its own error reporting. A
//! property test holds the two to the same verdicts (`tests::native_and_cedar_agree`).

use cedar_policy::{Effect, Policy};
use serde_json::Value as Json;

use super::{Call, Subject};

const AGENT: &str = "Aileron::Agent";
const HUMAN: &str = "Aileron::Human";
const ACTION: &str = "Aileron::Action";
const TOOL: &str = "Aileron::Tool";

/// One rule, compiled.
#[derive(Debug)]
pub struct NativeRule {
    pub effect: Effect,
    principal: Scope,
    action: Scope,
    resource: Scope,
    /// `when` (true) and `unless` (false) bodies.
    conditions: Vec<(bool, Node)>,
    nodes: Vec<Expr>,
}

/// A scope constraint: any, `is T`, `== E`/`in E`/`in [E…]` (our entities have no parents, so
/// `in` is equality), `is T in E`.
#[derive(Debug)]
enum Scope {
    Any,
    Is(String),
    In(Vec<(String, String)>),
    IsIn(String, (String, String)),
}

/// A node's index in its rule's [`NativeRule::nodes`].
type Node = u32;

/// An expression node: its operands are other nodes of the same rule (one vector per rule,
/// walked without chasing a heap pointer per node).
#[derive(Debug)]
enum Expr {
    Lit(Lit),
    Var(Var),
    Attr(Node, String),
    Has(Node, String),
    Not(Node),
    And(Node, Node),
    Or(Node, Node),
    Eq(Node, Node),
    Ne(Node, Node),
    /// `<`, `<=`, `>`, `>=` and the `decimal` methods: `(less, or_equal, left, right)` after
    /// swapping `>` into `<`.
    Less(bool, Node, Node),
    Like(Node, Vec<Pattern>),
    Is(Node, String, Option<Node>),
    In(Node, Node),
    If(Node, Node, Node),
    Contains(Node, Node),
    ContainsAll(Node, Node),
    ContainsAny(Node, Node),
    IsEmpty(Node),
    Set(Vec<Node>),
}

#[derive(Debug, Clone)]
enum Lit {
    Bool(bool),
    Long(i64),
    Str(String),
    Decimal(i64),
    Entity(String, String),
}

#[derive(Debug, Clone, Copy)]
enum Var {
    Principal,
    Action,
    Resource,
    Context,
}

#[derive(Debug, Clone, PartialEq)]
enum Pattern {
    Char(char),
    Wildcard,
}

/// A value while evaluating. Strings borrow from the rule or the call.
#[derive(Debug, Clone, PartialEq)]
pub enum Val<'a> {
    Bool(bool),
    Long(i64),
    Str(&'a str),
    /// Cedar's `decimal`: ten-thousandths.
    Decimal(i64),
    Entity(Entity<'a>),
    Set(Vec<Val<'a>>),
    Record(Record),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Entity<'a> {
    Principal,
    Action,
    Resource,
    /// A literal entity in a rule.
    Named(&'a str, &'a str),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Record {
    Context,
    Args,
}

/// Why an evaluation gave up: Cedar decides the call instead.
#[derive(Debug)]
pub struct GiveUp;

impl NativeRule {
    /// `policy` compiled, or `None` when it uses anything outside the subset.
    pub fn compile(policy: &Policy) -> Option<NativeRule> {
        let json = policy.to_json().ok()?;
        let effect = policy.effect();
        let mut nodes = Vec::new();
        let conditions = json
            .get("conditions")?
            .as_array()?
            .iter()
            .map(|condition| {
                let when = match condition.get("kind")?.as_str()? {
                    "when" => true,
                    "unless" => false,
                    _ => return None,
                };
                Some((when, expr(condition.get("body")?, &mut nodes)?))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(NativeRule {
            effect,
            principal: scope(json.get("principal")?)?,
            action: scope(json.get("action")?)?,
            resource: scope(json.get("resource")?)?,
            conditions,
            nodes,
        })
    }

    /// Whether the rule applies to `call` (scope and conditions).
    pub fn satisfied(&self, call: &Facts<'_>) -> Result<bool, GiveUp> {
        let (principal_type, principal_id) = call.principal();
        if !self.principal.matches(principal_type, principal_id)
            || !self.action.matches(ACTION, call.call.verb)
            || !self.resource.matches(TOOL, call.call.tool)
        {
            return Ok(false);
        }
        for (when, body) in &self.conditions {
            if truth(&eval(self, *body, call)?)? != *when {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Scope {
    fn matches(&self, kind: &str, id: &str) -> bool {
        match self {
            Scope::Any => true,
            Scope::Is(expected) => expected == kind,
            Scope::In(entities) => entities.iter().any(|(t, i)| t == kind && i == id),
            Scope::IsIn(expected, (t, i)) => expected == kind && t == kind && i == id,
        }
    }
}

/// What a call looks like to the rules: the call and its arguments typed as the schema types
/// them (those of a type rules can see; the same view Cedar is given).
pub struct Facts<'a> {
    pub call: &'a Call<'a>,
    args: &'a [(&'a str, Val<'a>)],
}

impl<'a> Facts<'a> {
    /// `call` with its arguments as the schema types them (`ArgTypes::native_args`).
    pub fn new(call: &'a Call<'a>, args: &'a [(&'a str, Val<'a>)]) -> Facts<'a> {
        Facts { call, args }
    }

    fn principal(&self) -> (&'static str, &'a str) {
        match self.call.subject {
            Subject::Agent { session_id, .. } => (AGENT, session_id),
            Subject::Human { id } => (HUMAN, id),
        }
    }

    fn entity(&self, entity: Entity<'a>) -> (&'a str, &'a str) {
        match entity {
            Entity::Principal => self.principal(),
            Entity::Action => (ACTION, self.call.verb),
            Entity::Resource => (TOOL, self.call.tool),
            Entity::Named(kind, id) => (kind, id),
        }
    }

    fn attr(&self, of: &Val<'a>, name: &str) -> Option<Val<'a>> {
        match of {
            Val::Record(Record::Context) => match name {
                "args" => Some(Val::Record(Record::Args)),
                "runs_last_hour" => Some(Val::Long(self.call.counts.last_hour)),
                "runs_last_day" => Some(Val::Long(self.call.counts.last_day)),
                "session_runs" => Some(Val::Long(self.call.counts.session)),
                // `now` is a datetime: not in the subset.
                _ => None,
            },
            Val::Record(Record::Args) => self.args.iter().find(|(arg, _)| *arg == name).map(|(_, v)| v.clone()),
            Val::Entity(entity) => match (self.entity(*entity), self.call.subject) {
                ((AGENT, _), Subject::Agent { agent, contained, .. }) if *entity == Entity::Principal => match name {
                    "agent" => Some(Val::Str(agent)),
                    "contained" => Some(Val::Bool(*contained)),
                    _ => None,
                },
                ((TOOL, _), _) if *entity == Entity::Resource => match name {
                    "connector" => Some(Val::Str(self.call.connector)),
                    "approval_required" => Some(Val::Bool(self.call.approval_required)),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    }

    fn has(&self, of: &Val<'a>, name: &str) -> Result<bool, GiveUp> {
        match of {
            Val::Record(Record::Context) if name == "now" => Ok(true),
            Val::Record(_) | Val::Entity(Entity::Principal | Entity::Resource) => Ok(self.attr(of, name).is_some()),
            _ => Err(GiveUp),
        }
    }
}

/// A Cedar `decimal` literal (`-?digits.digits`, one to four places) in ten-thousandths.
pub fn decimal(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.')?;
    if whole.is_empty()
        || !(1..=4).contains(&fraction.len())
        || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let scale = 10i64.pow(4 - fraction.len() as u32);
    let magnitude = whole
        .parse::<i64>()
        .ok()?
        .checked_mul(10_000)?
        .checked_add(fraction.parse::<i64>().ok()?.checked_mul(scale)?)?;
    Some(if negative { -magnitude } else { magnitude })
}

fn scope(json: &Json) -> Option<Scope> {
    let entity = |json: &Json| -> Option<(String, String)> {
        Some((json.get("type")?.as_str()?.to_string(), json.get("id")?.as_str()?.to_string()))
    };
    match json.get("op")?.as_str()? {
        "All" => Some(Scope::Any),
        "is" => {
            let kind = json.get("entity_type")?.as_str()?.to_string();
            match json.get("in") {
                None => Some(Scope::Is(kind)),
                Some(within) => Some(Scope::IsIn(kind, entity(within.get("entity")?)?)),
            }
        }
        "==" | "in" => match (json.get("entity"), json.get("entities")) {
            (Some(one), None) => Some(Scope::In(vec![entity(one)?])),
            (None, Some(many)) => Some(Scope::In(many.as_array()?.iter().map(entity).collect::<Option<Vec<_>>>()?)),
            _ => None,
        },
        _ => None,
    }
}

/// Compiles `json` into `nodes`: the index of its root.
fn expr(json: &Json, nodes: &mut Vec<Expr>) -> Option<Node> {
    let object = json.as_object()?;
    if object.len() != 1 {
        return None;
    }
    let (key, body) = object.iter().next()?;
    let pair = |body: &Json, nodes: &mut Vec<Expr>| -> Option<(Node, Node)> {
        Some((expr(body.get("left")?, nodes)?, expr(body.get("right")?, nodes)?))
    };
    let method = |body: &Json, nodes: &mut Vec<Expr>| -> Option<(Node, Node)> {
        match body.as_array()?.as_slice() {
            [left, right] => Some((expr(left, nodes)?, expr(right, nodes)?)),
            _ => None,
        }
    };
    let node = match key.as_str() {
        "Value" => Expr::Lit(literal(body)?),
        "Var" => Expr::Var(match body.as_str()? {
            "principal" => Var::Principal,
            "action" => Var::Action,
            "resource" => Var::Resource,
            "context" => Var::Context,
            _ => return None,
        }),
        "." => Expr::Attr(expr(body.get("left")?, nodes)?, body.get("attr")?.as_str()?.to_string()),
        "has" => Expr::Has(expr(body.get("left")?, nodes)?, body.get("attr")?.as_str()?.to_string()),
        "!" => Expr::Not(expr(body.get("arg")?, nodes)?),
        "&&" => pair(body, nodes).map(|(l, r)| Expr::And(l, r))?,
        "||" => pair(body, nodes).map(|(l, r)| Expr::Or(l, r))?,
        "==" => pair(body, nodes).map(|(l, r)| Expr::Eq(l, r))?,
        "!=" => pair(body, nodes).map(|(l, r)| Expr::Ne(l, r))?,
        "<" => pair(body, nodes).map(|(l, r)| Expr::Less(false, l, r))?,
        "<=" => pair(body, nodes).map(|(l, r)| Expr::Less(true, l, r))?,
        ">" => pair(body, nodes).map(|(l, r)| Expr::Less(false, r, l))?,
        ">=" => pair(body, nodes).map(|(l, r)| Expr::Less(true, r, l))?,
        "lessThan" => method(body, nodes).map(|(l, r)| Expr::Less(false, l, r))?,
        "lessThanOrEqual" => method(body, nodes).map(|(l, r)| Expr::Less(true, l, r))?,
        "greaterThan" => method(body, nodes).map(|(l, r)| Expr::Less(false, r, l))?,
        "greaterThanOrEqual" => method(body, nodes).map(|(l, r)| Expr::Less(true, r, l))?,
        "in" => pair(body, nodes).map(|(l, r)| Expr::In(l, r))?,
        "contains" => pair(body, nodes).map(|(l, r)| Expr::Contains(l, r))?,
        "containsAll" => pair(body, nodes).map(|(l, r)| Expr::ContainsAll(l, r))?,
        "containsAny" => pair(body, nodes).map(|(l, r)| Expr::ContainsAny(l, r))?,
        "isEmpty" => Expr::IsEmpty(expr(body.get("arg")?, nodes)?),
        "like" => {
            let mut pattern = Vec::new();
            for element in body.get("pattern")?.as_array()? {
                match element {
                    Json::String(wildcard) if wildcard == "Wildcard" => pattern.push(Pattern::Wildcard),
                    Json::Object(literal) => {
                        pattern.extend(literal.get("Literal")?.as_str()?.chars().map(Pattern::Char));
                    }
                    _ => return None,
                }
            }
            Expr::Like(expr(body.get("left")?, nodes)?, pattern)
        }
        "is" => Expr::Is(
            expr(body.get("left")?, nodes)?,
            body.get("entity_type")?.as_str()?.to_string(),
            match body.get("in") {
                Some(within) => Some(expr(within, nodes)?),
                None => None,
            },
        ),
        "if-then-else" => {
            Expr::If(expr(body.get("if")?, nodes)?, expr(body.get("then")?, nodes)?, expr(body.get("else")?, nodes)?)
        }
        "Set" => Expr::Set(body.as_array()?.iter().map(|item| expr(item, nodes)).collect::<Option<Vec<_>>>()?),
        "decimal" => match body.as_array()?.as_slice() {
            [only] => Expr::Lit(Lit::Decimal(decimal(only.get("Value")?.as_str()?)?)),
            _ => return None,
        },
        // Arithmetic (it can overflow), datetime, tags, records, other extensions: Cedar's.
        _ => return None,
    };
    nodes.push(node);
    Some(nodes.len() as Node - 1)
}

fn literal(json: &Json) -> Option<Lit> {
    match json {
        Json::Bool(flag) => Some(Lit::Bool(*flag)),
        Json::Number(n) => n.as_i64().map(Lit::Long),
        Json::String(text) => Some(Lit::Str(text.clone())),
        Json::Object(object) => {
            let entity = object.get("__entity")?;
            Some(Lit::Entity(entity.get("type")?.as_str()?.to_string(), entity.get("id")?.as_str()?.to_string()))
        }
        _ => None,
    }
}

fn truth(value: &Val<'_>) -> Result<bool, GiveUp> {
    match value {
        Val::Bool(flag) => Ok(*flag),
        _ => Err(GiveUp),
    }
}

fn eval<'a>(rule: &'a NativeRule, node: Node, facts: &Facts<'a>) -> Result<Val<'a>, GiveUp> {
    let eval = |node: &Node| eval(rule, *node, facts);
    Ok(match &rule.nodes[node as usize] {
        Expr::Lit(Lit::Bool(flag)) => Val::Bool(*flag),
        Expr::Lit(Lit::Long(n)) => Val::Long(*n),
        Expr::Lit(Lit::Str(text)) => Val::Str(text),
        Expr::Lit(Lit::Decimal(n)) => Val::Decimal(*n),
        Expr::Lit(Lit::Entity(kind, id)) => Val::Entity(Entity::Named(kind, id)),
        Expr::Var(Var::Principal) => Val::Entity(Entity::Principal),
        Expr::Var(Var::Action) => Val::Entity(Entity::Action),
        Expr::Var(Var::Resource) => Val::Entity(Entity::Resource),
        Expr::Var(Var::Context) => Val::Record(Record::Context),
        Expr::Attr(of, name) => facts.attr(&eval(of)?, name).ok_or(GiveUp)?,
        Expr::Has(of, name) => Val::Bool(facts.has(&eval(of)?, name)?),
        Expr::Not(arg) => Val::Bool(!truth(&eval(arg)?)?),
        Expr::And(left, right) => Val::Bool(truth(&eval(left)?)? && truth(&eval(right)?)?),
        Expr::Or(left, right) => Val::Bool(truth(&eval(left)?)? || truth(&eval(right)?)?),
        Expr::Eq(left, right) => Val::Bool(equal(facts, &eval(left)?, &eval(right)?)),
        Expr::Ne(left, right) => Val::Bool(!equal(facts, &eval(left)?, &eval(right)?)),
        Expr::Less(or_equal, left, right) => {
            let ordering = match (eval(left)?, eval(right)?) {
                (Val::Long(a), Val::Long(b)) | (Val::Decimal(a), Val::Decimal(b)) => a.cmp(&b),
                _ => return Err(GiveUp),
            };
            Val::Bool(ordering.is_lt() || (*or_equal && ordering.is_eq()))
        }
        Expr::Like(of, pattern) => match eval(of)? {
            Val::Str(text) => Val::Bool(like(text, pattern)),
            _ => return Err(GiveUp),
        },
        Expr::Is(of, kind, within) => match eval(of)? {
            Val::Entity(entity) => {
                let (actual, _) = facts.entity(entity);
                let is = actual == kind;
                match within {
                    Some(within) if is => Val::Bool(member(facts, entity, &eval(within)?)?),
                    _ => Val::Bool(is),
                }
            }
            _ => return Err(GiveUp),
        },
        Expr::In(left, right) => match eval(left)? {
            Val::Entity(entity) => Val::Bool(member(facts, entity, &eval(right)?)?),
            _ => return Err(GiveUp),
        },
        Expr::If(condition, then, otherwise) => {
            if truth(&eval(condition)?)? {
                eval(then)?
            } else {
                eval(otherwise)?
            }
        }
        Expr::Contains(set, item) => {
            let (set, item) = (set_of(eval(set)?)?, eval(item)?);
            Val::Bool(set.iter().any(|v| equal(facts, v, &item)))
        }
        Expr::ContainsAll(set, other) => {
            let (set, other) = (set_of(eval(set)?)?, set_of(eval(other)?)?);
            Val::Bool(other.iter().all(|o| set.iter().any(|v| equal(facts, v, o))))
        }
        Expr::ContainsAny(set, other) => {
            let (set, other) = (set_of(eval(set)?)?, set_of(eval(other)?)?);
            Val::Bool(other.iter().any(|o| set.iter().any(|v| equal(facts, v, o))))
        }
        Expr::IsEmpty(set) => Val::Bool(set_of(eval(set)?)?.is_empty()),
        Expr::Set(items) => Val::Set(items.iter().map(|item| eval(item)).collect::<Result<Vec<_>, _>>()?),
    })
}

fn set_of(value: Val<'_>) -> Result<Vec<Val<'_>>, GiveUp> {
    match value {
        Val::Set(items) => Ok(items),
        _ => Err(GiveUp),
    }
}

/// `entity in right`: the same entity, or one of a set (entities here have no parents).
fn member<'a>(facts: &Facts<'a>, entity: Entity<'a>, right: &Val<'a>) -> Result<bool, GiveUp> {
    let left = facts.entity(entity);
    match right {
        Val::Entity(other) => Ok(facts.entity(*other) == left),
        Val::Set(items) => items
            .iter()
            .map(|item| match item {
                Val::Entity(other) => Ok(facts.entity(*other) == left),
                _ => Err(GiveUp),
            })
            .try_fold(false, |found, this| Ok(found || this?)),
        _ => Err(GiveUp),
    }
}

/// Cedar's `==`: values of different types are unequal, sets equal as sets.
fn equal<'a>(facts: &Facts<'a>, left: &Val<'a>, right: &Val<'a>) -> bool {
    match (left, right) {
        (Val::Entity(a), Val::Entity(b)) => facts.entity(*a) == facts.entity(*b),
        (Val::Set(a), Val::Set(b)) => {
            a.iter().all(|x| b.iter().any(|y| equal(facts, x, y)))
                && b.iter().all(|y| a.iter().any(|x| equal(facts, x, y)))
        }
        (a, b) => a == b,
    }
}

/// Cedar's `like`: `*` matches any run of characters, everything else itself. Greedy with one
/// backtrack point (the last `*`), over the text's characters in place.
fn like(text: &str, pattern: &[Pattern]) -> bool {
    let next = |at: usize| text[at..].chars().next();
    let (mut t, mut p) = (0, 0);
    // Where the last wildcard was, and the text position it has swallowed up to (bytes).
    let mut star: Option<(usize, usize)> = None;
    while let Some(c) = next(t) {
        match pattern.get(p) {
            Some(Pattern::Wildcard) => {
                star = Some((p, t));
                p += 1;
            }
            Some(Pattern::Char(expected)) if *expected == c => {
                t += c.len_utf8();
                p += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    let swallowed = star_t + next(star_t).map_or(1, char::len_utf8);
                    (p, t) = (star_p + 1, swallowed);
                    star = Some((star_p, swallowed));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|element| *element == Pattern::Wildcard)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use proptest::prelude::*;
    use serde_json::{Map, json};

    use super::super::counters::Counts;
    use super::super::{Call, RuleSet, Subject, Verdict};

    /// Conditions of the shapes users write (and two Cedar alone evaluates: `now`, arithmetic).
    fn atom() -> impl Strategy<Value = String> {
        let text = prop::sample::select(vec!["a@example.com", "b@evil.test", "", "abc", "ünï@example.com"]);
        let pattern = prop::sample::select(vec!["*@example.com", "a*", "*b*c", "*", "", "abc", "*ü*", "a*c*"]);
        let number = prop::sample::select(vec!["0.0", "5.0", "100.0", "-3.25", "250.5"]);
        let counter = prop::sample::select(vec!["runs_last_hour", "runs_last_day", "session_runs"]);
        let op = prop::sample::select(vec!["==", "!=", "<", "<=", ">", ">="]);
        let method = prop::sample::select(vec!["lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"]);
        prop_oneof![
            text.clone().prop_map(|t| format!("(context.args has to && context.args.to == \"{t}\")")),
            pattern.prop_map(|p| format!("(context.args has to && context.args.to like \"{p}\")")),
            (method, number)
                .prop_map(|(m, n)| format!("(context.args has amount && context.args.amount.{m}(decimal(\"{n}\")))")),
            (op.clone(), 0i64..4).prop_map(|(o, n)| format!("(context.args has count && context.args.count {o} {n})")),
            (counter, op, 0i64..4).prop_map(|(c, o, n)| format!("context.{c} {o} {n}")),
            text.clone().prop_map(|t| format!("(context.args has tags && context.args.tags.contains(\"{t}\"))")),
            Just("(context.args has tags && context.args.tags.containsAny([\"abc\", \"\"]))".to_string()),
            Just("(context.args has tags && context.args.tags.isEmpty())".to_string()),
            Just("(principal is Aileron::Agent && principal.agent == \"claude\")".to_string()),
            Just("(principal is Aileron::Agent && principal.contained)".to_string()),
            Just("principal == Aileron::Human::\"local-user\"".to_string()),
            Just("principal in [Aileron::Human::\"web\", Aileron::Human::\"local-user\"]".to_string()),
            Just("principal in Aileron::Agent::\"s1\"".to_string()),
            Just("resource.connector == \"github://acme/mail\"".to_string()),
            Just("resource.approval_required".to_string()),
            Just("action == Aileron::Action::\"http_request\"".to_string()),
            Just("context.args has amount".to_string()),
            Just("(if context.args has count then context.args.count > 1 else false)".to_string()),
            Just("context.now > datetime(\"2020-01-01\")".to_string()),
            Just("context.runs_last_hour + 1 > 2".to_string()),
        ]
    }

    fn condition() -> impl Strategy<Value = String> {
        atom().prop_recursive(3, 8, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} && {b})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} || {b})")),
                inner.prop_map(|a| format!("!({a})")),
            ]
        })
    }

    fn rule() -> impl Strategy<Value = String> {
        let head = prop::sample::select(vec![
            "forbid(principal, action, resource)",
            "@ask(\"why\") forbid(principal, action, resource)",
            "permit(principal, action, resource)",
            "forbid(principal is Aileron::Agent, action, resource == Aileron::Tool::\"send\")",
            "@ask(\"look\") forbid(principal, action == Aileron::Action::\"run\", resource)",
            "permit(principal is Aileron::Human, action in [Aileron::Action::\"run\"], resource)",
            "forbid(principal == Aileron::Agent::\"s1\", action, resource is Aileron::Tool)",
        ]);
        (head, condition(), prop::bool::ANY).prop_map(|(head, condition, unless)| {
            format!("{head} {} {{ {condition} }};", if unless { "unless" } else { "when" })
        })
    }

    fn args() -> impl Strategy<Value = Map<String, serde_json::Value>> {
        let to = prop::sample::select(vec!["a@example.com", "b@evil.test", "", "abc", "ünï@example.com", "ab-c"]);
        let amount = prop::option::of(prop::sample::select(vec![0.0, 5.0, 100.0, 100.00004, -3.25, 250.5, 1e20]));
        let count = prop::option::of(0i64..4);
        let tags = prop::option::of(prop::collection::vec(prop::sample::select(vec!["abc", "", "x"]), 0..3));
        (to, amount, count, tags).prop_map(|(to, amount, count, tags)| {
            let mut args = Map::new();
            args.insert("to".into(), to.into());
            if let Some(amount) = amount {
                args.insert("amount".into(), json!(amount));
            }
            if let Some(count) = count {
                args.insert("count".into(), count.into());
            }
            if let Some(tags) = tags {
                args.insert("tags".into(), json!(tags));
            }
            args
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever a set of rules and a call, the direct evaluation decides as Cedar does, or
        /// leaves the call to Cedar; and rules in the subset are evaluated directly.
        #[test]
        fn native_and_cedar_agree(
            rules in prop::collection::vec(rule(), 1..6),
            args in args(),
            agent in prop::bool::ANY,
            http in prop::bool::ANY,
            approval_required in prop::bool::ANY,
            counts in (0i64..4, 0i64..4, 0i64..4),
        ) {
            let text = rules.join("\n");
            let action = aileron_core::action::parse_action(super::super::tests::SEND, "send.md").unwrap();
            let set = RuleSet::from_sources(&[(PathBuf::from("policy/p.cedar"), text.clone())], [&action]);
            // Some generated rules do not validate (e.g. `principal.agent` on a Human scope): skipped.
            let Ok(set) = set else { return Ok(()) };
            let subject = if agent {
                Subject::Agent { session_id: "s1".into(), agent: "claude".into(), contained: true }
            } else {
                Subject::Human { id: "local-user".into() }
            };
            let call = Call {
                subject: &subject,
                verb: if http { "http_request" } else { "run" },
                tool: "send",
                connector: "github://acme/mail",
                approval_required,
                args: &args,
                now: chrono::Utc::now(),
                counts: Counts { last_hour: counts.0, last_day: counts.1, session: counts.2 },
            };
            let (native, cedar) = set.decide_both_ways(&call);
            let cedar_only = text.contains("context.now") || text.contains(" + 1");
            if let Some(native) = &native {
                prop_assert_eq!(native, &cedar, "{}\n{:?}", text, args);
            } else if !cedar_only {
                // Gave up: only where Cedar reports an error (a forbid that errs refuses).
                let erred = matches!(&cedar, Verdict::Forbid { errors, .. } if !errors.is_empty());
                prop_assert!(erred || args.get("amount") == Some(&json!(1e20)), "native left {} to Cedar: {:?}", text, cedar);
            }
        }
    }

    #[test]
    fn decimals_parse_as_cedar_writes_them() {
        assert_eq!(super::decimal("100.0"), Some(1_000_000));
        assert_eq!(super::decimal("-3.25"), Some(-32_500));
        assert_eq!(super::decimal("0.0001"), Some(1));
        assert_eq!(super::decimal("1.00001"), None);
        assert_eq!(super::decimal("1"), None);
        assert_eq!(super::decimal(".5"), None);
        assert_eq!(super::decimal("922337203685477.5808"), None, "past i64");
    }
}
