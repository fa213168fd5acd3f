//! Property test of the capability decisions against a reference model written with sets and
//! string comparisons: generated manifests (hosts, credential kind, spawn operations), action
//! subsets, and requests (URLs spelled in the ways a client may spell them, ops, credential kinds,
//! spawn operations).

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::manifest::parse_manifest;

const PORTS: [u16; 4] = [80, 443, 8080, 8443];
const KINDS: [&str; 3] = ["api_key", "oauth2", "aws_sigv4"];
const SPAWN_OPS: [&str; 3] = ["log", "status", "push"];
const OPS: [&str; 3] = ["list", "get", "create"];

/// A host as a manifest author writes it.
#[derive(Debug, Clone)]
enum Host {
    /// DNS labels, from a pool that includes punycode and numeric-looking labels.
    Name(Vec<&'static str>),
    V4([u8; 4]),
    /// Groups from a small alphabet, so zero runs and IPv4-mapped forms come up often.
    V6([u16; 8]),
}

impl Host {
    /// The host as the manifest lists it (IPv6 bracketed, in std's canonical text).
    fn listed(&self) -> String {
        match self {
            Host::Name(labels) => labels.join("."),
            Host::V4(octets) => std::net::Ipv4Addr::from(*octets).to_string(),
            Host::V6(groups) => format!("[{}]", Ipv6Addr::from(*groups)),
        }
    }
}

fn host() -> impl Strategy<Value = Host> {
    let label = prop::sample::select(vec![
        "api",
        "github",
        "com",
        "example",
        "localhost",
        "a-b",
        "xn--bcher-kva",
        "xn--zz",
        "0x1f",
        "0x",
        "9",
        "1a",
    ]);
    let group = prop::sample::select(vec![0u16, 0, 0, 1, 0xffff, 0x7f00, 0xdb8, 0x2001]);
    prop_oneof![
        4 => prop::collection::vec(label, 1..4).prop_map(Host::Name),
        1 => prop::sample::select(vec![[127, 0, 0, 1], [10, 0, 0, 7], [93, 184, 216, 34]]).prop_map(Host::V4),
        2 => prop::array::uniform8(group).prop_map(Host::V6),
    ]
}

/// `host:port` candidates; only those `validate_host_port` accepts can be listed at all.
fn host_port() -> impl Strategy<Value = (Host, u16)> {
    (host(), prop::sample::select(PORTS.to_vec()))
}

fn listed((host, port): &(Host, u16)) -> String {
    format!("{}:{port}", host.listed())
}

/// How a request spells its URL.
#[derive(Debug, Clone)]
struct UrlRequest {
    target: (Host, u16),
    https: bool,
    /// Bit `i` upper-cases the `i`th letter of the scheme and host.
    case_flips: u64,
    port: PortSpelling,
    path: &'static str,
    form: UrlForm,
}

#[derive(Debug, Clone, Copy)]
enum PortSpelling {
    /// Omitted when it is the scheme's default, else explicit.
    Implicit,
    Explicit,
    LeadingZero,
    /// `host:` and nothing: the default port (explicit when the port is not the default).
    EmptyAfterColon,
}

/// Forms the egress check refuses whatever the hosts.
#[derive(Debug, Clone, Copy, PartialEq)]
enum UrlForm {
    Plain,
    UserInfo,
    LeadingSpace,
    Backslash,
    Ftp,
    NoSlashes,
}

impl UrlRequest {
    fn default_port(&self) -> u16 {
        if self.https { 443 } else { 80 }
    }

    fn url(&self) -> String {
        let (host, port) = &self.target;
        let scheme = match self.form {
            UrlForm::Ftp => "ftp",
            _ if self.https => "https",
            _ => "http",
        };
        let authority = flip_case(&format!("{scheme}://{}", host.listed()), self.case_flips);
        let default = *port == self.default_port();
        let port_text = match self.port {
            PortSpelling::Implicit | PortSpelling::EmptyAfterColon if !default => format!(":{port}"),
            PortSpelling::Implicit => String::new(),
            PortSpelling::EmptyAfterColon => ":".to_string(),
            PortSpelling::Explicit => format!(":{port}"),
            PortSpelling::LeadingZero => format!(":0{port}"),
        };
        let url = format!("{authority}{port_text}{}", self.path);
        match self.form {
            UrlForm::Plain | UrlForm::Ftp => url,
            UrlForm::UserInfo => url.replacen("://", "://user:pass@", 1),
            UrlForm::LeadingSpace => format!(" {url}"),
            UrlForm::Backslash => format!("{url}\\@evil.example/"),
            UrlForm::NoSlashes => url.replacen("://", ":", 1),
        }
    }
}

fn flip_case(text: &str, flips: u64) -> String {
    text.chars().enumerate().map(|(i, c)| if flips >> (i % 64) & 1 == 1 { c.to_ascii_uppercase() } else { c }).collect()
}

fn url_request(targets: Vec<(Host, u16)>) -> impl Strategy<Value = UrlRequest> {
    let port = prop::sample::select(vec![
        PortSpelling::Implicit,
        PortSpelling::Explicit,
        PortSpelling::LeadingZero,
        PortSpelling::EmptyAfterColon,
    ]);
    let path = prop::sample::select(vec!["", "/", "/repos/a/b", "/x?token=secret", "?q=1", "#frag", "/@evil.example"]);
    let form = prop_oneof![
        10 => Just(UrlForm::Plain),
        1 => prop::sample::select(vec![
            UrlForm::UserInfo,
            UrlForm::LeadingSpace,
            UrlForm::Backslash,
            UrlForm::Ftp,
            UrlForm::NoSlashes,
        ]),
    ];
    (prop::sample::select(targets), any::<bool>(), any::<u64>(), port, path, form).prop_map(
        |(target, https, case_flips, port, path, form)| UrlRequest { target, https, case_flips, port, path, form },
    )
}

/// A generated connector: what its manifest declares.
#[derive(Debug, Clone)]
struct Declared {
    hosts: Vec<String>,
    credential: Option<&'static str>,
    spawn: Vec<&'static str>,
}

impl Declared {
    fn manifest_text(&self) -> String {
        let mut text = String::from("[connector]\nname = \"github://acme/prop\"\nversion = \"1.0.0\"\n");
        if !self.hosts.is_empty() {
            let hosts: Vec<String> = self.hosts.iter().map(|h| format!("\"{h}\"")).collect();
            text.push_str(&format!("[capabilities.network]\nhosts = [{}]\n", hosts.join(", ")));
        }
        match self.credential {
            None => {}
            Some("oauth2") => text.push_str(
                "[capabilities.credential]\nkind = \"oauth2\"\n[capabilities.credential.oauth2]\n\
                 authorize_url = \"https://github.com/a\"\ntoken_url = \"https://github.com/t\"\n\
                 client_id = \"c\"\nscopes = [\"repo\"]\n",
            ),
            Some("aws_sigv4") => text.push_str(
                "[capabilities.credential]\nkind = \"aws_sigv4\"\nservice = \"s3\"\nregion = \"us-east-1\"\n",
            ),
            Some(kind) => text.push_str(&format!("[capabilities.credential]\nkind = \"{kind}\"\n")),
        }
        if !self.spawn.is_empty() {
            text.push_str("[capabilities.spawn]\nprograms = [{ path = \"/usr/bin/git\" }]\n");
            for op in &self.spawn {
                text.push_str(&format!(
                    "[capabilities.spawn.operations.{op}]\nargv = \"git {op}\"\ndescription = \"d\"\n"
                ));
            }
        }
        text
    }
}

/// The reference model: the manifest and the subset as plain sets.
struct Model {
    hosts: BTreeSet<String>,
    credential: Option<&'static str>,
    spawn: BTreeSet<&'static str>,
    subset_hosts: BTreeSet<String>,
    subset_credentials: BTreeSet<String>,
    subset_spawn: BTreeSet<String>,
    subset_ops: BTreeSet<String>,
}

impl Model {
    fn new(declared: &Declared, entries: &[String]) -> Model {
        let with_prefix = |prefix: &str| -> BTreeSet<String> {
            entries.iter().filter_map(|e| e.strip_prefix(prefix)).map(str::to_string).collect()
        };
        Model {
            hosts: declared.hosts.iter().cloned().collect(),
            credential: declared.credential,
            spawn: declared.spawn.iter().copied().collect(),
            subset_hosts: with_prefix("network:"),
            subset_credentials: entries.iter().filter(|e| KINDS.contains(&e.as_str())).cloned().collect(),
            subset_spawn: with_prefix("spawn:"),
            subset_ops: entries.iter().filter(|e| OPS.contains(&e.as_str())).cloned().collect(),
        }
    }

    /// Install time: the subset claims nothing the manifest lacks (op names are not in manifests).
    fn install(&self) -> bool {
        self.subset_hosts.is_subset(&self.hosts)
            && self.subset_credentials.iter().all(|kind| self.credential == Some(kind.as_str()))
            && self.subset_spawn.iter().all(|op| self.spawn.contains(op.as_str()))
    }

    fn op(&self, op: &str) -> bool {
        self.subset_ops.is_empty() || self.subset_ops.contains(op)
    }

    fn credential(&self, kind: &str) -> Result<(), Boundary> {
        if !KINDS.contains(&kind) || self.credential != Some(kind) {
            return Err(Boundary::Sandbox);
        }
        if !self.subset_credentials.contains(kind) {
            return Err(Boundary::Action);
        }
        Ok(())
    }

    fn spawn(&self, op: &str) -> Result<(), Boundary> {
        if !self.spawn.contains(op) {
            return Err(Boundary::Sandbox);
        }
        if !self.subset_spawn.contains(op) {
            return Err(Boundary::Action);
        }
        Ok(())
    }

    /// A URL that writes a listed host exactly as listed (letters in any case, the port implicit
    /// when it is the scheme's default) reaches that `host:port`; the refused forms reach nothing.
    fn egress(&self, request: &UrlRequest) -> Result<String, Boundary> {
        if request.form != UrlForm::Plain {
            return Err(Boundary::Sandbox);
        }
        let host_port = listed(&request.target);
        if !self.hosts.contains(&host_port) {
            return Err(Boundary::Sandbox);
        }
        if !self.subset_hosts.is_empty() && !self.subset_hosts.contains(&host_port) {
            return Err(Boundary::Action);
        }
        Ok(host_port)
    }
}

fn boundary<T>(result: Result<T, Failure>) -> Result<T, Boundary> {
    result.map_err(|failure| failure.boundary)
}

/// A manifest, an action subset over it, and requests aimed at listed and unlisted hosts.
fn scenario() -> impl Strategy<Value = (Declared, Vec<String>, Vec<UrlRequest>, Vec<&'static str>)> {
    let candidates = prop::collection::vec(host_port(), 1..6);
    candidates.prop_flat_map(|candidates| {
        // What validation refuses could never be listed: the manifest (or the action) would not parse.
        let valid: Vec<String> = candidates
            .iter()
            .map(listed)
            .filter(|hp| validate_host_port(hp).is_ok())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let manifest_hosts = prop::sample::subsequence(valid.clone(), 0..=valid.len());
        let credential = prop::option::of(prop::sample::select(KINDS.to_vec()));
        let spawn = prop::sample::subsequence(SPAWN_OPS.to_vec(), 0..=2);
        let declared = (manifest_hosts, credential, spawn).prop_map(|(hosts, credential, spawn)| Declared {
            hosts,
            credential,
            spawn,
        });
        let mut entry_pool: Vec<String> = valid.iter().map(|hp| format!("network:{hp}")).collect();
        entry_pool.push("network:evil.example:443".to_string());
        entry_pool.extend(KINDS.iter().map(|k| k.to_string()));
        entry_pool.extend(SPAWN_OPS.iter().map(|op| format!("spawn:{op}")));
        entry_pool.extend(OPS.iter().map(|op| op.to_string()));
        let entries = prop::collection::vec(prop::sample::select(entry_pool), 0..6);
        let requests = prop::collection::vec(url_request(candidates), 1..6);
        let asked = prop::collection::vec(
            prop::sample::select(vec![
                "list",
                "get",
                "create",
                "delete",
                "api_key",
                "oauth2",
                "aws_sigv4",
                "basic",
                "log",
                "status",
                "push",
            ]),
            1..4,
        );
        (declared, entries, requests, asked)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Invariant: every capability decision — install-time `check_subset_against_manifest`, and at
    /// run time `check_op`, `check_credential`, `check_spawn_op` and `check_egress` with the
    /// boundary that refuses — agrees with a reference model of sets and string comparisons.
    /// Model: a manifest is its set of `host:port` strings, its credential kind and its spawn
    /// operations; a subset narrows hosts and ops when it lists any, and must list credentials and
    /// spawn operations; a URL reaches the listed `host:port` it spells (case aside, default port
    /// implicit or explicit).
    #[test]
    fn capability_decisions_agree_with_a_set_model((declared, entries, requests, asked) in scenario()) {
        let text = declared.manifest_text();
        let manifest = parse_manifest(&text, "manifest.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let subset = CapabilitySubset::parse(&entries).unwrap_or_else(|e| panic!("{e}: {entries:?}"));
        let model = Model::new(&declared, &entries);

        prop_assert_eq!(check_subset_against_manifest(&subset, &manifest).is_ok(), model.install(), "install");
        for name in &asked {
            prop_assert_eq!(check_op(&subset, name).is_ok(), model.op(name), "op {}", name);
            let credential = boundary(check_credential(&manifest, &subset, name)).map(|_| ());
            prop_assert_eq!(credential, model.credential(name), "credential {}", name);
            prop_assert_eq!(boundary(check_spawn_op(&manifest, &subset, name)), model.spawn(name), "spawn {}", name);
        }
        for request in &requests {
            let url = request.url();
            let decided = boundary(check_egress(&manifest, &subset, &url)).map(|target| target.host_port);
            prop_assert_eq!(decided, model.egress(request), "egress {:?}", url);
        }
    }
}
