//! The resolver (SPEC §3.3): where a connector or action release and a publisher key live on
//! GitHub or GitLab, and fetching them. Base URLs are overridable (`AILERON_GITHUB_BASE_URL`,
//! `AILERON_GITLAB_BASE_URL`, `AILERON_GITHUB_RAW_BASE_URL`, `AILERON_GITLAB_RAW_BASE_URL`) so
//! tests run a fake forge on loopback.
//!
//! Invariant: a redirect is followed only to the same origin (scheme, host and port; at most 5),
//! with one exception: github.com's release downloads, which GitHub always serves by redirecting
//! to its own asset hosts over https ([`GITHUB_ASSET_HOSTS`]). The bytes fetched are never
//! trusted for what they are — the signature, the hash and the user's consent decide.

use std::time::Duration;

use aileron_core::identity::{Fqn, Scheme};
use futures_util::StreamExt;

use crate::platform::env;

/// The release asset every package is published as.
pub const ASSET: &str = "aileron.tar.gz";
/// Compressed packages larger than this are refused while downloading.
pub const MAX_DOWNLOAD_BYTES: u64 = 256 * 1024 * 1024;
const DEFAULT_GITHUB: &str = "https://github.com";
const DEFAULT_GITLAB: &str = "https://gitlab.com";
const DEFAULT_GITHUB_RAW: &str = "https://raw.githubusercontent.com";

/// Why a fetch failed. `retriable` is true for 5xx, timeouts and connection failures.
#[derive(Debug, thiserror::Error)]
#[error("fetch_failed: {message}")]
pub struct FetchError {
    pub message: String,
    pub retriable: bool,
    pub status: Option<u16>,
}

impl FetchError {
    pub fn hint(&self) -> String {
        match self.status {
            Some(404) => "check the name and the version (`<scheme>://<owner>/<repo>[/<path>]@<semver>`) and that the release has an aileron.tar.gz asset".into(),
            _ if self.retriable => "the forge did not answer properly; try again in a moment".into(),
            _ => "the forge refused the request; check the URL and your network".into(),
        }
    }
}

/// `v<version>`, or `<subpath>/v<version>` for a connector in a monorepo.
pub fn tag(fqn: &Fqn, version: &semver::Version) -> String {
    if fqn.subpath.is_empty() { format!("v{version}") } else { format!("{}/v{version}", fqn.subpath.join("/")) }
}

fn base(name: &str, default: &str) -> String {
    env::get(name).filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string()).trim_end_matches('/').to_string()
}

/// The release asset's URL (SPEC §3.3). The tag's `/` is escaped as `%2F`.
pub fn release_url(fqn: &Fqn, version: &semver::Version) -> String {
    let tag = tag(fqn, version).replace('/', "%2F");
    match fqn.scheme {
        Scheme::Github => {
            format!(
                "{}/{}/{}/releases/download/{tag}/{ASSET}",
                base(env::AILERON_GITHUB_BASE_URL, DEFAULT_GITHUB),
                fqn.owner,
                fqn.repo
            )
        }
        Scheme::Gitlab => format!(
            "{}/{}/{}/-/releases/{tag}/downloads/{ASSET}",
            base(env::AILERON_GITLAB_BASE_URL, DEFAULT_GITLAB),
            fqn.owner,
            fqn.repo
        ),
    }
}

/// Where an authority publishes its key: `keys/publisher.pub` on the default branch of the
/// repository (repo authority) or of the owner's profile repository (owner authority): `.github`
/// on GitHub, `gitlab-profile` on GitLab — each forge's own convention for owner-wide files.
pub fn publisher_key_url(authority: &str) -> Result<String, String> {
    let authority = aileron_core::signing::parse_authority(authority)?;
    let (scheme, rest) = authority.split_once("://").expect("parsed");
    let profile = if scheme == "github" { ".github" } else { "gitlab-profile" };
    let (owner, repo) = match rest.split_once('/') {
        Some((owner, repo)) => (owner.to_string(), repo.to_string()),
        None => (rest.to_string(), profile.to_string()),
    };
    Ok(match scheme {
        "github" => format!(
            "{}/{owner}/{repo}/HEAD/keys/publisher.pub",
            base(env::AILERON_GITHUB_RAW_BASE_URL, DEFAULT_GITHUB_RAW)
        ),
        _ => {
            let gitlab = base(env::AILERON_GITLAB_BASE_URL, DEFAULT_GITLAB);
            format!("{}/{owner}/{repo}/-/raw/HEAD/keys/publisher.pub", base(env::AILERON_GITLAB_RAW_BASE_URL, &gitlab))
        }
    })
}

const DEFAULT_GITHUB_API: &str = "https://api.github.com";

/// Where a repository's releases are listed: GitHub's REST API (`AILERON_GITHUB_API_URL`) or
/// GitLab's v4 API under the GitLab base.
pub fn releases_url(fqn: &Fqn) -> String {
    match fqn.scheme {
        Scheme::Github => format!(
            "{}/repos/{}/{}/releases?per_page=100",
            base(env::AILERON_GITHUB_API_URL, DEFAULT_GITHUB_API),
            fqn.owner,
            fqn.repo
        ),
        Scheme::Gitlab => format!(
            "{}/api/v4/projects/{}%2F{}/releases?per_page=100",
            base(env::AILERON_GITLAB_BASE_URL, DEFAULT_GITLAB),
            fqn.owner,
            fqn.repo
        ),
    }
}

/// The versions released for `fqn` in a releases listing (tags `v<semver>`, or
/// `<subpath>/v<semver>` for a monorepo connector; other tags are ignored). Pre-releases (a
/// SemVer pre-release part, or the forge's own flag) only with `include_pre`.
pub fn released_versions(fqn: &Fqn, listing: &serde_json::Value, include_pre: bool) -> Vec<semver::Version> {
    let prefix = if fqn.subpath.is_empty() { "v".to_string() } else { format!("{}/v", fqn.subpath.join("/")) };
    let mut versions: Vec<semver::Version> = listing
        .as_array()
        .into_iter()
        .flatten()
        .filter(|release| release["draft"] != true)
        .filter_map(|release| {
            let version = semver::Version::parse(release["tag_name"].as_str()?.strip_prefix(&prefix)?).ok()?;
            let pre = !version.pre.is_empty() || release["prerelease"] == true || release["upcoming_release"] == true;
            (include_pre || !pre).then_some(version)
        })
        .collect();
    versions.sort();
    versions.dedup();
    versions
}

/// Where github.com sends a release download (a `302` from `/releases/download/...`), all
/// GitHub's own. SPEC §3.3 allows same-host redirects only; without these hosts no real GitHub
/// release could be installed (docs/decisions/0005-install.md records the decision).
pub const GITHUB_ASSET_HOSTS: [&str; 3] =
    ["objects.githubusercontent.com", "release-assets.githubusercontent.com", "github-releases.githubusercontent.com"];

/// Whether a redirect from `first` (the URL asked for) to `next` may be followed: the same
/// origin, never a downgrade, or github.com to one of its asset hosts over https.
pub fn may_follow(first: &url::Url, next: &url::Url) -> bool {
    let same_origin = first.scheme() == next.scheme()
        && first.host_str() == next.host_str()
        && first.port_or_known_default() == next.port_or_known_default();
    let github_asset = first.scheme() == "https"
        && first.host_str() == Some("github.com")
        && next.scheme() == "https"
        && next.port_or_known_default() == Some(443)
        && next.host_str().is_some_and(|host| GITHUB_ASSET_HOSTS.contains(&host));
    same_origin || github_asset
}

/// A client that follows redirects only as [`may_follow`] allows.
fn client() -> anyhow::Result<reqwest::Client> {
    crate::platform::process::install_crypto_provider();
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let allowed = attempt.previous().first().is_some_and(|first| may_follow(first, attempt.url()));
        if attempt.previous().len() >= 5 || !allowed { attempt.stop() } else { attempt.follow() }
    });
    Ok(crate::dataplane::tls::reqwest_builder(crate::dataplane::tls::Alpn::Http2AndHttp1)
        .redirect(policy)
        .connect_timeout(Duration::from_secs(15))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("aileron/", env!("CARGO_PKG_VERSION")))
        .build()?)
}

/// GETs `url`, at most `cap` bytes, calling `progress(downloaded, total)` as bytes arrive.
pub async fn fetch(
    url: &str,
    cap: u64,
    progress: &mut (dyn FnMut(u64, Option<u64>) + Send),
) -> Result<Vec<u8>, FetchError> {
    let failed = |message: String, retriable: bool, status: Option<u16>| FetchError { message, retriable, status };
    let client = client().map_err(|e| failed(format!("building the HTTP client: {e}"), false, None))?;
    let response = client.get(url).send().await.map_err(|error| {
        failed(format!("{url}: {}", if error.is_timeout() { "timed out" } else { "connection failed" }), true, None)
    })?;
    let status = response.status();
    if status.is_redirection() {
        let target = response.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("?").to_string();
        return Err(failed(
            format!(
                "{url} redirects to another host ({target}); only same-origin redirects (and github.com's own asset hosts) are followed"
            ),
            false,
            Some(status.as_u16()),
        ));
    }
    if !status.is_success() {
        let retriable = status.is_server_error() || status.as_u16() == 429;
        let what = if status.as_u16() == 404 { "not found" } else { status.canonical_reason().unwrap_or("error") };
        return Err(failed(format!("{url}: HTTP {} {what}", status.as_u16()), retriable, Some(status.as_u16())));
    }
    let total = response.content_length();
    if total.is_some_and(|total| total > cap) {
        return Err(failed(
            format!("{url}: {} bytes is over the {cap}-byte limit", total.unwrap_or_default()),
            false,
            None,
        ));
    }
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| failed(format!("{url}: the download was interrupted"), true, None))?;
        if bytes.len() as u64 + chunk.len() as u64 > cap {
            return Err(failed(format!("{url}: over the {cap}-byte limit"), false, None));
        }
        bytes.extend_from_slice(&chunk);
        progress(bytes.len() as u64, total);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn redirects_stay_on_the_origin_or_go_to_githubs_own_asset_hosts() {
        let check = |first: &str, next: &str, expected: bool| {
            let (first, next) = (url::Url::parse(first).unwrap(), url::Url::parse(next).unwrap());
            assert_eq!(super::may_follow(&first, &next), expected, "{first} -> {next}");
        };
        let release = "https://github.com/acme/widget/releases/download/v1.2.0/aileron.tar.gz";
        check(release, "https://github.com/acme/widget/releases/download/v1.2.0/other", true);
        check(release, "https://objects.githubusercontent.com/github-production-release-asset/1?sig=x", true);
        check(release, "https://release-assets.githubusercontent.com/github-production-release-asset/1", true);
        check(release, "http://objects.githubusercontent.com/x", false);
        check(release, "https://objects.githubusercontent.com:8443/x", false);
        check(release, "https://evil.example/aileron.tar.gz", false);
        check(release, "https://githubusercontent.com.evil.example/x", false);
        check(release, "http://github.com/acme/widget/x", false);
        // A mirror or a test forge: the same origin only, no asset-host exception.
        check("http://127.0.0.1:8080/acme/x", "http://127.0.0.1:8080/acme/y", true);
        check("http://127.0.0.1:8080/acme/x", "http://127.0.0.1:9090/acme/y", false);
        check("https://mirror.example/acme/x", "https://objects.githubusercontent.com/x", false);
        check("https://gitlab.com/team/linear/-/releases/v1/downloads/aileron.tar.gz", "https://evil.example/x", false);
    }

    use super::*;

    #[test]
    fn tags_and_urls_follow_the_spec() {
        let version = semver::Version::parse("2.0.0").unwrap();
        let mono = Fqn::parse("github://acme/integrations/connectors/slack").unwrap();
        assert_eq!(tag(&mono, &version), "connectors/slack/v2.0.0");
        assert_eq!(
            release_url(&mono, &version),
            "https://github.com/acme/integrations/releases/download/connectors%2Fslack%2Fv2.0.0/aileron.tar.gz"
        );
        let gitlab = Fqn::parse("gitlab://team/linear").unwrap();
        let version = semver::Version::parse("0.3.1").unwrap();
        assert_eq!(
            release_url(&gitlab, &version),
            "https://gitlab.com/team/linear/-/releases/v0.3.1/downloads/aileron.tar.gz"
        );
        assert_eq!(
            publisher_key_url("github://acme/widget").unwrap(),
            "https://raw.githubusercontent.com/acme/widget/HEAD/keys/publisher.pub"
        );
        assert_eq!(
            publisher_key_url("github://acme").unwrap(),
            "https://raw.githubusercontent.com/acme/.github/HEAD/keys/publisher.pub"
        );
        assert_eq!(
            publisher_key_url("gitlab://team").unwrap(),
            "https://gitlab.com/team/gitlab-profile/-/raw/HEAD/keys/publisher.pub"
        );
        assert!(publisher_key_url("ftp://acme").is_err());
    }

    #[test]
    fn released_versions_filter_by_subpath_and_pre_release() {
        let listing = serde_json::json!([
            {"tag_name": "v1.2.0"}, {"tag_name": "v1.10.0"}, {"tag_name": "v2.0.0-rc.1"}, {"tag_name": "v1.3.0", "prerelease": true},
            {"tag_name": "connectors/slack/v0.4.0"}, {"tag_name": "release-7"}, {"tag_name": "v9.0.0", "draft": true},
        ]);
        let repo = Fqn::parse("github://acme/widget").unwrap();
        let versions = |pre| released_versions(&repo, &listing, pre).iter().map(|v| v.to_string()).collect::<Vec<_>>();
        assert_eq!(versions(false), ["1.2.0", "1.10.0"]);
        assert_eq!(versions(true), ["1.2.0", "1.3.0", "1.10.0", "2.0.0-rc.1"]);
        let slack = Fqn::parse("github://acme/integrations/connectors/slack").unwrap();
        assert_eq!(released_versions(&slack, &listing, false), [semver::Version::new(0, 4, 0)]);
        assert_eq!(releases_url(&repo), "https://api.github.com/repos/acme/widget/releases?per_page=100");
    }
}
