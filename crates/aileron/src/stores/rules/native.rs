//! The rules users write most — comparisons of arguments, counters and the caller's attributes,
//! `has`, `like`, `&&`/`||`/`!`, `is`, `in`, set membership, `decimal` comparisons — evaluated
//! directly instead of by Cedar's interpreter, which rebuilds each rule's condition for every
//! request (~1 µs a rule). Compiled once per set from Cedar's own JSON form of each rule (so the
//! parser and the strict validator stay Cedar's).
//!
//! Each scoped set of rules (those that can match one tool and kind of caller) is compiled into
//! one [`NativeSet`]: every rule's nodes, strings, patterns and entities in a few flat vectors,
//! operands by index — walked between runs that evict it from the cache, so one rule must not
//! cost a dozen scattered heap objects.
//!
//! Exactness over coverage: a rule with anything outside this subset (arithmetic, `datetime`,
//! tags, record literals) is not compiled, and a call whose rules are not all compiled is decided
//! by Cedar. An evaluation that meets what Cedar would call an error (a missing attribute, a
//! type mismatch) gives up, and Cedar decides that call too, with its own error reporting. A
//! property test holds the two to the same verdicts (`tests::native_and_cedar_agree`).
//!
//! Rules that open with `path == "literal"` (an argument, `principal.agent`,
//! `resource.connector`) are grouped by path and sorted by literal: a call evaluates each path
//! once and walks only the rules whose literal is its value. Exact, not a heuristic: a skipped
//! rule's first test is false without error, so walking it could neither satisfy it nor make it
//! give up; where the path is missing every rule of the group is walked (and gives up as before).

use cedar_policy::{Effect, Policy};
use serde_json::Value as Json;

use super::{Call, Subject};

const AGENT: &str = "Aileron::Agent";
const HUMAN: &str = "Aileron::Human";
const ACTION: &str = "Aileron::Action";
const TOOL: &str = "Aileron::Tool";

/// A node's index in [`NativeSet::nodes`].
type Node = u32;

/// A string of [`NativeSet::text`]: its byte range.
#[derive(Debug, Clone, Copy)]
struct Str(u32, u32);

/// A run of one of the set's vectors: its start and length.
#[derive(Debug, Clone, Copy)]
struct Run(u32, u32);

/// Rules compiled for direct evaluation: all of one scoped set, in flat vectors.
#[derive(Debug, Default)]
pub struct NativeSet {
    rules: Vec<Rule>,
    nodes: Vec<Expr>,
    /// `when` (true) and `unless` (false) bodies, each rule's a run.
    conditions: Vec<(bool, Node)>,
    /// The members of set literals.
    items: Vec<Node>,
    /// Entities a scope names (`in [..]`).
    entities: Vec<(Str, Str)>,
    patterns: Vec<Pattern>,
    text: String,
    /// Each rule's id.
    ids: Vec<String>,
    /// Rules that open with `path == "literal"`, one group per path.
    keyed: Vec<Keyed>,
    /// The other rules, by index.
    plain: Vec<u32>,
}

/// The rules whose first test is `path == "literal"` for one path, sorted by literal.
#[derive(Debug)]
struct Keyed {
    path: Node,
    rules: Vec<(Str, u32)>,
}

#[derive(Debug)]
struct Rule {
    forbid: bool,
    ask: bool,
    principal: Scope,
    action: Scope,
    resource: Scope,
    conditions: Run,
}

/// A scope constraint: any, `is T`, `== E`/`in E`/`in [E…]` (our entities have no parents, so
/// `in` is equality), `is T in E`.
#[derive(Debug, Clone, Copy)]
enum Scope {
    Any,
    Is(Str),
    In(Run),
    IsIn(Str, Str, Str),
}

#[derive(Debug, Clone, Copy)]
enum Expr {
    Lit(Lit),
    Var(Var),
    Attr(Node, Str),
    Has(Node, Str),
    Not(Node),
    And(Node, Node),
    Or(Node, Node),
    Eq(Node, Node),
    Ne(Node, Node),
    /// `<`, `<=`, `>`, `>=` and the `decimal` methods: `(or_equal, left, right)` after swapping
    /// `>` into `<`.
    Less(bool, Node, Node),
    Like(Node, Run),
    Is(Node, Str, Option<Node>),
    In(Node, Node),
    If(Node, Node, Node),
    Contains(Node, Node),
    ContainsAll(Node, Node),
    ContainsAny(Node, Node),
    IsEmpty(Node),
    Set(Run),
}

#[derive(Debug, Clone, Copy)]
enum Lit {
    Bool(bool),
    Long(i64),
    Str(Str),
    Decimal(i64),
    Entity(Str, Str),
}

#[derive(Debug, Clone, Copy, PartialEq)]
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

impl NativeSet {
    /// Adds a rule — its id, effect, Cedar's JSON form of it ([`NativeSet::json`]) and whether
    /// it is an `@ask` forbid; `false` when it uses anything outside the subset (the set must
    /// then not be used).
    pub fn add(&mut self, id: &str, effect: Effect, json: &Json, ask: bool) -> bool {
        self.compile(id, effect, json, ask).is_some()
    }

    /// Cedar's JSON form of `policy` when it is in the subset (what [`NativeSet::add`] compiles
    /// from: made once per rule, as a set loads).
    pub fn json(policy: &Policy) -> Option<Json> {
        let json = policy.to_json().ok()?;
        NativeSet::default().add("", policy.effect(), &json, false).then_some(json)
    }

    fn compile(&mut self, id: &str, effect: Effect, json: &Json, ask: bool) -> Option<()> {
        let mut conditions = Vec::new();
        for condition in json.get("conditions")?.as_array()? {
            let when = match condition.get("kind")?.as_str()? {
                "when" => true,
                "unless" => false,
                _ => return None,
            };
            conditions.push((when, self.expr(condition.get("body")?)?));
        }
        let (principal, action, resource) =
            (self.scope(json.get("principal")?)?, self.scope(json.get("action")?)?, self.scope(json.get("resource")?)?);
        let start = self.conditions.len() as u32;
        self.conditions.extend(conditions);
        self.rules.push(Rule {
            forbid: effect == Effect::Forbid,
            ask,
            principal,
            action,
            resource,
            conditions: Run(start, self.conditions.len() as u32 - start),
        });
        self.ids.push(id.to_string());
        self.index(self.rules.len() as u32 - 1);
        Some(())
    }

    /// Files rule `rule` under the path its first test compares to a string literal, if it
    /// opens with one (the leftmost operand of a `when`'s `&&` chain), else with the plain rules.
    fn index(&mut self, rule: u32) {
        let Run(start, length) = self.rules[rule as usize].conditions;
        let key = (length > 0).then(|| self.conditions[start as usize]).and_then(|(when, mut node)| {
            while let Expr::And(left, _) = self.nodes[node as usize] {
                node = left;
            }
            let Expr::Eq(left, right) = self.nodes[node as usize] else { return None };
            let literal = |node: Node| match self.nodes[node as usize] {
                Expr::Lit(Lit::Str(text)) => Some(text),
                _ => None,
            };
            let keyed = match (literal(left), literal(right)) {
                (None, Some(text)) if self.is_path(left) => (left, text),
                (Some(text), None) if self.is_path(right) => (right, text),
                _ => return None,
            };
            when.then_some(keyed)
        });
        let Some((path, literal)) = key else {
            self.plain.push(rule);
            return;
        };
        let group = match self.keyed.iter().position(|keyed| self.same_path(keyed.path, path)) {
            Some(group) => group,
            None => {
                self.keyed.push(Keyed { path, rules: Vec::new() });
                self.keyed.len() - 1
            }
        };
        let text = self.text(literal);
        let at = self.keyed[group].rules.partition_point(|(other, _)| self.text(*other) <= text);
        self.keyed[group].rules.insert(at, (literal, rule));
    }

    /// An attribute chain from `principal`, `resource` or `context`.
    fn is_path(&self, node: Node) -> bool {
        match self.nodes[node as usize] {
            Expr::Attr(of, _) => {
                matches!(self.nodes[of as usize], Expr::Var(Var::Principal | Var::Resource | Var::Context))
                    || self.is_path(of)
            }
            _ => false,
        }
    }

    fn same_path(&self, a: Node, b: Node) -> bool {
        match (self.nodes[a as usize], self.nodes[b as usize]) {
            (Expr::Var(a), Expr::Var(b)) => a == b,
            (Expr::Attr(a, name_a), Expr::Attr(b, name_b)) => {
                self.text(name_a) == self.text(name_b) && self.same_path(a, b)
            }
            _ => false,
        }
    }

    fn str(&mut self, text: &str) -> Str {
        let start = self.text.len() as u32;
        self.text.push_str(text);
        Str(start, self.text.len() as u32)
    }

    fn text(&self, s: Str) -> &str {
        &self.text[s.0 as usize..s.1 as usize]
    }

    fn entity(&mut self, json: &Json) -> Option<(Str, Str)> {
        Some((self.str(json.get("type")?.as_str()?), self.str(json.get("id")?.as_str()?)))
    }

    fn scope(&mut self, json: &Json) -> Option<Scope> {
        match json.get("op")?.as_str()? {
            "All" => Some(Scope::Any),
            "is" => {
                let kind = self.str(json.get("entity_type")?.as_str()?);
                match json.get("in") {
                    None => Some(Scope::Is(kind)),
                    Some(within) => {
                        let (t, i) = self.entity(within.get("entity")?)?;
                        Some(Scope::IsIn(kind, t, i))
                    }
                }
            }
            "==" | "in" => {
                let named: Vec<&Json> = match (json.get("entity"), json.get("entities")) {
                    (Some(one), None) => vec![one],
                    (None, Some(many)) => many.as_array()?.iter().collect(),
                    _ => return None,
                };
                let entities = named.into_iter().map(|json| self.entity(json)).collect::<Option<Vec<_>>>()?;
                let start = self.entities.len() as u32;
                self.entities.extend(entities);
                Some(Scope::In(Run(start, self.entities.len() as u32 - start)))
            }
            _ => None,
        }
    }

    /// Compiles `json` into the set's nodes: the index of its root.
    fn expr(&mut self, json: &Json) -> Option<Node> {
        let object = json.as_object()?;
        if object.len() != 1 {
            return None;
        }
        let (key, body) = object.iter().next()?;
        let node = match key.as_str() {
            "Value" => Expr::Lit(self.literal(body)?),
            "Var" => Expr::Var(match body.as_str()? {
                "principal" => Var::Principal,
                "action" => Var::Action,
                "resource" => Var::Resource,
                "context" => Var::Context,
                _ => return None,
            }),
            "." => {
                let of = self.expr(body.get("left")?)?;
                Expr::Attr(of, self.str(body.get("attr")?.as_str()?))
            }
            "has" => {
                let of = self.expr(body.get("left")?)?;
                Expr::Has(of, self.str(body.get("attr")?.as_str()?))
            }
            "!" => Expr::Not(self.expr(body.get("arg")?)?),
            "isEmpty" => Expr::IsEmpty(self.expr(body.get("arg")?)?),
            "&&" | "||" | "==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "contains" | "containsAll" | "containsAny" => {
                let (left, right) = (self.expr(body.get("left")?)?, self.expr(body.get("right")?)?);
                binary(key, left, right)?
            }
            "lessThan" | "lessThanOrEqual" | "greaterThan" | "greaterThanOrEqual" => {
                let [left, right] = body.as_array()?.as_slice() else { return None };
                let (left, right) = (self.expr(left)?, self.expr(right)?);
                binary(key, left, right)?
            }
            "like" => {
                let of = self.expr(body.get("left")?)?;
                let start = self.patterns.len() as u32;
                for element in body.get("pattern")?.as_array()? {
                    match element {
                        Json::String(wildcard) if wildcard == "Wildcard" => self.patterns.push(Pattern::Wildcard),
                        Json::Object(literal) => {
                            self.patterns.extend(literal.get("Literal")?.as_str()?.chars().map(Pattern::Char));
                        }
                        _ => return None,
                    }
                }
                Expr::Like(of, Run(start, self.patterns.len() as u32 - start))
            }
            "is" => {
                let of = self.expr(body.get("left")?)?;
                let kind = self.str(body.get("entity_type")?.as_str()?);
                let within = match body.get("in") {
                    Some(within) => Some(self.expr(within)?),
                    None => None,
                };
                Expr::Is(of, kind, within)
            }
            "if-then-else" => {
                let condition = self.expr(body.get("if")?)?;
                let (then, otherwise) = (self.expr(body.get("then")?)?, self.expr(body.get("else")?)?);
                Expr::If(condition, then, otherwise)
            }
            "Set" => {
                let members = body.as_array()?.iter().map(|item| self.expr(item)).collect::<Option<Vec<_>>>()?;
                let start = self.items.len() as u32;
                self.items.extend(members);
                Expr::Set(Run(start, self.items.len() as u32 - start))
            }
            "decimal" => match body.as_array()?.as_slice() {
                [only] => Expr::Lit(Lit::Decimal(decimal(only.get("Value")?.as_str()?)?)),
                _ => return None,
            },
            // Arithmetic (it can overflow), datetime, tags, records, other extensions: Cedar's.
            _ => return None,
        };
        self.nodes.push(node);
        Some(self.nodes.len() as Node - 1)
    }

    fn literal(&mut self, json: &Json) -> Option<Lit> {
        match json {
            Json::Bool(flag) => Some(Lit::Bool(*flag)),
            Json::Number(n) => n.as_i64().map(Lit::Long),
            Json::String(text) => Some(Lit::Str(self.str(text))),
            Json::Object(object) => {
                let (t, i) = self.entity(object.get("__entity")?)?;
                Some(Lit::Entity(t, i))
            }
            _ => None,
        }
    }

    /// What the rules decide on `facts`, as Cedar would: the satisfied forbids (ids, sorted),
    /// whether every one of them is an `@ask`, and whether a permit is satisfied. Every rule that
    /// may be satisfied is evaluated (as Cedar evaluates all; the index skips only rules whose
    /// first test is false without error): one that cannot be is a reason to ask Cedar.
    pub fn decide(&self, facts: &Facts<'_>) -> Result<(Vec<&str>, bool, bool), GiveUp> {
        let (mut forbids, mut only_asks, mut permitted) = (Vec::new(), true, false);
        self.each_candidate(facts, |index| {
            let rule = &self.rules[index as usize];
            if self.satisfied(rule, facts)? {
                if rule.forbid {
                    forbids.push(self.ids[index as usize].as_str());
                    only_asks &= rule.ask;
                } else {
                    permitted = true;
                }
            }
            Ok(())
        })?;
        forbids.sort_unstable();
        Ok((forbids, only_asks, permitted))
    }

    /// Calls `walk` with each rule that may be satisfied by the call: every plain rule, and of
    /// each keyed group those whose literal is the path's value — none when the value is not a
    /// string (Cedar's `==` is false across types), all when the path is missing.
    fn each_candidate(&self, facts: &Facts<'_>, mut walk: impl FnMut(u32) -> Result<(), GiveUp>) -> Result<(), GiveUp> {
        for rule in &self.plain {
            walk(*rule)?;
        }
        for keyed in &self.keyed {
            let rules = match self.eval(keyed.path, facts) {
                Ok(Val::Str(value)) => {
                    let start = keyed.rules.partition_point(|(literal, _)| self.text(*literal) < value);
                    let length =
                        keyed.rules[start..].iter().take_while(|(literal, _)| self.text(*literal) == value).count();
                    &keyed.rules[start..start + length]
                }
                Ok(_) => &[],
                Err(GiveUp) => &keyed.rules[..],
            };
            for (_, rule) in rules {
                walk(*rule)?;
            }
        }
        Ok(())
    }

    fn satisfied(&self, rule: &Rule, facts: &Facts<'_>) -> Result<bool, GiveUp> {
        let (principal_type, principal_id) = facts.principal();
        if !self.matches(rule.principal, principal_type, principal_id)
            || !self.matches(rule.action, ACTION, facts.call.verb)
            || !self.matches(rule.resource, TOOL, facts.call.tool)
        {
            return Ok(false);
        }
        let Run(start, length) = rule.conditions;
        for (when, body) in &self.conditions[start as usize..(start + length) as usize] {
            if truth(&self.eval(*body, facts)?)? != *when {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn matches(&self, scope: Scope, kind: &str, id: &str) -> bool {
        match scope {
            Scope::Any => true,
            Scope::Is(expected) => self.text(expected) == kind,
            Scope::In(Run(start, length)) => self.entities[start as usize..(start + length) as usize]
                .iter()
                .any(|(t, i)| self.text(*t) == kind && self.text(*i) == id),
            Scope::IsIn(expected, t, i) => self.text(expected) == kind && self.text(t) == kind && self.text(i) == id,
        }
    }

    fn eval<'a>(&'a self, node: Node, facts: &Facts<'a>) -> Result<Val<'a>, GiveUp> {
        let eval = |node: Node| self.eval(node, facts);
        Ok(match self.nodes[node as usize] {
            Expr::Lit(Lit::Bool(flag)) => Val::Bool(flag),
            Expr::Lit(Lit::Long(n)) => Val::Long(n),
            Expr::Lit(Lit::Str(text)) => Val::Str(self.text(text)),
            Expr::Lit(Lit::Decimal(n)) => Val::Decimal(n),
            Expr::Lit(Lit::Entity(kind, id)) => Val::Entity(Entity::Named(self.text(kind), self.text(id))),
            Expr::Var(Var::Principal) => Val::Entity(Entity::Principal),
            Expr::Var(Var::Action) => Val::Entity(Entity::Action),
            Expr::Var(Var::Resource) => Val::Entity(Entity::Resource),
            Expr::Var(Var::Context) => Val::Record(Record::Context),
            Expr::Attr(of, name) => facts.attr(&eval(of)?, self.text(name)).ok_or(GiveUp)?,
            Expr::Has(of, name) => Val::Bool(facts.has(&eval(of)?, self.text(name))?),
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
                Val::Bool(ordering.is_lt() || (or_equal && ordering.is_eq()))
            }
            Expr::Like(of, Run(start, length)) => match eval(of)? {
                Val::Str(text) => Val::Bool(like(text, &self.patterns[start as usize..(start + length) as usize])),
                _ => return Err(GiveUp),
            },
            Expr::Is(of, kind, within) => match eval(of)? {
                Val::Entity(entity) => {
                    let (actual, _) = facts.entity(entity);
                    let is = actual == self.text(kind);
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
            Expr::Set(Run(start, length)) => Val::Set(
                self.items[start as usize..(start + length) as usize].iter().map(|item| eval(*item)).collect::<Result<
                    Vec<_>,
                    _,
                >>(
                )?,
            ),
        })
    }
}

/// The node of a two-operand operator or method, `>` and its kin swapped into `<`.
fn binary(key: &str, left: Node, right: Node) -> Option<Expr> {
    Some(match key {
        "&&" => Expr::And(left, right),
        "||" => Expr::Or(left, right),
        "==" => Expr::Eq(left, right),
        "!=" => Expr::Ne(left, right),
        "<" | "lessThan" => Expr::Less(false, left, right),
        "<=" | "lessThanOrEqual" => Expr::Less(true, left, right),
        ">" | "greaterThan" => Expr::Less(false, right, left),
        ">=" | "greaterThanOrEqual" => Expr::Less(true, right, left),
        "in" => Expr::In(left, right),
        "contains" => Expr::Contains(left, right),
        "containsAll" => Expr::ContainsAll(left, right),
        "containsAny" => Expr::ContainsAny(left, right),
        _ => return None,
    })
}

fn truth(value: &Val<'_>) -> Result<bool, GiveUp> {
    match value {
        Val::Bool(flag) => Ok(*flag),
        _ => Err(GiveUp),
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
    use super::{Facts, NativeSet, Val};

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
            // Bare equalities on a path: what the index keys rules by (`to` is always given).
            text.clone().prop_map(|t| format!("context.args.to == \"{t}\"")),
            text.clone().prop_map(|t| format!("\"{t}\" == context.args.to")),
            Just("resource.connector == \"github://acme/other\"".to_string()),
            Just("(context.args.to == \"abc\" && context.args.count > 1)".to_string()),
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
    fn a_call_walks_only_the_rules_whose_literal_its_argument_equals() {
        use std::str::FromStr;
        let mut text = String::new();
        for i in 0..50 {
            text += &format!(
                "forbid(principal, action, resource) when {{ context.args.text == \"blocked {i}\" && context.args.n > {i} }};\n"
            );
        }
        text += "forbid(principal, action, resource) when { context.args.text like \"*x*\" };\n";
        text += "permit(principal, action, resource);\n";
        let cedar = cedar_policy::PolicySet::from_str(&text).unwrap();
        let mut set = NativeSet::default();
        for policy in cedar.policies() {
            let json = NativeSet::json(policy).unwrap();
            assert!(set.add(&policy.id().to_string(), policy.effect(), &json, false));
        }
        let subject = Subject::Human { id: "local-user".into() };
        let no_args = serde_json::Map::new();
        let call = Call {
            subject: &subject,
            verb: "run",
            tool: "echo",
            connector: "github://acme/echo",
            approval_required: false,
            args: &no_args,
            now: chrono::Utc::now(),
            counts: Counts::default(),
        };
        let walked = |args: &[(&str, Val<'_>)]| {
            let mut walked = 0;
            set.each_candidate(&Facts::new(&call, args), |_| {
                walked += 1;
                Ok(())
            })
            .unwrap();
            walked
        };
        assert_eq!(walked(&[("text", Val::Str("blocked 7"))]), 3, "the two plain rules and `blocked 7`'s");
        assert_eq!(walked(&[("text", Val::Str("other"))]), 2, "no literal is the value");
        assert_eq!(walked(&[("text", Val::Long(7))]), 2, "`==` is false across types");
        assert_eq!(walked(&[]), 52, "the argument is missing: every rule is walked, to give up as Cedar errs");

        let decide = |args: &[(&str, Val<'_>)]| {
            set.decide(&Facts::new(&call, args))
                .map(|(forbids, _, permitted)| (forbids.iter().map(|id| id.to_string()).collect::<Vec<_>>(), permitted))
        };
        assert_eq!(
            decide(&[("text", Val::Str("blocked 7")), ("n", Val::Long(8))]).unwrap(),
            (vec!["policy7".to_string()], true)
        );
        assert_eq!(decide(&[("text", Val::Str("blocked 7")), ("n", Val::Long(7))]).unwrap(), (vec![], true));
        assert_eq!(
            decide(&[("text", Val::Str("a box")), ("n", Val::Long(0))]).unwrap(),
            (vec!["policy50".to_string()], true)
        );
        assert!(decide(&[("n", Val::Long(8))]).is_err(), "a missing argument gives up, as before");
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
