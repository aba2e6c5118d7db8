//! External challenge providers (Cloudflare Turnstile, hCaptcha, reCAPTCHA and anything that
//! speaks their `siteverify` protocol): the visitor solves the provider's widget, the join
//! brings its token, and the node asks the provider whether the token is good before the join
//! is written. What the room does when the provider cannot be reached (let the join through, or
//! refuse it) is the room's rule; what the node decided is written in the join.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
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
}

fn default_provider_timeout_ms() -> u64 {
    3_000
}

/// Longest token accepted, characters (Turnstile's are about 2,000).
pub const TOKEN_CHARS_MAX: usize = 4_096;

/// What a provider said of a token.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The provider accepted it.
    Passed,
    /// The provider refused it.
    Refused,
    /// The provider could not be asked (timeout, unreachable, an answer that is not its JSON).
    Unavailable(String),
}

/// The providers this node knows, by name.
#[derive(Debug)]
pub struct Providers {
    http: reqwest::Client,
    by_name: BTreeMap<String, ChallengeProviderConfig>,
}

impl Providers {
    /// The configured providers.
    pub fn new(list: &[ChallengeProviderConfig]) -> Self {
        Providers {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("an HTTP client with default settings"),
            by_name: list.iter().map(|p| (p.name.clone(), p.clone())).collect(),
        }
    }

    /// Whether `name` is configured here.
    pub fn knows(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Asks provider `name` about `token` from a client at `client`.
    pub async fn verify(&self, name: &str, token: &str, client: Option<IpAddr>) -> Verdict {
        let Some(p) = self.by_name.get(name) else {
            return Verdict::Unavailable(format!("provider {name} is not configured on this node"));
        };
        if token.len() > TOKEN_CHARS_MAX {
            return Verdict::Refused;
        }
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
                Err(e) => return Verdict::Unavailable(e.to_string()),
            },
            Ok(r) => return Verdict::Unavailable(format!("status {}", r.status())),
            Err(e) => return Verdict::Unavailable(e.to_string()),
        };
        match body.get("success").and_then(|v| v.as_bool()) {
            Some(true) => Verdict::Passed,
            Some(false) => Verdict::Refused,
            None => Verdict::Unavailable("the answer has no success field".into()),
        }
    }
}
