//! A room's entry policy: what one client may hold, and how soon an admission must be used;
//! and, growing with it, what the line shows and how the origin is watched ([`crate::origin`]).
//!
//! The policy is replicated state of the room, set by its own command
//! ([`Command::SetEntryPolicy`](crate::Command::SetEntryPolicy)) and carried in that command
//! encoded on its own ([`EncodedPolicy`]: a version byte, then postcard), so that it can grow
//! new rules without changing the encoding of [`RoomConfig`](crate::RoomConfig), of any older
//! command, or of older snapshots. The same holds for what a join brings with it
//! ([`JoinEvidence`]).
//!
//! *Proof-of-work* is checked where it is cheap and stateless, at the edge (which signs the
//! challenges and verifies the solution); what must be the same on every replica is here: that
//! the solution's challenge was hard enough for the room's rule at the join's log time, and that
//! no challenge mints two places ([`ChallengeUse`]).
//!
//! A *client* is a network, not a person: the edge reduces the client's address to its network
//! (by [`EntryPolicy::client_prefix_v4`] and [`EntryPolicy::client_prefix_v6`] bits), hashes it
//! with the room's name, and the join carries the hash ([`ClientKey`]). The state machine only
//! counts: every replica sees the same key and decides alike.

use crate::bypass::BypassRule;
use crate::codes::CodeHash;
use crate::lanes::Lane;
use crate::origin::{LineRule, OriginRule};
use crate::rejection::Rejection;
use crate::types::DecodeError;
pub use crate::types::IdentityKey;
use serde::{Deserialize, Serialize};

/// The current encoding version of [`EntryPolicy`] and [`JoinEvidence`].
pub const POLICY_VERSION: u8 = 1;
/// Longest encoded policy or evidence accepted: a policy with page templates of
/// [`crate::phases::TEMPLATES_BYTES_MAX`] and every other rule at its largest fits.
pub const ENCODED_POLICY_BYTES_MAX: usize = 49_152;
/// Longest page template a room may carry (`branding.template`), in bytes.
pub const PAGE_TEMPLATE_BYTES_MAX: usize = 16_384;
/// Most origins a room may hand admitted visitors to.
pub const HANDOFF_ORIGINS_MAX: usize = 8;
/// Largest `places_per_client_max`.
pub const PLACES_PER_CLIENT_MAX: u64 = 1_000_000;
/// Longest `first_use_ttl_secs` (a day).
pub const FIRST_USE_TTL_SECS_MAX: u64 = 86_400;
/// Largest `networks_per_session_max` (the networks remembered per session).
pub const NETWORKS_PER_SESSION_MAX: u64 = 16;
/// Longest `networks_window_secs` (a day).
pub const NETWORKS_WINDOW_SECS_MAX: u64 = 86_400;
/// Longest `grace_secs` (a day).
pub const GRACE_SECS_MAX: u64 = 86_400;
/// Most work (counters to search) a proof-of-work rule may ask.
pub const POW_WORK_MAX: u32 = 100_000_000;
/// Most PBKDF2 iterations per counter a proof-of-work rule may ask. The node that checks a
/// solution derives its key once, at up to four times the rule's cost (the challenge's prefix
/// rounds the work to a power of 16 and the cost takes up the rest): 80,000 iterations, about
/// 11 ms of one core, is the most a solution can ask of a node.
pub const POW_COST_MAX: u32 = 20_000;
/// Longest a challenge may stay valid: the state machine remembers a used challenge until it
/// expires, so this bounds how long it remembers one.
pub const CHALLENGE_TTL_MS_MAX: u64 = 600_000;
/// Most used challenges one room remembers at once; a join past it is refused with
/// `limit_reached` until older ones expire (a sustained rate of 1,667 proof-of-work joins per
/// second with challenges of the longest lifetime).
pub const CHALLENGES_REMEMBERED_MAX: usize = 1_000_000;

/// A room's proof-of-work rule: a join that mints a place must bring the solution of a
/// challenge at least this hard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowRule {
    /// Counters the solver may have to try (it tries half of them on average).
    pub work: u32,
    /// PBKDF2-SHA-256 iterations per counter.
    pub cost: u32,
    /// The work doubles for every this many waiters in line (`None`: it stays at `work`).
    pub double_every_waiting: Option<u64>,
    /// The most the work rises to.
    pub work_max: u32,
}

impl PowRule {
    /// The work asked of a join when `waiting` visitors are in line: `work`, doubled for every
    /// `double_every_waiting` of them, at most `work_max`.
    pub fn work_at(&self, waiting: u64) -> u32 {
        let doublings = match self.double_every_waiting {
            Some(n) => (waiting / n).min(32) as u32,
            None => 0,
        };
        let w = u64::from(self.work) << doublings;
        w.min(u64::from(self.work_max.max(self.work))) as u32
    }

    fn validate(&self) -> Result<(), Rejection> {
        if !(1..=POW_WORK_MAX).contains(&self.work) {
            return Err(Rejection::invalid(
                "entry.proof_of_work.work",
                format!("must be between 1 and {POW_WORK_MAX}"),
            ));
        }
        if !(self.work..=POW_WORK_MAX).contains(&self.work_max) {
            return Err(Rejection::invalid(
                "entry.proof_of_work.work_max",
                format!("must be between work and {POW_WORK_MAX}"),
            ));
        }
        if !(1..=POW_COST_MAX).contains(&self.cost) {
            return Err(Rejection::invalid(
                "entry.proof_of_work.cost",
                format!("must be between 1 and {POW_COST_MAX}"),
            ));
        }
        if self.double_every_waiting == Some(0) {
            return Err(Rejection::invalid(
                "entry.proof_of_work.double_every_waiting",
                "must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// The solved challenge a join brings, as the edge verified it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChallengeUse {
    /// The challenge's nonce: what makes it single-use.
    pub id: [u8; 16],
    /// When the challenge expires (ms since the epoch, the issuing node's clock).
    pub expires_ms: u64,
    /// The work the challenge asked.
    pub work: u32,
    /// The PBKDF2 iterations per counter it asked.
    pub cost: u32,
}

/// A room's identity rule: every new place needs an identity assertion, and one identity holds
/// one place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityRule {
    /// The room's salt, which the edge hashes subjects with (chosen when the rule is first set,
    /// kept while it stays).
    pub salt: [u8; 16],
}

/// A room's external challenge rule: every new place needs a token from a challenge provider
/// (Turnstile, hCaptcha, reCAPTCHA style), which the edge verifies with the provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalRule {
    /// The provider's name, as the nodes' configuration lists it.
    pub provider: String,
    /// When the provider cannot be reached: let the join through (`true`) or refuse it.
    pub fail_open: bool,
}

/// Longest provider name.
pub const PROVIDER_NAME_MAX: usize = 64;

/// A client network, hashed: 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClientKey(pub [u8; 16]);

/// A room's entry policy. Every rule is off until set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryPolicy {
    /// An admitted visitor who has not used the admission (no gate check, heartbeat or other
    /// activity recorded since it was admitted) within this many seconds loses it, rather than
    /// hold a place for the whole session TTL. `None`: only the session TTL applies.
    pub first_use_ttl_secs: Option<u64>,
    /// Most live places (waiting or admitted) one client network holds at once; a join past it
    /// is refused with `place_limit`. Joins that carry no client are not counted.
    pub places_per_client_max: Option<u64>,
    /// Most admitted sessions one client network holds at once: a waiter whose network holds
    /// this many is passed over, keeping its place, until one of them ends (`None`: not
    /// counted). Joins that carry no client are not counted.
    pub sessions_per_client_max: Option<u64>,
    /// Leading bits of an IPv4 address that make its client network (32: the address).
    pub client_prefix_v4: u8,
    /// Leading bits of an IPv6 address that make its client network (64: the usual
    /// allocation to one subscriber).
    pub client_prefix_v6: u8,
    /// A join that mints a place must bring a solved challenge (`None`: no proof-of-work).
    pub proof_of_work: Option<PowRule>,
    /// A join that mints a place must bring an identity, and an identity that holds a place
    /// resumes it (`None`: identities are not asked).
    pub identity: Option<IdentityRule>,
    /// Most distinct client networks one session is used from (gate checks, heartbeats); a
    /// session used from one more ends as `shared` (`None`: not counted).
    pub networks_per_session_max: Option<u64>,
    /// A network not seen on a session for this many seconds no longer counts against
    /// `networks_per_session_max` (`None`: every network seen in the session's life counts).
    pub networks_window_secs: Option<u64>,
    /// A join that mints a place must bring a token an external challenge provider accepts
    /// (`None`: none asked).
    pub external_challenge: Option<ExternalRule>,
    /// What the line shows to those in it ([`crate::origin`]).
    pub line: LineRule,
    /// How the origin is watched and the health set from it (`None`: by hand only;
    /// [`crate::origin`]).
    pub origin: Option<OriginRule>,
    /// Requests the gate lets through without an admission ([`crate::bypass`]).
    pub bypass: BypassRule,
    /// Priority lanes before the room's own line, in order ([`crate::lanes`]).
    pub lanes: Vec<Lane>,
    /// Only visitors who bring a valid access code (or an identity whose assertion names a
    /// lane) get a place; everyone else is refused with `invite_only`.
    pub invite_only: bool,
    /// A waiter who has not checked in for the room's `waiter_ttl_secs` keeps its place this
    /// many seconds longer, passed over by admissions while away, and resumes it on return
    /// (`None`: the place is lost when the waiter TTL runs out).
    pub grace_secs: Option<u64>,
    /// Where the page of a closed room sends visitors onward (the organiser's page about the
    /// event): an `http(s)` URL or an absolute path (`None`: only back to the site).
    pub after_url: Option<String>,
    /// The waiting page's text colour, `#rrggbb` (`None`: near-black). Kept here, not in the
    /// room's branding, so that the configuration's log encoding stays as it was.
    pub text_color: Option<String>,
    /// The other sites' origins (`https://shop.example.com`, exact) an admitted visitor may be
    /// sent to with a single-use admission token in the URL, for an application that checks
    /// admissions itself rather than behind a proxy (empty: only paths of this site).
    pub handoff_origins: Vec<String>,
    /// The room's own waiting page: a template the edge renders with the page's parts in it
    /// (`None`: the built-in page). Only its size is checked here; the edge parses it and
    /// refuses one that would not make a working page.
    pub page_template: Option<String>,
    /// The sale's timeline: phases that change the room's capacity, rate, mode, notice and
    /// page at their starts ([`crate::phases`]; empty: none).
    pub phases: Vec<crate::phases::Phase>,
}

impl Default for EntryPolicy {
    fn default() -> Self {
        Self {
            first_use_ttl_secs: None,
            places_per_client_max: None,
            sessions_per_client_max: None,
            client_prefix_v4: 32,
            client_prefix_v6: 64,
            proof_of_work: None,
            identity: None,
            networks_per_session_max: None,
            networks_window_secs: None,
            external_challenge: None,
            line: LineRule::default(),
            origin: None,
            bypass: BypassRule::default(),
            lanes: Vec::new(),
            invite_only: false,
            grace_secs: None,
            after_url: None,
            text_color: None,
            handoff_origins: Vec::new(),
            page_template: None,
            phases: Vec::new(),
        }
    }
}

impl EntryPolicy {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), Rejection> {
        if self
            .first_use_ttl_secs
            .is_some_and(|t| !(1..=FIRST_USE_TTL_SECS_MAX).contains(&t))
        {
            return Err(Rejection::invalid(
                "entry.first_use_ttl_secs",
                format!("must be between 1 and {FIRST_USE_TTL_SECS_MAX}"),
            ));
        }
        if self
            .places_per_client_max
            .is_some_and(|n| !(1..=PLACES_PER_CLIENT_MAX).contains(&n))
        {
            return Err(Rejection::invalid(
                "entry.places_per_client_max",
                format!("must be between 1 and {PLACES_PER_CLIENT_MAX}"),
            ));
        }
        crate::types::validate_color("branding.text_color", &self.text_color)?;
        if let Some(url) = &self.after_url {
            crate::types::validate_url("line.after_url", url)?;
        }
        if let Some(t) = &self.page_template {
            if t.is_empty() || t.len() > PAGE_TEMPLATE_BYTES_MAX {
                return Err(Rejection::invalid(
                    "branding.template",
                    format!("1 to {PAGE_TEMPLATE_BYTES_MAX} bytes"),
                ));
            }
        }
        crate::phases::validate(&self.phases, self.page_template.as_deref())?;
        if self.handoff_origins.len() > HANDOFF_ORIGINS_MAX {
            return Err(Rejection::invalid(
                "line.handoff_origins",
                format!("at most {HANDOFF_ORIGINS_MAX} origins"),
            ));
        }
        for (i, o) in self.handoff_origins.iter().enumerate() {
            crate::types::validate_origin("line.handoff_origins", o)?;
            if self.handoff_origins[..i].contains(o) {
                return Err(Rejection::invalid(
                    "line.handoff_origins",
                    format!("{o} is listed twice"),
                ));
            }
        }
        if self
            .grace_secs
            .is_some_and(|t| !(1..=GRACE_SECS_MAX).contains(&t))
        {
            return Err(Rejection::invalid(
                "entry.grace_secs",
                format!("must be between 1 and {GRACE_SECS_MAX}"),
            ));
        }
        if self
            .sessions_per_client_max
            .is_some_and(|n| !(1..=PLACES_PER_CLIENT_MAX).contains(&n))
        {
            return Err(Rejection::invalid(
                "entry.sessions_per_client_max",
                format!("must be between 1 and {PLACES_PER_CLIENT_MAX}"),
            ));
        }
        if !(8..=32).contains(&self.client_prefix_v4) {
            return Err(Rejection::invalid(
                "entry.client_prefix_v4",
                "must be between 8 and 32".into(),
            ));
        }
        if !(16..=128).contains(&self.client_prefix_v6) {
            return Err(Rejection::invalid(
                "entry.client_prefix_v6",
                "must be between 16 and 128".into(),
            ));
        }
        if let Some(pow) = &self.proof_of_work {
            pow.validate()?;
        }
        if self.external_challenge.as_ref().is_some_and(|e| {
            e.provider.is_empty()
                || e.provider.len() > PROVIDER_NAME_MAX
                || !e
                    .provider
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        }) {
            return Err(Rejection::invalid(
                "entry.external_challenge.provider",
                format!("1 to {PROVIDER_NAME_MAX} letters, digits, '-' or '_'"),
            ));
        }
        if self
            .networks_per_session_max
            .is_some_and(|n| !(1..=NETWORKS_PER_SESSION_MAX).contains(&n))
        {
            return Err(Rejection::invalid(
                "entry.networks_per_session_max",
                format!("must be between 1 and {NETWORKS_PER_SESSION_MAX}"),
            ));
        }
        if let Some(w) = self.networks_window_secs {
            if !(1..=NETWORKS_WINDOW_SECS_MAX).contains(&w) {
                return Err(Rejection::invalid(
                    "entry.networks_window_secs",
                    format!("must be between 1 and {NETWORKS_WINDOW_SECS_MAX}"),
                ));
            }
            if self.networks_per_session_max.is_none() {
                return Err(Rejection::invalid(
                    "entry.networks_window_secs",
                    "needs networks_per_session_max".into(),
                ));
            }
        }
        self.line.validate()?;
        if let Some(o) = &self.origin {
            o.validate()?;
        }
        self.bypass.validate()?;
        crate::lanes::validate(&self.lanes)
    }

    /// Whether joins must say who the client is (some rule counts clients).
    pub fn counts_clients(&self) -> bool {
        self.places_per_client_max.is_some() || self.sessions_per_client_max.is_some()
    }

    /// The versioned encoding.
    pub fn encode(&self) -> EncodedPolicy {
        EncodedPolicy(encode_versioned(self))
    }
}

/// An [`EntryPolicy`], encoded: the form commands and snapshots carry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncodedPolicy(pub Vec<u8>);

impl EncodedPolicy {
    /// The policy, checked.
    pub fn decode(&self) -> Result<EntryPolicy, DecodeError> {
        decode_versioned(&self.0)
    }
}

/// What a join brings besides the visitor: the client network it came from, and the
/// challenge it solved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinEvidence {
    /// The client network, if the edge told it.
    pub client: Option<ClientKey>,
    /// The solved challenge, if the edge verified one.
    pub challenge: Option<ChallengeUse>,
    /// The visitor's identity, if the edge verified an assertion.
    pub identity: Option<IdentityKey>,
    /// Whether the edge passed the room's external challenge (the provider accepted the
    /// token, or could not be reached and the rule fails open).
    pub external_passed: bool,
    /// The access code the visitor redeems, hashed with the room ([`crate::codes`]).
    pub code: Option<CodeHash>,
    /// The lane the visitor's verified identity assertion names, if any.
    pub lane: Option<String>,
}

impl JoinEvidence {
    /// The versioned encoding.
    pub fn encode(&self) -> EncodedEvidence {
        EncodedEvidence(encode_versioned(self))
    }
}

/// A [`JoinEvidence`], encoded: the form a join command carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncodedEvidence(pub Vec<u8>);

impl EncodedEvidence {
    /// The evidence.
    pub fn decode(&self) -> Result<JoinEvidence, DecodeError> {
        decode_versioned(&self.0)
    }
}

fn encode_versioned<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_extend(v, vec![POLICY_VERSION]).expect("encoding into a Vec cannot fail")
}

/// Fields appended to [`EntryPolicy`] and [`JoinEvidence`] since their version 1 was first
/// written, at most: an encoding that ends before them decodes with them at their defaults.
const APPENDED_FIELDS_MAX: usize = 5;

/// Decodes the postcard encoding `rest` of `T`. An encoding written before fields were appended
/// to `T` ends early; it decodes with each missing field at its default, which every appended
/// field encodes as one zero byte (`None`, an empty list, `false`, 0): that is the rule for
/// appending a field.
fn take_appended<T: serde::de::DeserializeOwned>(rest: &[u8]) -> Result<(T, usize), DecodeError> {
    let mut padded = None::<Vec<u8>>;
    loop {
        let bytes = padded.as_deref().unwrap_or(rest);
        match postcard::take_from_bytes::<T>(bytes) {
            Ok((v, tail)) => return Ok((v, tail.len())),
            Err(postcard::Error::DeserializeUnexpectedEnd)
                if padded.as_ref().map_or(0, |p| p.len() - rest.len()) < APPENDED_FIELDS_MAX =>
            {
                padded.get_or_insert_with(|| rest.to_vec()).push(0);
            }
            Err(e) => return Err(DecodeError::Malformed(e.to_string())),
        }
    }
}

fn decode_versioned<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    if bytes.len() > ENCODED_POLICY_BYTES_MAX {
        return Err(DecodeError::TooLarge(format!("{} bytes", bytes.len())));
    }
    match bytes.split_first() {
        None => Err(DecodeError::Empty),
        Some((&POLICY_VERSION, rest)) => {
            let (v, tail) = take_appended(rest)?;
            if tail != 0 {
                return Err(DecodeError::Malformed(format!("{tail} trailing bytes")));
            }
            Ok(v)
        }
        Some((&v, _)) => Err(DecodeError::Version(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_and_evidence_round_trip_and_garbage_is_refused() {
        let p = EntryPolicy {
            first_use_ttl_secs: Some(60),
            places_per_client_max: Some(4),
            sessions_per_client_max: Some(2),
            client_prefix_v4: 24,
            client_prefix_v6: 56,
            proof_of_work: Some(PowRule {
                work: 1_000,
                cost: 500,
                double_every_waiting: Some(100),
                work_max: 8_000,
            }),
            identity: Some(IdentityRule { salt: [4; 16] }),
            networks_per_session_max: Some(3),
            networks_window_secs: Some(600),
            external_challenge: Some(ExternalRule {
                provider: "turnstile".into(),
                fail_open: true,
            }),
            line: LineRule {
                show_waiting: false,
                show_positions: false,
                status_reads_per_sec: Some(50),
            },
            origin: Some(OriginRule {
                slow_latency_ms: Some(800),
                auto_pause: true,
                ..OriginRule::default()
            }),
            bypass: BypassRule {
                paths: vec![crate::bypass::PathRule {
                    prefix: "/pay".into(),
                    methods: vec!["POST".into()],
                }],
                networks: vec![crate::bypass::Network::parse("10.0.0.0/8").unwrap()],
                staff_tokens: false,
            },
            lanes: vec![Lane {
                name: "presale".into(),
                opens_at_ms: Some(1_800_000_000_000),
                share_permille: None,
                lottery: true,
            }],
            invite_only: true,
            grace_secs: Some(300),
            after_url: Some("https://shop.example/sold-out".into()),
            text_color: Some("#f5f5f5".into()),
            handoff_origins: vec![
                "https://shop.example".into(),
                "http://localhost:8081".into(),
            ],
            page_template: Some("<h1>{{ title }}</h1>{{ position }}".into()),
            phases: vec![crate::phases::Phase {
                starts_at_ms: 1_800_000_000_000,
                name: "Second drop".into(),
                capacity: Some(2_000),
                admit_per_minute: Some(600),
                mode: Some(crate::types::Mode::Fifo),
                notice: Some("The second drop is open.".into()),
                page_template: None,
                announce: true,
            }],
        };
        assert_eq!(p.encode().decode().unwrap(), p);
        let e = JoinEvidence {
            client: Some(ClientKey([7; 16])),
            challenge: Some(ChallengeUse {
                id: [3; 16],
                expires_ms: 1_800_000_000_000,
                work: 1_000,
                cost: 500,
            }),
            identity: Some(IdentityKey([6; 16])),
            external_passed: true,
            code: Some(CodeHash([8; 16])),
            lane: Some("members".into()),
        };
        assert_eq!(e.encode().decode().unwrap(), e);
        assert!(EncodedPolicy(vec![]).decode().is_err());
        assert!(matches!(
            EncodedPolicy(vec![9, 0]).decode(),
            Err(DecodeError::Version(9))
        ));
        let mut long = p.encode().0;
        long.push(0);
        assert!(EncodedPolicy(long).decode().is_err(), "trailing bytes");
        assert!(EncodedPolicy(vec![1; ENCODED_POLICY_BYTES_MAX + 1])
            .decode()
            .is_err());
        for bad in [
            EntryPolicy {
                first_use_ttl_secs: Some(0),
                ..EntryPolicy::default()
            },
            EntryPolicy {
                page_template: Some(String::new()),
                ..EntryPolicy::default()
            },
            EntryPolicy {
                page_template: Some("x".repeat(PAGE_TEMPLATE_BYTES_MAX + 1)),
                ..EntryPolicy::default()
            },
            EntryPolicy {
                places_per_client_max: Some(0),
                ..EntryPolicy::default()
            },
            EntryPolicy {
                sessions_per_client_max: Some(0),
                ..EntryPolicy::default()
            },
            EntryPolicy {
                networks_window_secs: Some(60),
                ..EntryPolicy::default()
            },
            EntryPolicy {
                networks_per_session_max: Some(2),
                networks_window_secs: Some(NETWORKS_WINDOW_SECS_MAX + 1),
                ..EntryPolicy::default()
            },
            EntryPolicy {
                client_prefix_v4: 33,
                ..EntryPolicy::default()
            },
            EntryPolicy {
                client_prefix_v6: 8,
                ..EntryPolicy::default()
            },
            EntryPolicy {
                proof_of_work: Some(PowRule {
                    work: 0,
                    cost: 1,
                    double_every_waiting: None,
                    work_max: 0,
                }),
                ..EntryPolicy::default()
            },
            EntryPolicy {
                proof_of_work: Some(PowRule {
                    work: 10,
                    cost: 1,
                    double_every_waiting: Some(0),
                    work_max: 10,
                }),
                ..EntryPolicy::default()
            },
            EntryPolicy {
                proof_of_work: Some(PowRule {
                    work: 10,
                    cost: 1,
                    double_every_waiting: None,
                    work_max: 5,
                }),
                ..EntryPolicy::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        EntryPolicy::default().validate().unwrap();
    }

    /// The encoding is the log format: it must not change by accident.
    #[test]
    fn the_encoding_is_golden() {
        let p = EntryPolicy {
            first_use_ttl_secs: Some(60),
            places_per_client_max: None,
            sessions_per_client_max: None,
            client_prefix_v4: 32,
            client_prefix_v6: 64,
            proof_of_work: Some(PowRule {
                work: 300,
                cost: 2,
                double_every_waiting: None,
                work_max: 300,
            }),
            identity: None,
            networks_per_session_max: None,
            networks_window_secs: None,
            external_challenge: None,
            line: LineRule::default(),
            origin: None,
            bypass: BypassRule::default(),
            lanes: Vec::new(),
            invite_only: false,
            grace_secs: None,
            after_url: None,
            text_color: None,
            handoff_origins: Vec::new(),
            page_template: None,
            phases: Vec::new(),
        };
        let golden = vec![
            1, 1, 60, 0, 0, 32, 64, 1, 0xac, 0x02, 2, 0, 0xac, 0x02, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0,
            1, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(p.encode().0, golden);
        // Written before `text_color`, `handoff_origins`, `page_template` and `phases` were
        // appended: decodes with them at their defaults; one byte fewer than the fields' start
        // is malformed.
        for missing in 1..=4 {
            let older = EncodedPolicy(golden[..golden.len() - missing].to_vec());
            assert_eq!(older.decode().unwrap(), p, "{missing} fields missing");
        }
        let cut = EncodedPolicy(golden[..golden.len() - 1 - APPENDED_FIELDS_MAX].to_vec());
        assert!(cut.decode().is_err(), "cut before the appended fields");
        let e = JoinEvidence {
            client: Some(ClientKey([1; 16])),
            challenge: None,
            identity: None,
            external_passed: false,
            code: None,
            lane: None,
        };
        let mut golden = vec![1, 1];
        golden.extend([1; 16]);
        golden.extend([0, 0, 0, 0, 0]);
        assert_eq!(e.encode().0, golden);
    }

    #[test]
    fn work_doubles_with_the_line_up_to_its_ceiling() {
        let r = PowRule {
            work: 1_000,
            cost: 1,
            double_every_waiting: Some(100),
            work_max: 5_000,
        };
        assert_eq!(r.work_at(0), 1_000);
        assert_eq!(r.work_at(99), 1_000);
        assert_eq!(r.work_at(100), 2_000);
        assert_eq!(r.work_at(250), 4_000);
        assert_eq!(r.work_at(300), 5_000);
        assert_eq!(r.work_at(u64::MAX), 5_000);
        let flat = PowRule {
            double_every_waiting: None,
            ..r
        };
        assert_eq!(flat.work_at(1_000_000), 1_000);
    }
}
