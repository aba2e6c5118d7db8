//! Access codes (batches made, listed and ended) and staff bypass tokens (issued after the
//! issue is in the log, checked at the gate, revoked in replicated state).

use crate::bypass::StaffToken;
use crate::core::{unexpected, Sluice};
use crate::error::ApiError;
use crate::error::Kind;
use crate::model::*;
use sluice_statemachine::{Command, EntryPolicy, Outcome, Rejection};

/// Why a staff token does not let its holder through `room` at `now_s` (unix seconds), as far
/// as the token alone tells (`None`: it may). The gate and the staff page ask the same.
pub(crate) fn staff_refusal(t: &StaffToken, room: &str, now_s: u64) -> Option<&'static str> {
    if t.room != room {
        Some("the token is for another room")
    } else if t.expires_at <= now_s {
        Some("the token has expired")
    } else {
        None
    }
}

/// Why a staff token does not let its holder through a room with `policy`, as the replicated
/// state tells (`None`: it may).
pub(crate) fn staff_state_refusal(
    policy: &EntryPolicy,
    sm: &sluice_statemachine::StateMachine,
    t: &StaffToken,
) -> Option<&'static str> {
    if !policy.bypass.staff_tokens {
        Some("the room does not accept staff tokens")
    } else if sm.credential_ended(&t.id) {
        Some("the token was revoked")
    } else if sm.room_created_at(&t.room) != Some(t.room_created_ms) {
        Some("the token is for an earlier room of this name (deleted since)")
    } else {
        None
    }
}

/// How many codes `body` asks for: `count`, or one per identity; within the request's bound.
fn codes_asked(body: &CodesCreateBody) -> Result<u64, ApiError> {
    use crate::codes::CODES_PER_REQUEST_MAX;
    let count = match (body.count, body.identities.len() as u64) {
        (Some(n), 0) => n,
        (None, 0) => return Err(ApiError::invalid("count", "how many codes to make")),
        (None, k) => k,
        (Some(n), k) if n == k => n,
        (Some(_), _) => {
            return Err(ApiError::invalid(
                "count",
                "with identities, one code per identity: leave count out",
            ))
        }
    };
    if !(1..=CODES_PER_REQUEST_MAX).contains(&count) {
        return Err(ApiError::invalid(
            "count",
            format!("must be between 1 and {CODES_PER_REQUEST_MAX}"),
        ));
    }
    Ok(count)
}

impl Sluice {
    /// Makes a batch of access codes for `room`: random codes, shown in the answer this once;
    /// the cluster keeps their hashes, written a command of
    /// [`CODES_PER_COMMAND_MAX`](sluice_statemachine::codes::CODES_PER_COMMAND_MAX) at a time.
    /// If a later part cannot be written, the batch is ended (none of its codes works) and the
    /// error returned.
    pub async fn create_codes(
        &self,
        room: &str,
        body: &CodesCreateBody,
    ) -> Result<CodesCreatedBody, ApiError> {
        Self::check_room(room)?;
        let count = codes_asked(body)?;
        let batch = sluice_statemachine::CodeBatch {
            label: body.label.clone(),
            lane: body.lane.clone().filter(|l| !l.is_empty()),
            uses: body.uses,
            expires_ms: body
                .expires_at
                .map(|s| {
                    s.checked_mul(1000)
                        .ok_or_else(|| ApiError::invalid("expires_at", "too large"))
                })
                .transpose()?,
        };
        batch.validate()?;
        let (policy, _) = self.node.read(|st| st.sm.entry_policy(room))?;
        let policy = policy.ok_or_else(|| ApiError::from(Rejection::RoomNotFound))?;
        if let Some(lane) = &batch.lane {
            if !policy.lanes.iter().any(|l| &l.name == lane) {
                return Err(ApiError::invalid(
                    "lane",
                    format!("the room has no lane {lane} (see its lanes)"),
                ));
            }
        }
        let identities = self.code_identities(room, body, &policy, count)?;
        let mut random = vec![0u8; count as usize * 10];
        getrandom::fill(&mut random)
            .map_err(|e| ApiError::new(Kind::Internal, "internal", e.to_string()))?;
        let codes: Vec<String> = random
            .chunks_exact(10)
            .map(|r| crate::codes::format(r.try_into().expect("10 bytes")))
            .collect();
        let hashed: Vec<sluice_statemachine::NewCode> = codes
            .iter()
            .zip(identities)
            .map(|(c, identity)| sluice_statemachine::NewCode {
                hash: crate::codes::hash(
                    room,
                    &crate::codes::normalize(c).expect("a code made here"),
                ),
                identity,
            })
            .collect();
        let (view, index) = self.write_codes(room, batch, &hashed).await?;
        tracing::info!(
            room,
            batch = view.id,
            codes = view.codes,
            "access codes made"
        );
        Ok(CodesCreatedBody {
            batch: CodeBatchBody::from(&view),
            codes,
            applied_index: index,
        })
    }

    /// The identity each code of a batch is for: none, or one per subject of `body`, keyed as
    /// the room's identity rule keys a visitor's assertion.
    fn code_identities(
        &self,
        room: &str,
        body: &CodesCreateBody,
        policy: &sluice_statemachine::EntryPolicy,
        count: u64,
    ) -> Result<Vec<Option<sluice_statemachine::IdentityKey>>, ApiError> {
        if body.identities.is_empty() {
            return Ok(vec![None; count as usize]);
        }
        let rule = policy.identity.as_ref().ok_or_else(|| {
            ApiError::invalid(
                "identities",
                "the room asks no identities (entry.identity_required)",
            )
        })?;
        let keys = self
            .identity
            .as_ref()
            .ok_or_else(|| ApiError::invalid("identities", "this node has no [identity] keys"))?;
        let max = crate::identity::SUBJECT_BYTES_MAX;
        body.identities
            .iter()
            .map(|sub| {
                if sub.is_empty() || sub.len() > max {
                    let each = format!("each 1 to {max} bytes");
                    return Err(ApiError::invalid("identities", each));
                }
                Ok(Some(keys.key(room, &rule.salt, sub)))
            })
            .collect()
    }

    /// Writes a batch's codes, a command of
    /// [`CODES_PER_COMMAND_MAX`](sluice_statemachine::codes::CODES_PER_COMMAND_MAX) at a time;
    /// if a later part cannot be written, ends the batch (none of its codes works).
    async fn write_codes(
        &self,
        room: &str,
        batch: sluice_statemachine::CodeBatch,
        hashed: &[sluice_statemachine::NewCode],
    ) -> Result<(sluice_statemachine::CodeBatchView, u64), ApiError> {
        use sluice_statemachine::codes::CODES_PER_COMMAND_MAX;
        let mut parts = hashed.chunks(CODES_PER_COMMAND_MAX);
        let first = Command::CreateCodes {
            room: room.into(),
            batch,
            codes: parts.next().expect("at least one code").to_vec(),
        };
        let (mut view, mut index) = match self.write(first).await? {
            (Outcome::Codes(v), i) => (v, i),
            (o, _) => return Err(unexpected(o)),
        };
        for part in parts {
            let add = Command::AddCodes {
                room: room.into(),
                batch: view.id,
                codes: part.to_vec(),
            };
            match self.write(add).await {
                Ok((Outcome::Codes(v), i)) => (view, index) = (v, i),
                other => {
                    let end = Command::EndCodes {
                        room: room.into(),
                        batch: view.id,
                    };
                    let _ = self.write(end).await;
                    return Err(match other {
                        Err(e) => e,
                        Ok((o, _)) => unexpected(o),
                    });
                }
            }
        }
        Ok((view, index))
    }

    /// A room's code batches: counts and uses, never the codes (a linearizable read with
    /// `consistent`).
    pub async fn code_batches(
        &self,
        room: &str,
        consistent: bool,
    ) -> Result<CodeBatchList, ApiError> {
        Self::check_room(room)?;
        let read = |st: &sluice_raft::SmState| st.sm.code_batches(room);
        let (batches, index) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        Ok(CodeBatchList {
            batches: batches?.iter().map(CodeBatchBody::from).collect(),
            applied_index: index,
        })
    }

    /// Ends a batch of codes: none of them works from now on; the places they gave stay.
    pub async fn end_codes(&self, room: &str, batch: u32) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        let cmd = Command::EndCodes {
            room: room.into(),
            batch,
        };
        match self.write(cmd).await? {
            (Outcome::Count(n), i) => Ok(CountReply {
                count: n,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Issues a staff bypass token for `room`, valid `ttl_secs` (at most
    /// [`STAFF_TOKEN_TTL_SECS_MAX`](crate::bypass::STAFF_TOKEN_TTL_SECS_MAX)) on every node.
    /// Its issue is written to the log first (the operator audit log lists who issued which
    /// token, to whom, until when): no token exists without that record.
    pub async fn issue_bypass_token(
        &self,
        room: &str,
        ttl_secs: u64,
        label: &str,
    ) -> Result<BypassTokenReply, ApiError> {
        use crate::bypass::{label_ok, STAFF_LABEL_LEN_MAX, STAFF_TOKEN_TTL_SECS_MAX};
        Self::check_room(room)?;
        if !(1..=STAFF_TOKEN_TTL_SECS_MAX).contains(&ttl_secs) {
            return Err(ApiError::invalid(
                "ttl_secs",
                format!("must be between 1 and {STAFF_TOKEN_TTL_SECS_MAX} (a week)"),
            ));
        }
        if !label_ok(label) {
            return Err(ApiError::invalid(
                "label",
                format!("at most {STAFF_LABEL_LEN_MAX} printable ASCII characters"),
            ));
        }
        let (staff_tokens, _) = self.node.read(|st| {
            st.sm
                .policy(room)
                .map(|p| p.bypass.staff_tokens)
                .zip(st.sm.room_created_at(room))
        })?;
        let (staff_tokens, room_created_ms) = match staff_tokens {
            Some((on, created)) => (Some(on), created),
            None => (None, 0),
        };
        match staff_tokens {
            None => return Err(Rejection::RoomNotFound.into()),
            Some(false) => {
                return Err(ApiError::new(
                    Kind::Conflict,
                    "staff_tokens_off",
                    "the room does not accept staff tokens (bypass.staff_tokens is false)",
                ))
            }
            Some(true) => {}
        }
        let mut id = [0u8; 16];
        getrandom::fill(&mut id)
            .map_err(|e| ApiError::new(Kind::Internal, "internal", e.to_string()))?;
        // Not a dashboard session's: its revocation never competes with sign-outs for places.
        id[0] &= 0x7f;
        let t = StaffToken {
            room: room.to_string(),
            room_created_ms,
            id,
            expires_at: self.node.now_ms() / 1000 + ttl_secs,
            label: label.to_string(),
        };
        let note = Command::NoteStaffToken {
            room: room.to_string(),
            id,
            expires_at_ms: t.expires_at.saturating_mul(1000),
            label: label.to_string(),
        };
        let (_, index) = self.write(note).await?;
        tracing::info!(room, id = %t.id_hex(), label, expires_at = t.expires_at, index, operator = %crate::operators::acting_name(), "staff bypass token issued");
        Ok(BypassTokenReply {
            token: t.seal(&self.tickets),
            id: t.id_hex(),
            room: t.room,
            expires_at: t.expires_at,
            label: t.label,
        })
    }

    /// Whether `token` lets its holder into `room` now: signed for it, not expired, not
    /// revoked, and the room accepts staff tokens. Returns the seconds it has left.
    pub fn staff_token(&self, room: &str, token: &str) -> Result<u64, ApiError> {
        let refused =
            |m: &str| ApiError::new(Kind::Unauthenticated, "bypass_invalid", m.to_string());
        let t = StaffToken::open(&self.tickets, token)
            .map_err(|_| refused("this is not a staff token of this cluster"))?;
        let now_s = self.node.now_ms() / 1000;
        if let Some(why) = staff_refusal(&t, room, now_s) {
            return Err(refused(why));
        }
        let (refusal, _) = self.node.read(|st| {
            st.sm
                .policy(room)
                .map(|p| staff_state_refusal(p, &st.sm, &t))
        })?;
        match refusal {
            None => Err(Rejection::RoomNotFound.into()),
            Some(Some(why)) => Err(refused(why)),
            Some(None) => Ok(t.expires_at - now_s),
        }
    }

    /// Revokes a staff bypass token everywhere: by the token itself (remembered until it
    /// expires), or by its id (remembered for the longest a token lasts).
    pub async fn revoke_bypass_token(
        &self,
        room: &str,
        b: &BypassRevokeBody,
    ) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        let now_s = self.node.now_ms() / 1000;
        let (id, until) = match (&b.token, &b.id) {
            (Some(t), None) => {
                let t = StaffToken::open(&self.tickets, t)
                    .map_err(|e| ApiError::invalid("token", e.to_string()))?;
                if t.room != room {
                    return Err(ApiError::invalid("token", "the token is for another room"));
                }
                (t.id, t.expires_at)
            }
            (None, Some(id)) => {
                let id = crate::bypass::unhex16(id)
                    .ok_or_else(|| ApiError::invalid("id", "must be 32 hex digits"))?;
                // Staff tokens' ids never have the first bit set; dashboard sessions' always do.
                if sluice_statemachine::is_session_credential(&id) {
                    return Err(ApiError::invalid("id", "not the id of a staff token"));
                }
                (id, now_s + crate::bypass::STAFF_TOKEN_TTL_SECS_MAX)
            }
            _ => {
                return Err(ApiError::invalid(
                    "token",
                    "give the token, or its id, not both",
                ))
            }
        };
        // No room, no tokens of it: refused before anything is written.
        if self.node.read(|st| st.sm.room(room).is_none())?.0 {
            return Err(Rejection::RoomNotFound.into());
        }
        let cmd = if sluice_statemachine::is_session_credential(&id) {
            // A token signed before staff tokens' ids were kept apart from sessions' (its
            // signature proves what it is): ended as such tokens always were.
            Command::EndCredential {
                credential: id,
                until_ms: until.saturating_mul(1000),
            }
        } else {
            Command::RevokeStaffToken {
                room: room.to_string(),
                id,
                until_ms: until.saturating_mul(1000),
            }
        };
        match self.write(cmd).await? {
            (Outcome::Count(n), i) => {
                tracing::info!(room, id = %crate::bypass::hex(&id), "staff bypass token revoked");
                Ok(CountReply {
                    count: n,
                    applied_index: i,
                })
            }
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Ends the operator credential `credential` (a dashboard session) everywhere until
    /// `until_ms`, when it would have ended anyway, attributed to the operator acting. The
    /// outcome is returned as it is: a refusal (too many ended at once) is the caller's to word.
    pub async fn end_credential(
        &self,
        credential: [u8; 16],
        until_ms: u64,
    ) -> Result<(sluice_statemachine::Outcome, u64), ApiError> {
        Ok(self
            .node
            .write(crate::operators::attributed(Command::EndCredential {
                credential,
                until_ms,
            }))
            .await?)
    }
}
