//! Tickets (HMAC-signed, bound to room and visitor, key id for rotation) and admission tokens
//! (EdDSA JWTs, public keys published as a JWKS).
//!
//! Ticket: `t1.{kid}.{payload}.{mac}`, base64url without padding. Payload: room length (1 byte),
//! room, visitor id (16 bytes), issued-at (8 bytes, unix s), admitted sequence number (8 bytes;
//! 0 until admitted), log index of the visitor's latest write (8 bytes, for read-your-writes on
//! any node). MAC: HMAC-SHA256 over `"sluice ticket v1\0" ‖ kid ‖ "\0" ‖ payload`, verified in
//! constant time.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ed25519_dalek::Signer;
use hmac::{Hmac, Mac};
use jsonwebtoken::Algorithm;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use sluice_statemachine::limits::NAME_LEN_MAX;
use sluice_statemachine::types::validate_name;
use sluice_statemachine::VisitorId;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Longest ticket accepted.
pub const TICKET_LEN_MAX: usize = 512;
/// The MAC domain of tickets.
const TICKET_DOMAIN: &[u8] = b"sluice ticket v1\0";
/// Longest key id.
pub const KEY_ID_LEN_MAX: usize = 32;

/// Why a ticket was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    /// Longer than [`TICKET_LEN_MAX`].
    #[error("the ticket is too long")]
    TooLong,
    /// Not a ticket.
    #[error("the ticket is malformed")]
    Malformed,
    /// Signed with a key this node does not know (rotated out, or forged).
    #[error("the ticket's key is unknown")]
    UnknownKey,
    /// The signature does not match (tampered or forged).
    #[error("the ticket's signature is invalid")]
    BadSignature,
}

/// What a ticket says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// The room it is valid for.
    pub room: String,
    /// The visitor.
    pub visitor: VisitorId,
    /// When it was issued, unix seconds.
    pub issued_at: u64,
    /// The sequence number of the admission it carries, 0 if none.
    pub admitted_seq: u64,
    /// Log index of the visitor's latest write; reads wait until the node has applied it.
    pub min_index: u64,
}

type HmacSha256 = Hmac<Sha256>;

/// The HMAC keys: the first signs new tickets; all verify.
#[derive(Clone)]
pub struct TicketKeys {
    current: String,
    /// Each key's HMAC, keyed once (its padded key hashed): a token's MAC starts from a copy.
    keys: BTreeMap<String, HmacSha256>,
}

impl std::fmt::Debug for TicketKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TicketKeys(current={}, {} keys)",
            self.current,
            self.keys.len()
        )
    }
}

impl TicketKeys {
    /// Keys in order of preference; the first signs. Each secret must be at least 32 bytes.
    pub fn new(keys: Vec<(String, Vec<u8>)>) -> Result<Self, String> {
        let current = keys
            .first()
            .ok_or("at least one ticket key is needed")?
            .0
            .clone();
        let mut map = BTreeMap::new();
        for (id, secret) in keys {
            if id.is_empty()
                || id.len() > KEY_ID_LEN_MAX
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(format!(
                    "ticket key id {id:?} must be 1–{KEY_ID_LEN_MAX} of [A-Za-z0-9_-]"
                ));
            }
            if secret.len() < 32 {
                return Err(format!("ticket key {id} must have at least 32 bytes"));
            }
            let keyed = HmacSha256::new_from_slice(&secret).expect("HMAC takes any key length");
            map.insert(id, keyed);
        }
        Ok(Self { current, keys: map })
    }

    fn mac(domain: &[u8], key: &HmacSha256, kid: &str, payload: &[u8]) -> HmacSha256 {
        let mut m = key.clone();
        m.update(domain);
        m.update(kid.as_bytes());
        m.update(b"\0");
        m.update(payload);
        m
    }

    /// `{prefix}.{kid}.{payload}.{mac}`: `payload` signed with the current key, the MAC over
    /// `domain ‖ kid ‖ "\0" ‖ payload` (each kind of token has its own domain, so that one is
    /// never taken for another).
    pub(crate) fn seal(&self, prefix: &str, domain: &[u8], payload: &[u8]) -> String {
        let key = &self.keys[&self.current];
        let mac = Self::mac(domain, key, &self.current, payload)
            .finalize()
            .into_bytes();
        format!(
            "{prefix}.{}.{}.{}",
            self.current,
            B64.encode(payload),
            B64.encode(mac)
        )
    }

    /// The payload of a token [`seal`](Self::seal)ed with any of the keys, its MAC checked in
    /// constant time.
    pub(crate) fn open(
        &self,
        prefix: &str,
        domain: &[u8],
        s: &str,
        len_max: usize,
    ) -> Result<Vec<u8>, TicketError> {
        if s.len() > len_max {
            return Err(TicketError::TooLong);
        }
        let mut parts = s.split('.');
        let (Some(p0), Some(kid), Some(p), Some(m), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(TicketError::Malformed);
        };
        if p0 != prefix {
            return Err(TicketError::Malformed);
        }
        let key = self.keys.get(kid).ok_or(TicketError::UnknownKey)?;
        let payload = B64.decode(p).map_err(|_| TicketError::Malformed)?;
        let mac = B64.decode(m).map_err(|_| TicketError::Malformed)?;
        Self::mac(domain, key, kid, &payload)
            .verify_slice(&mac)
            .map_err(|_| TicketError::BadSignature)?;
        Ok(payload)
    }

    /// Signs a ticket.
    pub fn issue(&self, t: &Ticket) -> String {
        let mut payload = Vec::with_capacity(1 + t.room.len() + 40);
        payload.push(t.room.len() as u8);
        payload.extend_from_slice(t.room.as_bytes());
        payload.extend_from_slice(&t.visitor.0);
        payload.extend_from_slice(&t.issued_at.to_be_bytes());
        payload.extend_from_slice(&t.admitted_seq.to_be_bytes());
        payload.extend_from_slice(&t.min_index.to_be_bytes());
        self.seal("t1", TICKET_DOMAIN, &payload)
    }

    /// Whether `ticket` names the key that signs new tickets (checks nothing else).
    pub fn signs(&self, ticket: &str) -> bool {
        ticket
            .strip_prefix("t1.")
            .and_then(|r| r.split_once('.'))
            .is_some_and(|(kid, _)| kid == self.current)
    }

    /// Checks a ticket's signature and decodes it.
    pub fn verify(&self, s: &str) -> Result<Ticket, TicketError> {
        let payload = self.open("t1", TICKET_DOMAIN, s, TICKET_LEN_MAX)?;
        let (&len, rest) = payload.split_first().ok_or(TicketError::Malformed)?;
        let len = len as usize;
        if len > NAME_LEN_MAX || rest.len() != len + 16 + 24 {
            return Err(TicketError::Malformed);
        }
        let room = std::str::from_utf8(&rest[..len])
            .map_err(|_| TicketError::Malformed)?
            .to_string();
        validate_name("room", &room).map_err(|_| TicketError::Malformed)?;
        let rest = &rest[len..];
        let u64_at = |i: usize| u64::from_be_bytes(rest[i..i + 8].try_into().expect("8 bytes"));
        Ok(Ticket {
            room,
            visitor: VisitorId(rest[..16].try_into().expect("16 bytes")),
            issued_at: u64_at(16),
            admitted_seq: u64_at(24),
            min_index: u64_at(32),
        })
    }
}

/// Claims of an admission token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionClaims {
    /// Issuer.
    pub iss: String,
    /// The visitor id (hex).
    pub sub: String,
    /// Audience: `sluice:{room}`.
    pub aud: String,
    /// The room.
    pub room: String,
    /// The admission's sequence number.
    pub seq: u64,
    /// Issued at, unix seconds.
    pub iat: u64,
    /// When the token expires, unix seconds: the session's end as of issue, or
    /// `admission_token_ttl_secs` after `iat` if that comes first. A visitor's status read
    /// returns a token with at least half that lifetime left (see [`JwtKeys::current`]).
    pub exp: u64,
    /// The token's own id (random, 32 hex digits), for an origin that keeps a list of tokens
    /// it has seen.
    pub jti: String,
    /// Only in a token handed to another site ([`JwtKeys::handoff`]): that site's origin, which
    /// must be the checker's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Only in a token handed to another site: when the session ends as of issue, unix
    /// seconds (the site's own session should end no later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_exp: Option<u64>,
}

/// Longest a token handed to another site lives: it only has to survive one redirect.
pub const HANDOFF_TOKEN_TTL_SECS: u64 = 60;

/// The Ed25519 key that signs admission tokens, and the other keys the JWKS publishes.
#[derive(Clone)]
pub struct JwtKeys {
    kid: String,
    issuer: String,
    /// Longest a token lives (it ends with its session if that is sooner).
    ttl_secs: u64,
    /// Keys published besides the signing one (the next before a rotation, the previous after
    /// it): (kid, public key).
    published: Vec<(String, [u8; 32])>,
    /// The signing key, parsed once: signing is one scalar multiplication per token.
    signing: ed25519_dalek::SigningKey,
    /// The token header (`alg`, `kid`, `typ`), base64url-encoded once.
    header_b64: String,
    public: [u8; 32],
    /// Tokens signed lately, handed out again by [`Self::current`] (`None`: every call signs).
    recent: Option<Arc<RecentTokens>>,
}

/// Most admission tokens a node remembers for reuse (about 400 bytes each).
pub const RECENT_TOKENS_MAX: usize = 100_000;

/// An admission: room, visitor, admission number.
type Admission = (String, VisitorId, u64);

/// Admission tokens signed lately, by admission, with their expiry.
#[derive(Debug)]
struct RecentTokens {
    /// By admission: (expiry, token).
    tokens: Mutex<HashMap<Admission, (u64, String)>>,
    /// At most this many ([`RECENT_TOKENS_MAX`]).
    max: usize,
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JwtKeys(kid={})", self.kid)
    }
}

impl JwtKeys {
    /// A key from a 32-byte Ed25519 seed; tokens live at most [`ADMISSION_TOKEN_TTL_SECS`].
    pub fn from_seed(kid: &str, issuer: &str, seed: &[u8]) -> Result<Self, String> {
        let signing = ed25519_dalek::SigningKey::from_bytes(&seed32(seed)?);
        let header = serde_json::json!({"alg": "EdDSA", "kid": kid, "typ": "JWT"});
        Ok(Self {
            kid: kid.to_string(),
            issuer: issuer.to_string(),
            ttl_secs: ADMISSION_TOKEN_TTL_SECS,
            published: Vec::new(),
            header_b64: B64.encode(header.to_string()),
            public: signing.verifying_key().to_bytes(),
            signing,
            recent: None,
        })
    }

    /// With `on`, [`Self::current`] hands out a token signed before for the same admission
    /// while it has at least half the life a new one would have.
    pub fn with_reuse(mut self, on: bool) -> Self {
        self.recent = on.then(|| {
            Arc::new(RecentTokens {
                tokens: Mutex::default(),
                max: RECENT_TOKENS_MAX,
            })
        });
        self
    }

    /// When a token issued at `iat` for a session ending at `session_exp` expires.
    fn expiry(&self, iat: u64, session_exp: u64) -> u64 {
        session_exp.min(iat.saturating_add(self.ttl_secs))
    }

    /// An admission token for a status read: one signed before for this admission (room,
    /// visitor, `seq`) if reuse is on and it expires no later than a new one would and has at
    /// least half a new one's life left, else a new one (remembered for the next read).
    /// Signing is most of a status read's cost; a client that renews its token at least every
    /// half lifetime always holds a valid one. A token never outlives its session as known now.
    pub fn current(
        &self,
        room: &str,
        visitor: VisitorId,
        seq: u64,
        now: u64,
        session_exp: u64,
    ) -> String {
        let Some(recent) = &self.recent else {
            return self.issue(room, visitor, seq, now, session_exp);
        };
        let fresh_exp = self.expiry(now, session_exp);
        let key = (room.to_string(), visitor, seq);
        {
            let tokens = recent.tokens.lock().expect("token cache lock");
            if let Some((exp, token)) = tokens.get(&key) {
                let left = exp.saturating_sub(now);
                if *exp <= fresh_exp && *exp > now && 2 * left >= fresh_exp.saturating_sub(now) {
                    return token.clone();
                }
            }
        }
        let token = self.issue(room, visitor, seq, now, session_exp);
        let mut tokens = recent.tokens.lock().expect("token cache lock");
        if tokens.len() >= recent.max && !tokens.contains_key(&key) {
            tokens.retain(|_, (exp, _)| *exp > now);
            if tokens.len() >= recent.max {
                tokens.clear();
            }
        }
        tokens.insert(key, (fresh_exp, token.clone()));
        token
    }

    /// Tokens live at most `secs`.
    pub fn with_ttl(mut self, secs: u64) -> Self {
        self.ttl_secs = secs.max(1);
        self
    }

    /// Also publishes the key of `seed` as `kid` in the JWKS (and accepts its tokens), without
    /// signing with it.
    pub fn publish(mut self, kid: &str, seed: &[u8]) -> Result<Self, String> {
        if kid == self.kid || self.published.iter().any(|(k, _)| k == kid) {
            return Err(format!("JWT key id {kid:?} is listed twice"));
        }
        let key = ed25519_dalek::SigningKey::from_bytes(&seed32(seed)?);
        self.published
            .push((kid.to_string(), key.verifying_key().to_bytes()));
        Ok(self)
    }

    /// Signs an admission token for a session that ends at `session_exp`; the token expires
    /// then, or at most the configured lifetime after `iat`.
    pub fn issue(
        &self,
        room: &str,
        visitor: VisitorId,
        seq: u64,
        iat: u64,
        session_exp: u64,
    ) -> String {
        let claims = self.claims(room, visitor, seq, iat, self.expiry(iat, session_exp));
        self.sign(&claims)
    }

    /// A token for a visitor sent to the site at `origin` (one of the room's handoff origins):
    /// the claims of an admission token with `origin` and `session_exp` besides, expiring
    /// [`HANDOFF_TOKEN_TTL_SECS`] after `iat` or with the session if sooner. The site takes it
    /// once (by `jti`) and keeps its own session from then on.
    pub fn handoff(
        &self,
        room: &str,
        visitor: VisitorId,
        seq: u64,
        iat: u64,
        session_exp: u64,
        origin: &str,
    ) -> String {
        let exp = session_exp.min(iat.saturating_add(HANDOFF_TOKEN_TTL_SECS));
        let mut claims = self.claims(room, visitor, seq, iat, exp);
        claims.origin = Some(origin.to_string());
        claims.session_exp = Some(session_exp);
        self.sign(&claims)
    }

    fn claims(
        &self,
        room: &str,
        visitor: VisitorId,
        seq: u64,
        iat: u64,
        exp: u64,
    ) -> AdmissionClaims {
        let mut jti = [0u8; 16];
        crate::text::random_fill(&mut jti).expect("OS randomness");
        AdmissionClaims {
            iss: self.issuer.clone(),
            sub: visitor.to_string(),
            aud: format!("sluice:{room}"),
            room: room.to_string(),
            seq,
            iat,
            exp,
            jti: crate::text::hex(&jti),
            origin: None,
            session_exp: None,
        }
    }

    fn sign(&self, claims: &AdmissionClaims) -> String {
        let claims = serde_json::to_vec(claims).expect("claims serialize");
        let mut token = String::with_capacity(self.header_b64.len() + 2 * claims.len() + 90);
        token.push_str(&self.header_b64);
        token.push('.');
        B64.encode_string(&claims, &mut token);
        let signature = self.signing.sign(token.as_bytes());
        token.push('.');
        B64.encode_string(signature.to_bytes(), &mut token);
        token
    }

    /// Verifies a token (signature by any published key, expiry, audience) and returns its
    /// claims.
    pub fn verify(&self, token: &str, room: &str, now: u64) -> Result<AdmissionClaims, String> {
        if token.len() > 2 * TICKET_LEN_MAX {
            return Err("token too long".into());
        }
        let kid = jsonwebtoken::decode_header(token)
            .map_err(|e| e.to_string())?
            .kid
            .unwrap_or_default();
        let public = if kid == self.kid {
            &self.public
        } else {
            &self
                .published
                .iter()
                .find(|(k, _)| *k == kid)
                .ok_or("unknown key id")?
                .1
        };
        let key = jsonwebtoken::DecodingKey::from_ed_der(public);
        let mut v = jsonwebtoken::Validation::new(Algorithm::EdDSA);
        v.set_audience(&[format!("sluice:{room}")]);
        v.set_issuer(std::slice::from_ref(&self.issuer));
        v.leeway = 0;
        v.validate_exp = false; // checked below against the caller's clock
        let data =
            jsonwebtoken::decode::<AdmissionClaims>(token, &key, &v).map_err(|e| e.to_string())?;
        if data.claims.exp <= now {
            return Err("token expired".into());
        }
        Ok(data.claims)
    }

    /// The JSON Web Key Set: the signing key first, then the other published ones.
    pub fn jwks(&self) -> serde_json::Value {
        let key = |kid: &str, public: &[u8; 32]| {
            serde_json::json!({
                "kty": "OKP",
                "crv": "Ed25519",
                "x": B64.encode(public),
                "kid": kid,
                "alg": "EdDSA",
                "use": "sig",
            })
        };
        let keys: Vec<serde_json::Value> = std::iter::once(key(&self.kid, &self.public))
            .chain(self.published.iter().map(|(k, p)| key(k, p)))
            .collect();
        serde_json::json!({ "keys": keys })
    }
}

/// How long an admission token lives unless configured otherwise (it ends with its session if
/// that is sooner): a token copied elsewhere, or kept after its session was revoked, is good
/// for at most this long.
pub const ADMISSION_TOKEN_TTL_SECS: u64 = 60;

fn seed32(seed: &[u8]) -> Result<[u8; 32], String> {
    seed.try_into()
        .map_err(|_| "a token signing seed must be 32 bytes".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rotation: the next key is published ahead, then signs while the old one is still
    /// published, so that tokens of either verify throughout.
    #[test]
    fn the_jwks_publishes_the_next_key_ahead_of_a_rotation() {
        let before = JwtKeys::from_seed("j1", "sluice", &[1; 32])
            .unwrap()
            .publish("j2", &[2; 32])
            .unwrap();
        let kids: Vec<String> = before.jwks()["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(kids, ["j1", "j2"], "the signing key first");
        let old = before.issue("r", VisitorId::from_u128(1), 1, 100, 130);
        let after = JwtKeys::from_seed("j2", "sluice", &[2; 32])
            .unwrap()
            .publish("j1", &[1; 32])
            .unwrap();
        let new = after.issue("r", VisitorId::from_u128(1), 1, 100, 130);
        for keys in [&before, &after] {
            assert!(keys.verify(&old, "r", 110).is_ok());
            assert!(keys.verify(&new, "r", 110).is_ok());
        }
        let alone = JwtKeys::from_seed("j2", "sluice", &[2; 32]).unwrap();
        assert!(alone.verify(&old, "r", 110).is_err(), "a retired key");
        assert!(
            before.clone().publish("j1", &[3; 32]).is_err(),
            "one id, one key"
        );
    }

    fn keys() -> TicketKeys {
        TicketKeys::new(vec![("k2".into(), vec![7; 32]), ("k1".into(), vec![9; 32])]).unwrap()
    }

    fn ticket() -> Ticket {
        Ticket {
            room: "sale".into(),
            visitor: VisitorId::from_u128(42),
            issued_at: 1_700_000_000,
            admitted_seq: 3,
            min_index: 99,
        }
    }

    #[test]
    fn tickets_round_trip_and_refuse_tampering() {
        let k = keys();
        let s = k.issue(&ticket());
        assert!(s.starts_with("t1.k2."));
        assert_eq!(k.verify(&s), Ok(ticket()));
        // Flip one character of the payload: the MAC no longer matches.
        let parts: Vec<&str> = s.split('.').collect();
        let mut p = parts[2].to_string().into_bytes();
        p[3] = if p[3] == b'A' { b'B' } else { b'A' };
        let tampered = format!("t1.k2.{}.{}", String::from_utf8(p).unwrap(), parts[3]);
        assert_eq!(k.verify(&tampered), Err(TicketError::BadSignature));
        // A ticket signed by someone else's key.
        let forger = TicketKeys::new(vec![("k2".into(), vec![1; 32])]).unwrap();
        assert_eq!(
            k.verify(&forger.issue(&ticket())),
            Err(TicketError::BadSignature)
        );
        assert_eq!(k.verify("t1.zz.AAAA.AAAA"), Err(TicketError::UnknownKey));
        assert_eq!(k.verify("nonsense"), Err(TicketError::Malformed));
        assert_eq!(
            k.verify(&"x".repeat(TICKET_LEN_MAX + 1)),
            Err(TicketError::TooLong)
        );
    }

    /// The MAC is plain HMAC-SHA256 over `domain ‖ kid ‖ NUL ‖ payload` under the key's secret
    /// (computed apart, with Python's `hmac`): tickets a node signed before keep verifying,
    /// however the keys are held.
    #[test]
    fn a_ticket_is_signed_as_it_always_was() {
        let golden = "t1.k2.BHNhbGUAAAAAAAAAAAAAAAAAAAAqAAAAAGVT8QAAAAAAAAAAAwAAAAAAAABj.qbSEuK_3lMYtjT0ycJMQKZOMWhi0IdLvbWrVy3TNg7Y";
        assert_eq!(keys().issue(&ticket()), golden);
        assert_eq!(keys().verify(golden), Ok(ticket()));
    }

    #[test]
    fn rotation_keeps_old_tickets_valid() {
        let old = TicketKeys::new(vec![("k1".into(), vec![9; 32])]).unwrap();
        let s = old.issue(&ticket());
        assert_eq!(keys().verify(&s), Ok(ticket()));
        let retired = TicketKeys::new(vec![("k2".into(), vec![7; 32])]).unwrap();
        assert_eq!(retired.verify(&s), Err(TicketError::UnknownKey));
    }

    #[test]
    fn weak_or_bad_keys_are_refused() {
        assert!(TicketKeys::new(vec![]).is_err());
        assert!(TicketKeys::new(vec![("k".into(), vec![1; 31])]).is_err());
        assert!(TicketKeys::new(vec![("bad id".into(), vec![1; 32])]).is_err());
    }

    #[test]
    fn a_status_read_reuses_a_token_while_half_its_life_is_left_and_never_past_its_session() {
        let v = VisitorId::from_u128(1);
        let j = JwtKeys::from_seed("j1", "sluice", &[5; 32])
            .unwrap()
            .with_ttl(60)
            .with_reuse(true);
        let jti = |t: &str, now| j.verify(t, "sale", now).unwrap().jti;
        let first = j.current("sale", v, 7, 1_000, 90_000);
        assert_eq!(
            j.current("sale", v, 7, 1_030, 90_000),
            first,
            "30 s of 60 left"
        );
        let renewed = j.current("sale", v, 7, 1_031, 90_000);
        assert_ne!(
            jti(&renewed, 1_031),
            jti(&first, 1_031),
            "29 s left: signed anew"
        );
        assert_eq!(j.verify(&renewed, "sale", 1_031).unwrap().exp, 1_091);
        // Another admission of the same visitor, or another room, has its own token.
        assert_ne!(j.current("sale", v, 8, 1_031, 90_000), renewed);
        assert_ne!(j.current("drop", v, 7, 1_031, 90_000), renewed);
        // The session now ends sooner than the remembered token (revoked and renewed, say):
        // a token that would outlive it is not handed out again.
        let shorter = j.current("sale", v, 7, 1_032, 1_050);
        assert_eq!(j.verify(&shorter, "sale", 1_032).unwrap().exp, 1_050);
        // Near the session's end, a token that ends with it is as good as a new one.
        assert_eq!(j.current("sale", v, 7, 1_045, 1_050), shorter);
        // Without reuse, every read signs a token with its own id.
        let each = JwtKeys::from_seed("j1", "sluice", &[5; 32])
            .unwrap()
            .with_ttl(60);
        let (a, b) = (
            each.current("sale", v, 7, 1_000, 90_000),
            each.current("sale", v, 7, 1_000, 90_000),
        );
        assert_ne!(
            each.verify(&a, "sale", 1_000).unwrap().jti,
            each.verify(&b, "sale", 1_000).unwrap().jti
        );
    }

    #[test]
    fn the_tokens_kept_for_reuse_are_bounded() {
        let mut j = JwtKeys::from_seed("j1", "sluice", &[5; 32]).unwrap();
        j.recent = Some(Arc::new(RecentTokens {
            tokens: Mutex::default(),
            max: 4,
        }));
        let kept = || j.recent.as_ref().unwrap().tokens.lock().unwrap().len();
        for i in 0..4 {
            j.current("sale", VisitorId::from_u128(i), 1, 1_000, 1_010);
        }
        assert_eq!(kept(), 4);
        // Full: the expired ones go first ...
        j.current("sale", VisitorId::from_u128(9), 1, 1_010, 90_000);
        assert_eq!(kept(), 1);
        for i in 10..13 {
            j.current("sale", VisitorId::from_u128(i), 1, 1_010, 90_000);
        }
        assert_eq!(kept(), 4);
        // ... and, full of live ones, the memory starts over.
        j.current("sale", VisitorId::from_u128(20), 1, 1_010, 90_000);
        assert_eq!(kept(), 1);
    }

    #[test]
    fn admission_tokens_verify_and_expire() {
        let j = JwtKeys::from_seed("j1", "sluice", &[5; 32])
            .unwrap()
            .with_ttl(1_000);
        let t = j.issue("sale", VisitorId::from_u128(1), 7, 1_000, 2_000);
        let c = j.verify(&t, "sale", 1_500).unwrap();
        assert_eq!((c.seq, c.room.as_str(), c.exp), (7, "sale", 2_000));
        assert_eq!(c.jti.len(), 32);
        assert!(j.verify(&t, "other", 1_500).is_err(), "bound to its room");
        assert!(j.verify(&t, "sale", 2_000).is_err(), "expired at exp");
        // A token lives at most its lifetime, even in a long session; each has its own id.
        let short = JwtKeys::from_seed("j1", "sluice", &[5; 32]).unwrap();
        let t1 = short.issue("sale", VisitorId::from_u128(1), 7, 1_000, 90_000);
        let c1 = short.verify(&t1, "sale", 1_001).unwrap();
        assert_eq!(c1.exp, 1_000 + ADMISSION_TOKEN_TTL_SECS);
        let t2 = short.issue("sale", VisitorId::from_u128(1), 7, 1_000, 90_000);
        assert_ne!(c1.jti, short.verify(&t2, "sale", 1_001).unwrap().jti);
        let other = JwtKeys::from_seed("j1", "sluice", &[6; 32]).unwrap();
        assert!(
            other.verify(&t, "sale", 1_500).is_err(),
            "another key's signature"
        );
        assert_eq!(j.jwks()["keys"][0]["kty"], "OKP");
        assert_eq!(j.jwks()["keys"].as_array().unwrap().len(), 1);
        let header = jsonwebtoken::decode_header(&t).unwrap();
        assert_eq!(
            (header.alg, header.kid.as_deref()),
            (Algorithm::EdDSA, Some("j1"))
        );
    }

    /// A token handed to another site names it and the session's end, lives a minute at most
    /// (less if the session ends first), and each one has its own id; a status read's token
    /// names no site.
    #[test]
    fn a_handoff_token_names_its_site_and_lives_a_minute_at_most() {
        let j = JwtKeys::from_seed("j1", "sluice", &[5; 32])
            .unwrap()
            .with_ttl(1_000);
        let v = VisitorId::from_u128(1);
        let t = j.handoff("sale", v, 7, 1_000, 1_900, "https://shop.example");
        let c = j.verify(&t, "sale", 1_001).unwrap();
        assert_eq!(c.origin.as_deref(), Some("https://shop.example"));
        assert_eq!(
            (c.session_exp, c.exp),
            (Some(1_900), 1_000 + HANDOFF_TOKEN_TTL_SECS)
        );
        assert!(j.verify(&t, "sale", 1_060).is_err(), "a minute later");
        let ending = j.handoff("sale", v, 7, 1_000, 1_020, "https://shop.example");
        assert_eq!(j.verify(&ending, "sale", 1_001).unwrap().exp, 1_020);
        let again = j.handoff("sale", v, 7, 1_000, 1_900, "https://shop.example");
        assert_ne!(j.verify(&again, "sale", 1_001).unwrap().jti, c.jti);
        let plain = j.issue("sale", v, 7, 1_000, 1_900);
        let payload = plain.split('.').nth(1).unwrap();
        let json = String::from_utf8(B64.decode(payload).unwrap()).unwrap();
        assert!(
            !json.contains("origin") && !json.contains("session_exp"),
            "{json}"
        );
    }
}
