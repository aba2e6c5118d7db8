//! Named operators: who may do what, and who did it.
//!
//! Each operator has a name, a [`Role`] and a token; a node's configuration holds the SHA-256 of
//! each token, never the token ([`OperatorConfig`]). The `admin_token` is the break-glass
//! credential, named [`BREAK_GLASS`], with the role `admin`. [`crate::auth`] finds the operator
//! a presented token belongs to; this module says which role each request needs and remembers,
//! for the request's task, who is acting:
//!
//! - HTTP: the operator routes' middleware (`sluice-web`'s `http::operator_auth`) asks `roles::http_role` of the
//!   request's method and route; the dashboard's session layer (`admin::session_layer`) refuses
//!   a viewer's forms.
//! - gRPC: `OperatorGuard` (in the gRPC crate) wraps the `Admin` and `Cluster` services and asks `grpc_role` of
//!   the call's path.
//!
//! Each runs the rest of the request inside [`acting`], a task-local scope holding the
//! operator; `core`'s operator write path puts every command it writes through [`attributed`],
//! which wraps it as `Command::AsOperator` when an operator is acting. So the log names who
//! caused every operator write, whichever surface it came through, and nothing else is
//! attributed: visitors' writes, backends' reports and pool traffic, and the node's own ticks,
//! probes and renewals run outside any such scope (or use the unattributed path) and reach the
//! log as they are.

use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use sluice_statemachine::Command;
use std::future::Future;
use std::sync::Arc;

/// Most named operators a node's configuration may hold (the break-glass credential aside).
/// Every presented token is compared with each one's hash, so that the time taken does not say
/// which matched: the bound keeps that cost small.
pub const OPERATORS_MAX: usize = 100;

/// The name the break-glass `admin_token` acts under, with the role `admin`.
pub const BREAK_GLASS: &str = "admin";

/// What an operator may do. Each role may do everything the one before it may.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read: every `GET`, the dashboard's pages, metrics, the audit log.
    #[default]
    Viewer,
    /// Run rooms and pools: everything that changes rooms, codes, notices, bans and bypass
    /// tokens.
    Operator,
    /// Run the cluster: membership changes, backups and log export, and everything an operator
    /// may do.
    Admin,
}

impl Role {
    /// The role's name, as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// The role named `s`.
    pub fn parse(s: &str) -> Option<Role> {
        [Role::Viewer, Role::Operator, Role::Admin]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One named operator in a node's configuration (`[[operators]]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    /// The name the audit log records: as room names are, `[a-z0-9][a-z0-9-]{0,63}`.
    pub name: String,
    /// What the operator may do.
    pub role: Role,
    /// SHA-256 of the operator's token, 64 hex digits (`sluice keygen --operator` prints it).
    pub token_sha256: String,
}

/// SHA-256 of `token`, as bytes.
pub fn token_hash(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

pub use crate::text::hex;

/// 64 hex digits (either case) as 32 bytes.
pub fn parse_hash(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Checks the `[[operators]]` of a configuration: at most [`OPERATORS_MAX`], names valid and
/// unique (and not the break-glass credential's), hashes well-formed and unique.
pub fn validate(operators: &[OperatorConfig]) -> Result<(), String> {
    if operators.len() > OPERATORS_MAX {
        return Err(format!(
            "operators: at most {OPERATORS_MAX} (there are {})",
            operators.len()
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    let mut hashes = std::collections::BTreeMap::new();
    for o in operators {
        sluice_statemachine::types::validate_name("name", &o.name)
            .map_err(|e| format!("operators: name {:?}: {e}", o.name))?;
        if o.name == BREAK_GLASS {
            return Err(format!(
                "operators: the name {BREAK_GLASS} is the admin_token's (the break-glass \
                 credential): give this operator another"
            ));
        }
        if !names.insert(o.name.as_str()) {
            return Err(format!(
                "operators: {} is named twice: each name once",
                o.name
            ));
        }
        let hash = parse_hash(&o.token_sha256).ok_or_else(|| {
            format!(
                "operators.{}.token_sha256: 64 hex digits, the SHA-256 of the token (`sluice \
                 keygen --operator {} --role {}` prints it)",
                o.name, o.name, o.role
            )
        })?;
        if let Some(other) = hashes.insert(hash, o.name.as_str()) {
            return Err(format!(
                "operators: {other} and {} have the same token_sha256: one token names one \
                 operator",
                o.name
            ));
        }
    }
    Ok(())
}

/// Who is acting: an operator's name and role, as its credential says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operator {
    /// The name the audit log records.
    pub name: Arc<str>,
    /// What it may do.
    pub role: Role,
}

impl Operator {
    /// `Ok` when the operator's role is at least `needed`; else 403 `forbidden`.
    pub fn may(&self, needed: Role) -> Result<(), ApiError> {
        if self.role >= needed {
            Ok(())
        } else {
            Err(ApiError::forbidden(&self.name, self.role, needed))
        }
    }
}

tokio::task_local! {
    /// The operator whose request the task is serving.
    static ACTING: Operator;
}

/// Runs `f` with `operator` acting: the operator writes it makes are attributed to it.
pub fn acting<F: Future>(
    operator: Operator,
    f: F,
) -> tokio::task::futures::TaskLocalFuture<Operator, F> {
    ACTING.scope(operator, f)
}

/// The operator acting in this task, if any.
pub fn current() -> Option<Operator> {
    ACTING.try_with(Operator::clone).ok()
}

/// The name of the operator acting in this task, for logs (`-` when none is).
pub fn acting_name() -> String {
    current().map_or_else(|| "-".to_string(), |o| o.name.to_string())
}

/// `command`, attributed to the operator acting in this task (`Command::AsOperator`), or as it
/// is when none is.
pub fn attributed(command: Command) -> Command {
    debug_assert!(
        !matches!(command, Command::AsOperator { .. }),
        "attributed twice"
    );
    match current() {
        Some(op) => Command::AsOperator {
            operator: op.name.to_string(),
            command: Box::new(command),
        },
        None => command,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, role: Role, token: &str) -> OperatorConfig {
        OperatorConfig {
            name: name.into(),
            role,
            token_sha256: hex(&token_hash(token)),
        }
    }

    #[test]
    fn operators_are_bounded_named_once_and_hashed_once() {
        let alice = op("alice", Role::Operator, "alice-token-0123456789abcdef0123");
        let bob = op("bob", Role::Viewer, "bob-token-0123456789abcdef0123456");
        validate(&[alice.clone(), bob.clone()]).unwrap();
        let twice = validate(&[alice.clone(), OperatorConfig { ..alice.clone() }]).unwrap_err();
        assert!(twice.contains("alice is named twice"), "{twice}");
        let shared = validate(&[
            alice.clone(),
            OperatorConfig {
                name: "carol".into(),
                ..alice.clone()
            },
        ])
        .unwrap_err();
        assert!(
            shared.contains("alice and carol have the same token_sha256"),
            "{shared}"
        );
        // The same hash in capitals is the same hash.
        let shouted = validate(&[
            alice.clone(),
            OperatorConfig {
                name: "carol".into(),
                token_sha256: alice.token_sha256.to_uppercase(),
                ..alice.clone()
            },
        ])
        .unwrap_err();
        assert!(shouted.contains("same token_sha256"), "{shouted}");
        for (name, hash, says) in [
            ("Alice", alice.token_sha256.as_str(), "name \"Alice\""),
            ("", alice.token_sha256.as_str(), "name \"\""),
            ("admin", alice.token_sha256.as_str(), "break-glass"),
            ("dave", "abc", "64 hex digits"),
            ("dave", &"g".repeat(64), "64 hex digits"),
            ("dave", "the-token-itself-not-its-hash-0123456789", "64 hex"),
        ] {
            let e = validate(&[OperatorConfig {
                name: name.into(),
                role: Role::Viewer,
                token_sha256: hash.into(),
            }])
            .unwrap_err();
            assert!(e.contains(says), "{name}: {e}");
        }
        let many: Vec<OperatorConfig> = (0..=OPERATORS_MAX)
            .map(|i| op(&format!("op-{i}"), Role::Viewer, &format!("token-{i}")))
            .collect();
        assert!(validate(&many).unwrap_err().contains("at most"));
        validate(&many[..OPERATORS_MAX]).unwrap();
    }

    #[test]
    fn roles_order_and_name_themselves() {
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
        for r in [Role::Viewer, Role::Operator, Role::Admin] {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("root"), None);
        let o = Operator {
            name: "bob".into(),
            role: Role::Viewer,
        };
        assert!(o.may(Role::Viewer).is_ok());
        let e = o.may(Role::Operator).unwrap_err();
        assert_eq!(
            (e.kind, e.code),
            (crate::error::Kind::Forbidden, "forbidden")
        );
    }

    #[tokio::test]
    async fn commands_are_attributed_only_inside_an_operators_scope() {
        let pause = || Command::Pause { room: "r".into() };
        assert_eq!(attributed(pause()), pause());
        let alice = Operator {
            name: "alice".into(),
            role: Role::Operator,
        };
        let inside = acting(alice, async { attributed(pause()) }).await;
        assert_eq!(
            inside,
            Command::AsOperator {
                operator: "alice".into(),
                command: Box::new(pause()),
            }
        );
        // A task spawned from the scope (a batcher, a renewer) is not the operator's.
        let spawned = acting(
            Operator {
                name: "bob".into(),
                role: Role::Admin,
            },
            async {
                tokio::spawn(async { attributed(Command::Pause { room: "r".into() }) })
                    .await
                    .unwrap()
            },
        )
        .await;
        assert_eq!(spawned, pause());
    }
}
