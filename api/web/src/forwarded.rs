//! What a reverse proxy says of the request it asks the gate about.

use axum::http::{HeaderMap, Method};
use sluice_ops::bypass::TARGET_LEN_MAX;

/// What the gate knows of the request it is asked about: its target (path and query) and
/// method, as the proxy tells them. nginx: `X-Original-URI` and `X-Original-Method` (set them
/// in the `auth_request` location); Traefik's forwardAuth: `X-Forwarded-Uri` and
/// `X-Forwarded-Method`; Envoy's ext_authz with a `path_prefix` ending in `?`: the original
/// path arrives as the gate's query, and its method as the gate request's own.
///
/// The first of the names the request carries decides. One that is there but not readable
/// (bytes outside visible ASCII, which nginx passes on from a raw request line) gives no
/// target, so no path rule matches: never a reason to read the next name, which nginx passes on
/// from the client untouched.
pub fn original_request<'a>(
    headers: &'a HeaderMap,
    method: &'a Method,
    query: Option<&'a str>,
) -> (Option<&'a str>, Option<&'a str>) {
    let header = |names: [&str; 2]| {
        names
            .iter()
            .find_map(|n| headers.get(*n))
            .map(|v| v.to_str().ok())
    };
    let target = match header(["x-original-uri", "x-forwarded-uri"]) {
        Some(sent) => sent,
        None => query.filter(|q| q.starts_with('/')),
    }
    .filter(|t| t.len() <= TARGET_LEN_MAX);
    let method = match header(["x-original-method", "x-forwarded-method"]) {
        Some(sent) => sent,
        None => (method != Method::GET && method != Method::HEAD).then(|| method.as_str()),
    };
    (target, method)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_original_request_comes_from_the_proxy_headers_or_the_envoy_query() {
        let mut h = HeaderMap::new();
        assert_eq!(original_request(&h, &Method::GET, None), (None, None));
        assert_eq!(
            original_request(&h, &Method::POST, Some("/pay/cb?x=1")),
            (Some("/pay/cb?x=1"), Some("POST"))
        );
        assert_eq!(
            original_request(&h, &Method::GET, Some("a=b")),
            (None, None)
        );
        h.insert("x-forwarded-uri", "/static/a.css".parse().unwrap());
        h.insert("x-forwarded-method", "GET".parse().unwrap());
        assert_eq!(
            original_request(&h, &Method::GET, None),
            (Some("/static/a.css"), Some("GET"))
        );
        h.insert("x-original-uri", "/pay/cb".parse().unwrap());
        h.insert("x-original-method", "POST".parse().unwrap());
        assert_eq!(
            original_request(&h, &Method::GET, None),
            (Some("/pay/cb"), Some("POST"))
        );
        h.insert(
            "x-original-uri",
            format!("/{}", "a".repeat(TARGET_LEN_MAX)).parse().unwrap(),
        );
        assert_eq!(original_request(&h, &Method::GET, None).0, None);
    }

    /// nginx passes a raw request line's bytes on in `X-Original-URI`, and the client's own
    /// `X-Forwarded-Uri` untouched: an unreadable first header is no target, not a reason to
    /// believe the second.
    #[test]
    fn an_unreadable_proxy_header_is_no_target_and_the_next_one_is_not_read() {
        let mut h = HeaderMap::new();
        h.insert(
            "x-original-uri",
            axum::http::HeaderValue::from_bytes(b"/checkout?\xff").unwrap(),
        );
        h.insert("x-forwarded-uri", "/static/a.css".parse().unwrap());
        h.insert(
            "x-original-method",
            axum::http::HeaderValue::from_bytes(b"P\xffST").unwrap(),
        );
        h.insert("x-forwarded-method", "POST".parse().unwrap());
        assert_eq!(
            original_request(&h, &Method::GET, Some("/static/b.css")),
            (None, None)
        );
    }
}
