//! Identity assertions: the shop's word for who a visitor is, so that one person holds one
//! place. The shop signs a short JWT whose `sub` is its customer (HS256 with a shared secret, or
//! RS256/ES256/EdDSA with keys from a JWKS file); the visitor brings it to the join. The node
//! checks it and hashes the subject with the room's salt ([`IdentityKeys::key`]): the replicated
//! state holds only that hash, and maps it to the one visitor who holds the place.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use sluice_statemachine::IdentityKey;
use std::path::PathBuf;

/// How identity assertions (JWTs from the shop, `sub` = its customer) are verified; the same
/// on every node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    /// The HS256 secret the shop signs assertions with, base64, at least 32 bytes.
    #[serde(default)]
    pub hmac_secret: Option<String>,
    /// A JWKS file with the shop's public keys (RS256, ES256, EdDSA).
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// The `iss` assertions must carry, if set.
    #[serde(default)]
    pub issuer: Option<String>,
    /// The `aud` assertions must carry, if set. One of `issuer` and `audience` must be set:
    /// without either, any token the shop signs with the same key, for any purpose, would do.
    #[serde(default)]
    pub audience: Option<String>,
    /// The longest an assertion may be valid, seconds: its `exp` at most this far ahead, and its
    /// `iat`, when it has one, at most this long ago (default 3,600; at most 86,400).
    #[serde(default)]
    pub max_age_secs: Option<u64>,
}

/// The default of [`IdentityConfig::max_age_secs`].
pub const MAX_AGE_SECS_DEFAULT: u64 = 3_600;
/// The largest [`IdentityConfig::max_age_secs`].
pub const MAX_AGE_SECS_MAX: u64 = 86_400;
/// Clock skew allowed between the shop and the node, seconds.
const LEEWAY_SECS: u64 = 30;

impl IdentityConfig {
    /// The verifier: the secret decoded, the JWKS file read.
    pub fn keys(&self) -> Result<IdentityKeys, String> {
        let secret = match &self.hmac_secret {
            Some(s) => {
                let bytes = B64
                    .decode(s)
                    .map_err(|_| "identity.hmac_secret is not base64".to_string())?;
                if bytes.len() < 32 {
                    return Err("identity.hmac_secret must be at least 32 bytes".into());
                }
                Some(bytes)
            }
            None => None,
        };
        let jwks = match &self.jwks_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("identity.jwks_file {}: {e}", path.display()))?,
            ),
            None => None,
        };
        IdentityKeys::new(self, secret, jwks.as_deref())
    }
}

/// Longest assertion accepted, bytes.
pub const ASSERTION_BYTES_MAX: usize = 8_192;
/// Longest subject accepted, bytes.
pub const SUBJECT_BYTES_MAX: usize = 256;

/// Why an assertion is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    /// Longer than [`ASSERTION_BYTES_MAX`], or its subject longer than [`SUBJECT_BYTES_MAX`].
    #[error("the identity assertion is too long")]
    TooLong,
    /// Not a JWT these keys verify, expired, for another issuer or audience, or without `sub`.
    #[error("the identity assertion is not valid: {0}")]
    Invalid(String),
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    #[serde(default)]
    iat: Option<u64>,
    /// The priority lane the shop places this customer in (a member, a presale buyer).
    #[serde(default)]
    lane: Option<String>,
}

/// What a valid assertion says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    /// Who the visitor is.
    pub subject: String,
    /// The lane its `lane` claim names, if it is a lane name at all.
    pub lane: Option<String>,
}

/// The keys assertions are verified with.
pub struct IdentityKeys {
    hmac: Option<DecodingKey>,
    jwks: jsonwebtoken::jwk::JwkSet,
    issuer: Option<String>,
    audience: Option<String>,
    max_age_secs: u64,
}

impl std::fmt::Debug for IdentityKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "IdentityKeys(hmac: {}, {} public keys)",
            self.hmac.is_some(),
            self.jwks.keys.len()
        )
    }
}

impl IdentityKeys {
    /// The keys of the `[identity]` configuration (`hmac_secret` already decoded, the JWKS file
    /// already read).
    pub fn new(
        cfg: &IdentityConfig,
        hmac_secret: Option<Vec<u8>>,
        jwks: Option<&str>,
    ) -> Result<Self, String> {
        let jwks: jsonwebtoken::jwk::JwkSet = match jwks {
            Some(text) => serde_json::from_str(text)
                .map_err(|e| format!("identity.jwks_file is not a JWKS: {e}"))?,
            None => jsonwebtoken::jwk::JwkSet { keys: Vec::new() },
        };
        for k in &jwks.keys {
            DecodingKey::from_jwk(k).map_err(|e| format!("identity.jwks_file: a key: {e}"))?;
        }
        if hmac_secret.is_none() && jwks.keys.is_empty() {
            return Err("[identity] needs hmac_secret or jwks_file".into());
        }
        if cfg.issuer.is_none() && cfg.audience.is_none() {
            return Err(
                "[identity] needs issuer or audience (or both): without them any token \
                 the shop signs with this key, for any purpose, would be taken as an assertion"
                    .into(),
            );
        }
        let max_age_secs = cfg.max_age_secs.unwrap_or(MAX_AGE_SECS_DEFAULT);
        if !(1..=MAX_AGE_SECS_MAX).contains(&max_age_secs) {
            return Err(format!(
                "identity.max_age_secs must be between 1 and {MAX_AGE_SECS_MAX}"
            ));
        }
        Ok(IdentityKeys {
            hmac: hmac_secret.map(|s| DecodingKey::from_secret(&s)),
            jwks,
            issuer: cfg.issuer.clone(),
            audience: cfg.audience.clone(),
            max_age_secs,
        })
    }

    /// The subject of a valid assertion.
    pub fn verify(&self, token: &str) -> Result<String, IdentityError> {
        self.verify_assertion(token).map(|a| a.subject)
    }

    /// What a valid assertion says: its subject, and the lane it names.
    pub fn verify_assertion(&self, token: &str) -> Result<Assertion, IdentityError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.verify_at(token, now)
    }

    /// The key that verifies a token with `header`. Shared secrets sign HS256 only; public keys
    /// never verify an HS* token (the key confusion of a public key taken as an HMAC secret).
    fn key_for(&self, header: &jsonwebtoken::Header) -> Result<DecodingKey, IdentityError> {
        let invalid = |e: &dyn std::fmt::Display| IdentityError::Invalid(e.to_string());
        Ok(match header.alg {
            Algorithm::HS256 => self
                .hmac
                .clone()
                .ok_or_else(|| invalid(&"HS256 is not configured"))?,
            Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA => {
                let jwk = match &header.kid {
                    Some(kid) => self.jwks.find(kid),
                    None if self.jwks.keys.len() == 1 => self.jwks.keys.first(),
                    None => None,
                }
                .ok_or_else(|| invalid(&"no configured key for this kid"))?;
                DecodingKey::from_jwk(jwk).map_err(|e| invalid(&e))?
            }
            other => return Err(invalid(&format!("algorithm {other:?} is not accepted"))),
        })
    }

    /// [`verify_assertion`](Self::verify_assertion) at `now` (seconds since the epoch).
    pub fn verify_at(&self, token: &str, now: u64) -> Result<Assertion, IdentityError> {
        if token.len() > ASSERTION_BYTES_MAX {
            return Err(IdentityError::TooLong);
        }
        let invalid = |e: &dyn std::fmt::Display| IdentityError::Invalid(e.to_string());
        let header = jsonwebtoken::decode_header(token).map_err(|e| invalid(&e))?;
        let key = self.key_for(&header)?;
        let mut v = Validation::new(header.alg);
        v.set_required_spec_claims(&["exp", "sub"]);
        v.leeway = LEEWAY_SECS;
        v.validate_nbf = true;
        match &self.issuer {
            Some(iss) => v.set_issuer(&[iss]),
            None => v.iss = None,
        }
        match &self.audience {
            Some(aud) => v.set_audience(&[aud]),
            None => v.validate_aud = false,
        }
        let data = jsonwebtoken::decode::<Claims>(token, &key, &v).map_err(|e| invalid(&e))?;
        // jsonwebtoken checked `exp` and `nbf` against its own clock; the age, against `now`.
        let longest = self.max_age_secs + LEEWAY_SECS;
        if data.claims.exp > now.saturating_add(longest) {
            return Err(invalid(&format!(
                "valid for longer than {} s (identity.max_age_secs)",
                self.max_age_secs
            )));
        }
        if data
            .claims
            .iat
            .is_some_and(|iat| iat.saturating_add(longest) < now)
        {
            return Err(invalid(&format!(
                "issued more than {} s ago (identity.max_age_secs)",
                self.max_age_secs
            )));
        }
        if data
            .claims
            .iat
            .is_some_and(|iat| iat > now.saturating_add(LEEWAY_SECS))
        {
            return Err(invalid(&"issued in the future"));
        }
        let sub = data.claims.sub;
        let lane = data
            .claims
            .lane
            .filter(|l| sluice_statemachine::types::validate_name("lane", l).is_ok())
            .filter(|l| l.len() <= sluice_statemachine::lanes::LANE_NAME_MAX);
        if sub.is_empty() {
            return Err(invalid(&"empty sub"));
        }
        if sub.len() > SUBJECT_BYTES_MAX {
            return Err(IdentityError::TooLong);
        }
        Ok(Assertion { subject: sub, lane })
    }

    /// The key `subject` is held under in `room`: hashed with the room's salt, so that the state
    /// holds no subject and one room's keys say nothing of another's.
    pub fn key(&self, room: &str, salt: &[u8; 16], subject: &str) -> IdentityKey {
        let mut h = blake3::Hasher::new_derive_key("sluice 2026-12 identity v1");
        h.update(salt);
        h.update(&[room.len() as u8]);
        h.update(room.as_bytes());
        h.update(subject.as_bytes());
        let mut key = [0u8; 16];
        key.copy_from_slice(&h.finalize().as_bytes()[..16]);
        IdentityKey(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{encode, EncodingKey, Header};

    fn keys(issuer: Option<&str>) -> IdentityKeys {
        let cfg = IdentityConfig {
            issuer: issuer.map(str::to_string),
            audience: issuer.is_none().then(|| "sluice".to_string()),
            ..IdentityConfig::default()
        };
        IdentityKeys::new(&cfg, Some(vec![3; 32]), None).unwrap()
    }

    fn token(secret: &[u8], claims: serde_json::Value) -> String {
        encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret),
        )
        .unwrap()
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    /// Without `issuer` or `audience`, any token the shop signs would do: refused at start, as
    /// is a maximum age out of range.
    #[test]
    fn a_configuration_must_bind_assertions_to_their_purpose() {
        let none = IdentityConfig::default();
        let e = IdentityKeys::new(&none, Some(vec![3; 32]), None).unwrap_err();
        assert!(e.contains("issuer or audience"), "{e}");
        let aud = IdentityConfig {
            audience: Some("sluice".into()),
            ..IdentityConfig::default()
        };
        assert!(IdentityKeys::new(&aud, Some(vec![3; 32]), None).is_ok());
        for age in [0, MAX_AGE_SECS_MAX + 1] {
            let cfg = IdentityConfig {
                max_age_secs: Some(age),
                ..aud.clone()
            };
            let e = IdentityKeys::new(&cfg, Some(vec![3; 32]), None).unwrap_err();
            assert!(e.contains("max_age_secs"), "{e}");
        }
    }

    /// `nbf` in the future, `exp` further ahead than the maximum age, `iat` older than it or in
    /// the future: refused; the same token within the bounds passes.
    #[test]
    fn an_assertion_is_short_lived_and_already_valid() {
        let k = keys(Some("shop"));
        let now = now();
        let claims = |extra: serde_json::Value| {
            let mut c = serde_json::json!({"sub": "c-1", "iss": "shop", "exp": now + 600});
            for (key, v) in extra.as_object().unwrap() {
                c[key] = v.clone();
            }
            token(&[3; 32], c)
        };
        assert!(k
            .verify(&claims(
                serde_json::json!({"iat": now - 60, "nbf": now - 60})
            ))
            .is_ok());
        for bad in [
            serde_json::json!({"nbf": now + 600}),
            serde_json::json!({"exp": now + MAX_AGE_SECS_DEFAULT + 120}),
            serde_json::json!({"exp": 4_000_000_000u64}),
            serde_json::json!({"iat": now - MAX_AGE_SECS_DEFAULT - 120}),
            serde_json::json!({"iat": now + 600}),
        ] {
            assert!(k.verify(&claims(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_valid_assertion_names_a_subject() {
        let k = keys(Some("shop"));
        let exp = now() + 600;
        let good = token(
            &[3; 32],
            serde_json::json!({"sub": "c-1", "iss": "shop", "exp": exp}),
        );
        assert_eq!(k.verify(&good).unwrap(), "c-1");
        for bad in [
            token(
                &[4; 32],
                serde_json::json!({"sub": "c-1", "iss": "shop", "exp": exp}),
            ),
            token(
                &[3; 32],
                serde_json::json!({"sub": "c-1", "iss": "other", "exp": exp}),
            ),
            token(
                &[3; 32],
                serde_json::json!({"sub": "c-1", "iss": "shop", "exp": 1}),
            ),
            token(&[3; 32], serde_json::json!({"iss": "shop", "exp": exp})),
            token(
                &[3; 32],
                serde_json::json!({"sub": "", "iss": "shop", "exp": exp}),
            ),
            "garbage".into(),
        ] {
            assert!(k.verify(&bad).is_err(), "{bad}");
        }
        let long = token(
            &[3; 32],
            serde_json::json!({"sub": "x".repeat(SUBJECT_BYTES_MAX + 1), "iss": "shop", "exp": exp}),
        );
        assert_eq!(k.verify(&long), Err(IdentityError::TooLong));
        assert_eq!(
            k.verify(&"a".repeat(ASSERTION_BYTES_MAX + 1)),
            Err(IdentityError::TooLong)
        );
    }

    #[test]
    fn keys_differ_by_room_salt_and_subject() {
        let k = keys(None);
        let a = k.key("r", &[1; 16], "c-1");
        assert_eq!(a, k.key("r", &[1; 16], "c-1"));
        assert_ne!(a, k.key("s", &[1; 16], "c-1"));
        assert_ne!(a, k.key("r", &[2; 16], "c-1"));
        assert_ne!(a, k.key("r", &[1; 16], "c-2"));
    }
}
