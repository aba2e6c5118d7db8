//! Reaching a node: the base URL checked before anything is sent, and a failure to get an
//! answer said in words that point at the fix (the scheme, the address, the node itself).

/// A `--url` that cannot name a node, said before anything is sent.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadUrl {
    /// `127.0.0.1:8080`: no `http://`.
    #[error(
        "--url/SLUICE_URL {0:?} has no scheme: write http://{0} (or https://{0} if the node \
serves TLS)"
    )]
    NoScheme(String),
    /// `ftp://…`.
    #[error("--url/SLUICE_URL {0:?}: the scheme must be http:// or https://")]
    Scheme(String),
    /// `http://host:8080/v1`, or with a query or fragment.
    #[error(
        "--url/SLUICE_URL {given:?} has a path ({path}): give the node's base URL only, as {base}"
    )]
    Path {
        /// As given.
        given: String,
        /// What follows the host and port.
        path: String,
        /// The URL without it.
        base: String,
    },
    /// Not a URL at all.
    #[error("--url/SLUICE_URL {given:?} is not a URL ({why}); e.g. http://127.0.0.1:8080")]
    Unreadable {
        /// As given.
        given: String,
        /// The parser's reason.
        why: String,
    },
}

/// The base URL of a node (`http://host:port`, no trailing slash) from what the operator gave.
pub fn base_url(given: &str) -> Result<String, BadUrl> {
    let given = given.trim();
    if !given.contains("://") {
        return Err(BadUrl::NoScheme(given.to_string()));
    }
    let url = reqwest::Url::parse(given).map_err(|e| BadUrl::Unreadable {
        given: given.to_string(),
        why: e.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(BadUrl::Scheme(given.to_string()));
    }
    let base = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    if !path.is_empty() || url.query().is_some() || url.fragment().is_some() {
        let rest = &url.as_str()[base.len()..];
        return Err(BadUrl::Path {
            given: given.to_string(),
            path: rest.to_string(),
            base,
        });
    }
    Ok(base)
}

/// No answer from a node: what was tried, what happened, and what to do.
#[derive(Debug, thiserror::Error)]
#[error("no answer from {url}: {what}\n  {hint}")]
pub struct NoAnswer {
    /// The node's base URL.
    pub url: String,
    /// What happened, in a few words.
    pub what: String,
    /// What to do about it.
    pub hint: String,
    /// Worth retrying as it is (the node may come back): exit status 3.
    pub retry: bool,
}

/// How long a node has to answer.
pub const ANSWER_TIMEOUT_SECS: u64 = 30;

impl NoAnswer {
    /// Says why `e`, from a request to the node at `url`, got no answer.
    pub fn new(url: &str, e: &reqwest::Error) -> Self {
        let chain = source_chain(e);
        let lower = chain.to_lowercase();
        let https = url.starts_with("https://");
        let (what, hint) = if e.is_timeout() {
            (
                format!("nothing within {ANSWER_TIMEOUT_SECS} s"),
                "the node may be overloaded or cut off; try again, or another node".to_string(),
            )
        } else if https
            && (lower.contains("invalidcontenttype") || lower.contains("corrupt message"))
        {
            (
                "it does not speak TLS".to_string(),
                format!(
                    "the node serves plain HTTP there: use {}",
                    url.replacen("https://", "http://", 1)
                ),
            )
        } else if https && lower.contains("certificate") {
            (
                format!(
                    "its TLS certificate is not trusted ({})",
                    last_cause(&chain)
                ),
                "check the certificate, or that this is the node's name".to_string(),
            )
        } else if lower.contains("connection refused") {
            ("connection refused".to_string(), is_it_running())
        } else if lower.contains("dns error") || lower.contains("lookup address") {
            (
                "its host name does not resolve".to_string(),
                is_it_running(),
            )
        } else if !https
            && (lower.contains("connection closed") || lower.contains("connection reset"))
        {
            (
                "the connection closed without an answer".to_string(),
                format!(
                    "if the node serves HTTPS, use {}",
                    url.replacen("http://", "https://", 1)
                ),
            )
        } else {
            (last_cause(&chain), is_it_running())
        };
        Self {
            url: url.to_string(),
            what,
            hint,
            retry: e.is_connect() || e.is_timeout() || e.is_request(),
        }
    }
}

fn is_it_running() -> String {
    "is the node running there? Give a node's address with --url or SLUICE_URL".to_string()
}

/// Every cause of `e`, outermost first, joined with `: `.
fn source_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(c) = cur {
        parts.push(c.to_string());
        cur = c.source();
    }
    parts.join(": ")
}

/// The innermost cause in a chain from [`source_chain`].
fn last_cause(chain: &str) -> String {
    chain.rsplit(": ").next().unwrap_or(chain).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_needs_a_scheme_and_nothing_after_the_port() {
        assert_eq!(
            base_url("http://127.0.0.1:8080").as_deref(),
            Ok("http://127.0.0.1:8080")
        );
        assert_eq!(
            base_url(" https://sluice.example.com/ ").as_deref(),
            Ok("https://sluice.example.com")
        );
        let no_scheme = base_url("127.0.0.1:8080").unwrap_err();
        assert_eq!(no_scheme, BadUrl::NoScheme("127.0.0.1:8080".into()));
        assert!(
            no_scheme
                .to_string()
                .contains("write http://127.0.0.1:8080"),
            "{no_scheme}"
        );
        // A host name and a port parse as a scheme and a path: still "no scheme".
        assert!(matches!(
            base_url("localhost:8080"),
            Err(BadUrl::NoScheme(_))
        ));
        let path = base_url("http://10.0.0.1:8080/v1").unwrap_err().to_string();
        assert!(
            path.contains("(/v1)") && path.contains("base URL only, as http://10.0.0.1:8080"),
            "{path}"
        );
        for with_more in ["http://h:1/v1/rooms", "http://h:1/?x=1", "http://h:1#top"] {
            assert!(
                matches!(base_url(with_more), Err(BadUrl::Path { .. })),
                "{with_more}"
            );
        }
        assert!(matches!(base_url("ftp://h:1"), Err(BadUrl::Scheme(_))));
        assert!(matches!(
            base_url("http://"),
            Err(BadUrl::Unreadable { .. })
        ));
    }

    #[tokio::test]
    async fn a_node_that_does_not_answer_is_named_with_the_way_to_point_elsewhere() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let e = reqwest::get(format!("{url}/v1/rooms")).await.unwrap_err();
        let n = NoAnswer::new(&url, &e);
        let text = n.to_string();
        assert!(n.retry);
        assert!(
            text.starts_with(&format!("no answer from {url}: connection refused\n")),
            "{text}"
        );
        assert!(text.contains("--url or SLUICE_URL"), "{text}");
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[tokio::test]
    async fn https_against_plain_http_says_to_use_http() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // A plain-HTTP server: answers whatever arrives with an HTTP/1.1 response.
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        });
        let url = format!("https://127.0.0.1:{port}");
        let e = reqwest::get(format!("{url}/v1/rooms")).await.unwrap_err();
        let text = NoAnswer::new(&url, &e).to_string();
        assert!(
            text.contains(&format!("use http://127.0.0.1:{port}")),
            "{text}"
        );
    }
}
