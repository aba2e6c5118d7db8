//! External challenge providers (Cloudflare Turnstile, hCaptcha, reCAPTCHA and anything that
//! speaks their `siteverify` protocol): the visitor solves the provider's widget, the join
//! brings its token, and the node asks the provider whether the token is good before the join
//! is written. What the room does when the provider cannot be reached (let the join through, or
//! refuse it) is the room's rule; what the node decided is written in the join.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// An external challenge provider: where its `siteverify` is, and this site's secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChallengeProviderConfig {
    /// The name rooms use (letters, digits, `-`, `_`).
    pub name: String,
    /// The provider's verification URL (for Turnstile
    /// `https://challenges.cloudflare.com/turnstile/v0/siteverify`).
    pub verify_url: String,
    /// This site's secret with the provider.
    pub secret: String,
    /// How long to wait for the provider, milliseconds (then the room's `fail_open` decides).
    #[serde(default = "default_provider_timeout_ms")]
    pub timeout_ms: u64,
    /// Verifications with this provider in flight at once, per node; a join past it is answered
    /// 503 `busy` (whatever the room's `fail_open`: the node's own bound says nothing of the
    /// provider).
    #[serde(default = "default_provider_concurrent_max")]
    pub concurrent_max: usize,
    /// Whether an answer of 429 or 5xx counts as the provider being unreachable (the room's
    /// `fail_open` decides). By default it is a refusal: otherwise a flood of junk tokens, until
    /// the provider throttles the site, would switch the check off in a room that fails open.
    #[serde(default)]
    pub errors_fail_open: bool,
}

fn default_provider_timeout_ms() -> u64 {
    3_000
}

fn default_provider_concurrent_max() -> usize {
    64
}

/// The most [`ChallengeProviderConfig::concurrent_max`] may be.
pub const CONCURRENT_MAX_MAX: usize = 4_096;

/// Longest token accepted, characters (Turnstile's are about 2,000).
pub const TOKEN_CHARS_MAX: usize = 4_096;

/// What a provider said of a token.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The provider accepted it.
    Passed,
    /// The provider refused it.
    Refused,
    /// The provider could not be asked (timeout, unreachable, an answer that is not its JSON):
    /// why, without the provider's URL (which may carry a key), for the node's log only.
    Unavailable(String),
    /// This node has as many verifications in flight with the provider as it allows.
    Busy,
}

/// Most providers a node's configuration may list.
pub const PROVIDERS_MAX: usize = 16;
/// Longest `timeout_ms`.
pub const TIMEOUT_MS_MAX: u64 = 30_000;

/// Checks the `[[challenge_providers]]` of a node's configuration: each named once, a URL that
/// is HTTP(S), a timeout and a bound on verifications in flight within their ranges.
pub fn check_all(list: &[ChallengeProviderConfig]) -> Result<(), String> {
    if list.len() > PROVIDERS_MAX {
        return Err(format!("at most {PROVIDERS_MAX} challenge_providers"));
    }
    let mut names = std::collections::BTreeSet::new();
    for p in list {
        let at = format!("challenge_providers {:?}", p.name);
        if !names.insert(p.name.as_str()) {
            return Err(format!("{at}: named twice"));
        }
        match reqwest::Url::parse(&p.verify_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => return Err(format!("{at}: verify_url must be an http(s) URL")),
        }
        if !(1..=TIMEOUT_MS_MAX).contains(&p.timeout_ms) {
            return Err(format!(
                "{at}: timeout_ms must be between 1 and {TIMEOUT_MS_MAX}"
            ));
        }
        if !(1..=CONCURRENT_MAX_MAX).contains(&p.concurrent_max) {
            return Err(format!(
                "{at}: concurrent_max must be between 1 and {CONCURRENT_MAX_MAX}"
            ));
        }
    }
    Ok(())
}

/// The providers this node knows, by name, with their bounds on verifications in flight.
#[derive(Debug)]
pub struct Providers {
    http: reqwest::Client,
    by_name: BTreeMap<String, (ChallengeProviderConfig, Arc<tokio::sync::Semaphore>)>,
}

impl Providers {
    /// The configured providers.
    pub fn new(list: &[ChallengeProviderConfig]) -> Self {
        Providers {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("an HTTP client with default settings"),
            by_name: list
                .iter()
                .map(|p| {
                    let bound = Arc::new(tokio::sync::Semaphore::new(p.concurrent_max));
                    (p.name.clone(), (p.clone(), bound))
                })
                .collect(),
        }
    }

    /// Whether `name` is configured here.
    pub fn knows(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Asks provider `name` about `token` from a client at `client`.
    pub async fn verify(&self, name: &str, token: &str, client: Option<IpAddr>) -> Verdict {
        let Some((p, bound)) = self.by_name.get(name) else {
            return Verdict::Unavailable(format!("provider {name} is not configured on this node"));
        };
        if token.len() > TOKEN_CHARS_MAX {
            return Verdict::Refused;
        }
        let Ok(_permit) = bound.try_acquire() else {
            return Verdict::Busy;
        };
        let mut form = vec![
            ("secret", p.secret.clone()),
            ("response", token.to_string()),
        ];
        if let Some(ip) = client {
            form.push(("remoteip", ip.to_string()));
        }
        let answer = self
            .http
            .post(&p.verify_url)
            .form(&form)
            .timeout(Duration::from_millis(p.timeout_ms))
            .send()
            .await;
        let body: serde_json::Value = match answer {
            Ok(r) if r.status().is_success() => match r.json().await {
                Ok(v) => v,
                Err(e) => return Verdict::Unavailable(e.without_url().to_string()),
            },
            Ok(r) if p.errors_fail_open => {
                return Verdict::Unavailable(format!("status {}", r.status()))
            }
            Ok(_) => return Verdict::Refused,
            Err(e) => return Verdict::Unavailable(e.without_url().to_string()),
        };
        match body.get("success").and_then(|v| v.as_bool()) {
            Some(true) => Verdict::Passed,
            Some(false) => Verdict::Refused,
            None => Verdict::Unavailable("the answer has no success field".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(name: &str) -> ChallengeProviderConfig {
        ChallengeProviderConfig {
            name: name.into(),
            verify_url: "https://challenges.example/siteverify?key=k".into(),
            secret: "s".into(),
            timeout_ms: 3_000,
            concurrent_max: 64,
            errors_fail_open: false,
        }
    }

    #[test]
    fn providers_are_checked_field_by_field() {
        assert!(check_all(&[provider("a"), provider("b")]).is_ok());
        let bad = [
            (vec![provider("a"), provider("a")], "named twice"),
            (
                vec![ChallengeProviderConfig {
                    verify_url: "file:///etc/passwd".into(),
                    ..provider("a")
                }],
                "verify_url",
            ),
            (
                vec![ChallengeProviderConfig {
                    timeout_ms: 0,
                    ..provider("a")
                }],
                "timeout_ms",
            ),
            (
                vec![ChallengeProviderConfig {
                    concurrent_max: CONCURRENT_MAX_MAX + 1,
                    ..provider("a")
                }],
                "concurrent_max",
            ),
            (
                (0..=PROVIDERS_MAX)
                    .map(|i| provider(&i.to_string()))
                    .collect(),
                "at most",
            ),
        ];
        for (list, want) in bad {
            let e = check_all(&list).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
