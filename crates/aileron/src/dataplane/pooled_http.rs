//! hyper-util's pooled HTTP client over hyper-rustls, set up as reqwest sets up its own: the
//! process's TLS configuration ([`crate::dataplane::tls`]), `TCP_NODELAY`, a connect timeout, idle
//! connections kept 90 s, no redirects followed (hyper-util follows none). For the two hot paths
//! that send one request after another and need none of reqwest's layers (its redirect layer
//! parses every URL again, its request builder another): the LLM gateway's upstream requests and
//! `aileron-mcp`'s calls to the daemon (BENCHMARKS.md (e), (f)). Everything else uses reqwest.

use std::time::Duration;

use axum::body::Body;
use hyper_util::client::legacy::connect::HttpConnector;

use crate::dataplane::tls::Alpn;

/// Request bodies are `B`: an `axum` [`Body`] by default, the gateway's own capped body type
/// there (one box fewer on every request it forwards).
pub type PooledClient<B = Body> = hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, B>;

/// How long an idle pooled connection is kept (reqwest's clients beside these keep the same).
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

pub fn client<B>(alpn: Alpn, connect_timeout: Duration) -> PooledClient<B>
where
    B: axum::body::HttpBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tls = crate::dataplane::tls::client_config();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http();
    let https = match alpn {
        Alpn::Http2AndHttp1 => https.enable_http1().enable_http2().wrap_connector(http),
        Alpn::Http1 => https.enable_http1().wrap_connector(http),
    };
    let mut builder = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
    builder
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .timer(hyper_util::rt::TokioTimer::new());
    builder.build(https)
}

/// An absolute URL's scheme and authority, split once, and the path every request is appended
/// to: a request's URI is made from parts, never parsed whole.
#[derive(Clone)]
pub struct Base {
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    /// Without its trailing `/` (empty for a base without a path).
    prefix: String,
}

impl Base {
    /// `None` unless `url` is an absolute URL with a scheme and an authority.
    pub fn parse(url: &str) -> Option<Base> {
        let uri: http::Uri = url.parse().ok()?;
        Some(Base {
            scheme: uri.scheme()?.clone(),
            authority: uri.authority()?.clone(),
            prefix: uri.path().trim_end_matches('/').to_string(),
        })
    }

    /// The absolute URI of `path_and_query` (from `/`) under this base: the base's scheme and
    /// authority, the base's path followed by `path_and_query` byte for byte (nothing normalized).
    pub fn uri_for(&self, path_and_query: Option<&http::uri::PathAndQuery>) -> Result<http::Uri, http::Error> {
        let path_and_query = match (self.prefix.is_empty(), path_and_query) {
            (true, Some(path_and_query)) => path_and_query.clone(),
            (_, path_and_query) => {
                let tail = path_and_query.map_or("/", |p| p.as_str());
                http::uri::PathAndQuery::try_from(format!("{}{tail}", self.prefix))?
            }
        };
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = Some(path_and_query);
        http::Uri::from_parts(parts).map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A URI is the base's scheme and authority with the base's path before the request's own
    /// path and query, byte for byte: nothing decoded, re-encoded or normalized.
    #[test]
    fn uris_keep_the_path_and_query_as_given() {
        for (base, request, expected) in [
            ("https://api.openai.com", "/v1/messages", "https://api.openai.com/v1/messages"),
            (
                "https://api.openai.com/",
                "/v1/messages?beta=true&x=1%202",
                "https://api.openai.com/v1/messages?beta=true&x=1%202",
            ),
            ("http://127.0.0.1:9/prefix/", "/v1/models?", "http://127.0.0.1:9/prefix/v1/models?"),
            (
                "http://127.0.0.1:9/a/b",
                "/v1/responses/../models?q=%2F",
                "http://127.0.0.1:9/a/b/v1/responses/../models?q=%2F",
            ),
            ("https://api.anthropic.com", "/v1//messages", "https://api.anthropic.com/v1//messages"),
        ] {
            let request: http::Uri = request.parse().unwrap();
            let uri = Base::parse(base).unwrap().uri_for(request.path_and_query()).unwrap();
            assert_eq!(uri.to_string(), expected, "{base} + {request}");
        }
        assert!(Base::parse("/relative").is_none() && Base::parse("not a url").is_none());
    }
}
