//! A room's operations: its configuration (checked whole, every rule error collected), reads and
//! listings, pause, notice, mode and health, origin reports, admissions, revocations and bans,
//! and its line.

use crate::core::{unexpected, Sluice};
use crate::error::ApiError;
use crate::error::Kind;
use crate::model::*;
use sluice_statemachine::limits::{QUEUE_PAGE_MAX, ROOMS_PAGE_MAX};
use sluice_statemachine::types::validate_name;
use sluice_statemachine::{
    Command, Health, HealthSource, Mode, OriginRule, OriginSamples, Outcome, Rejection, VisitorId,
};

/// Most rule errors one check of a room body collects ([`Sluice::room_body_errors`]).
pub const ROOM_BODY_ERRORS_MAX: usize = 32;

/// Longest ban with an end (a year); a ban without one lasts while the room exists.
pub const BAN_SECS_MAX: u64 = 366 * 86_400;

/// Refuses an origin probe URL that an operator below the `admin` role sets or changes (from
/// the room's `current` policy): the leader fetches it every few seconds from inside the
/// cluster's network, and its answers (errors, latency) show in the room, so whoever sets it can
/// reach and map addresses the cluster can (cloud metadata, loopback ports). Keeping or
/// removing the room's probe, and its other settings, need no more than `operator`.
pub(crate) fn may_probe(
    current: Option<&sluice_statemachine::EntryPolicy>,
    wanted: &sluice_statemachine::EntryPolicy,
) -> Result<(), ApiError> {
    pub(crate) fn url(p: Option<&sluice_statemachine::EntryPolicy>) -> Option<&str> {
        p.and_then(|p| p.origin.as_ref())
            .and_then(|o| o.probe.as_ref())
            .map(|p| p.url.as_str())
    }
    let Some(wanted) = url(Some(wanted)) else {
        return Ok(());
    };
    match crate::operators::current() {
        Some(op) if op.role < crate::operators::Role::Admin && url(current) != Some(wanted) => {
            Err(ApiError::new(
                Kind::Forbidden,
                "forbidden",
                format!(
                    "{} has the role {}: setting or changing origin.probe.url needs the role admin",
                    op.name, op.role
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// The settings that differ between `before` and `after` (JSON objects), each as
/// `path: old → new` with long values shortened, in path order, joined by `; ` and at most
/// [`sluice_statemachine::limits::CHANGE_NOTE_LEN_MAX`] bytes. Secrets (an identity rule's
/// salt) are never named.
pub(crate) fn settings_changes(before: &serde_json::Value, after: &serde_json::Value) -> String {
    use serde_json::Value;
    pub(crate) fn leaves(
        prefix: &str,
        v: &Value,
        out: &mut std::collections::BTreeMap<String, Value>,
    ) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    leaves(&path, v, out);
                }
            }
            v => {
                out.insert(prefix.to_string(), v.clone());
            }
        }
    }
    pub(crate) fn shown(v: Option<&Value>) -> String {
        const VALUE_LEN_MAX: usize = 120;
        let text = v.map_or_else(|| "none".to_string(), Value::to_string);
        let text: String = text.chars().filter(|c| !c.is_control()).collect();
        match text.char_indices().nth(VALUE_LEN_MAX) {
            Some((at, _)) => format!("{}…", &text[..at]),
            None => text,
        }
    }
    let (mut old, mut new) = Default::default();
    leaves("", before, &mut old);
    leaves("", after, &mut new);
    let paths: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let max = sluice_statemachine::limits::CHANGE_NOTE_LEN_MAX;
    let mut out = String::new();
    for path in paths {
        // Absent and null are the same: nothing set.
        let (a, b) = (
            old.get(path).filter(|v| !v.is_null()),
            new.get(path).filter(|v| !v.is_null()),
        );
        if a == b || path.split('.').any(|part| part == "salt") {
            continue;
        }
        let item = format!("{path}: {} → {}", shown(a), shown(b));
        let sep = if out.is_empty() { "" } else { "; " };
        if out.len() + sep.len() + item.len() > max - "; …".len() {
            out.push_str("; …");
            break;
        }
        out.push_str(sep);
        out.push_str(&item);
    }
    out
}

impl Sluice {
    /// What [`put_room`](Self::put_room) checks of a body before it writes anything: the
    /// room's configuration and the entry policy the body makes, or the first rule it breaks.
    pub fn check_room_body(
        &self,
        body: &RoomConfigBody,
    ) -> Result<
        (
            sluice_statemachine::RoomConfig,
            sluice_statemachine::EntryPolicy,
        ),
        ApiError,
    > {
        let config = body.to_config().map_err(|(f, m)| ApiError::invalid(f, m))?;
        config.validate()?;
        let mut policy = body.entry.to_policy();
        policy.line = body.line.to_rule();
        policy.after_url = body.line.after_url.clone();
        policy.handoff_origins = body.line.handoff_origins.clone();
        policy.text_color = body.branding.text_color.clone();
        policy.page_template = body
            .branding
            .template
            .clone()
            .filter(|t| !t.trim().is_empty());
        if let Some(t) = &policy.page_template {
            crate::page::check(t).map_err(|e| ApiError::invalid("branding.template", e.0))?;
        }
        policy.phases = crate::model::PhaseBody::to_phases(&body.phases)
            .map_err(|(f, m)| ApiError::invalid(f, m))?;
        for (i, p) in policy.phases.iter().enumerate() {
            if let Some(t) = &p.page_template {
                crate::page::check(t).map_err(|e| {
                    ApiError::invalid(
                        "phases",
                        format!("phase {}: the page template: {}", i + 1, e.0),
                    )
                })?;
            }
        }
        policy.origin = body
            .origin
            .as_ref()
            .map(|o| o.to_rule())
            .transpose()
            .map_err(|(f, m)| ApiError::invalid(f, m))?;
        policy.bypass = body
            .bypass
            .to_rule()
            .map_err(|(f, m)| ApiError::invalid(f, m))?;
        policy.lanes = crate::model::LaneBody::to_lanes(&body.lanes)
            .map_err(|(f, m)| ApiError::invalid(f, m))?;
        policy.validate()?;
        if let Some(e) = &policy.external_challenge {
            if !self.providers.knows(&e.provider) {
                return Err(ApiError::invalid(
                    "entry.external_challenge.provider",
                    format!(
                        "no challenge provider {} in this node's configuration",
                        e.provider
                    ),
                ));
            }
        }
        if body.entry.identity_required && self.identity.is_none() {
            return Err(ApiError::invalid(
                "entry.identity_required",
                "this node has no [identity] keys to verify assertions with".to_string(),
            ));
        }
        Ok((config, policy))
    }

    /// Every rule a body breaks, in one pass (a form shows them all at once, not one a save):
    /// each wrong field is set back to its value in `current` and the body checked again, until
    /// it passes or a field cannot be set back.
    pub fn room_body_errors(
        &self,
        body: &RoomConfigBody,
        current: &RoomConfigBody,
    ) -> Vec<ApiError> {
        let (Ok(mut trial), Ok(current)) =
            (serde_json::to_value(body), serde_json::to_value(current))
        else {
            return Vec::new();
        };
        let mut errors: Vec<ApiError> = Vec::new();
        while errors.len() < ROOM_BODY_ERRORS_MAX {
            let Ok(b) = serde_json::from_value::<RoomConfigBody>(trial.clone()) else {
                break;
            };
            let Err(e) = self.check_room_body(&b) else {
                break;
            };
            if errors.iter().any(|x| x.field == e.field) {
                break; // set back, and still wrong: what it says is said already
            }
            let field = e.field.clone().unwrap_or_default();
            errors.push(e);
            if field.is_empty() || !crate::model::json_set_back(&mut trial, &current, &field) {
                break;
            }
        }
        errors
    }

    /// Creates or replaces a room (only creates it, with `create_only`: an existing room is
    /// refused with `room_exists` and left as it is). Returns the room and whether it was
    /// created.
    pub async fn put_room(
        &self,
        room: &str,
        body: &RoomConfigBody,
        create_only: bool,
    ) -> Result<(RoomBody, bool), ApiError> {
        Self::check_room(room)?;
        let (config, mut policy) = self.check_room_body(body)?;
        // What the room's settings were: whether the probe changes, and the audit log's note
        // of what this changed. Read at the leader's index: on a follower that lags, a probe an
        // admin has just removed would look unchanged to an operator putting it back.
        let (before, _) = self
            .node
            .read_linearizable(|st| {
                st.sm
                    .room(room)
                    .map(|v| (v.config, st.sm.entry_policy(room).unwrap_or_default()))
            })
            .await?;
        may_probe(before.as_ref().map(|b| &b.1), &policy)?;
        // Checked here too (the state machine checks it at log time), so that a refused
        // timeline leaves the rest of the configuration as it was.
        if let Some((_, p)) = &before {
            sluice_statemachine::phases::check_frozen(&p.phases, &policy.phases, self.now_ms())?;
        }
        let new_config = config.clone();
        let (view, index, created) = self.create_or_update(room, config, create_only).await?;
        // The entry policy is a command of its own (its encoding grows on its own); it is
        // written only when it changes.
        let _ = self.node.wait_applied(index, self.catch_up_timeout).await;
        let current = self
            .node
            .read(|st| st.sm.entry_policy(room))
            .ok()
            .and_then(|(p, _)| p);
        // The identity salt is chosen once, and kept while the room asks identities.
        if body.entry.identity_required {
            let salt = match current.as_ref().and_then(|p| p.identity.as_ref()) {
                Some(rule) => rule.salt,
                None => {
                    let mut salt = [0u8; 16];
                    getrandom::fill(&mut salt)
                        .map_err(|e| ApiError::new(Kind::Internal, "internal", e.to_string()))?;
                    salt
                }
            };
            policy.identity = Some(sluice_statemachine::IdentityRule { salt });
        }
        let put = if current.as_ref() != Some(&policy) {
            let set = Command::SetEntryPolicy {
                room: room.into(),
                policy: policy.encode(),
            };
            match self.write(set).await? {
                (Outcome::Room(v), i) => RoomBody::new(&v, &policy, i),
                (o, _) => return Err(unexpected(o)),
            }
        } else {
            RoomBody::new(&view, &policy, index)
        };
        self.note_settings(room, before, (&new_config, &policy))
            .await;
        Ok((put, created))
    }

    /// Puts what an operator's change of a room's settings changed (from the settings `before`,
    /// or a new room's defaults) in the audit log, as the operator's: the change's own entries
    /// say only that the room was updated. Written after the change; one that cannot be
    /// written is logged.
    pub(crate) async fn note_settings(
        &self,
        room: &str,
        before: Option<(
            sluice_statemachine::RoomConfig,
            sluice_statemachine::EntryPolicy,
        )>,
        after: (
            &sluice_statemachine::RoomConfig,
            &sluice_statemachine::EntryPolicy,
        ),
    ) {
        if crate::operators::current().is_none() {
            return;
        }
        let before = before.unwrap_or_default();
        let what = settings_changes(
            &serde_json::json!({"config": before.0, "entry": before.1}),
            &serde_json::json!({"config": after.0, "entry": after.1}),
        );
        if what.is_empty() {
            return;
        }
        let note = Command::NoteRoomChange {
            room: room.into(),
            what,
        };
        if let Err(e) = self.write(note).await {
            tracing::warn!(room, error = %e.message, "the audit log's note of a room's changed settings was not written");
        }
    }

    /// Creates the room with `config`, or replaces an existing room's: the room, the log index,
    /// and whether this request created it.
    pub(crate) async fn create_or_update(
        &self,
        room: &str,
        config: sluice_statemachine::RoomConfig,
        create_only: bool,
    ) -> Result<(sluice_statemachine::RoomView, u64, bool), ApiError> {
        // Create, else replace: whether this request created the room is decided by the log,
        // so of concurrent requests for a new room exactly one reports it created. A room
        // deleted between the two attempts is created on the next round.
        for round in 1.. {
            let create = Command::CreateRoom {
                room: room.into(),
                config: config.clone(),
            };
            match self
                .node
                .write(crate::operators::attributed(create))
                .await?
            {
                (Outcome::Room(v), i) => return Ok((v, i, true)),
                (Outcome::Rejected(Rejection::RoomExists), _) if !create_only => {}
                (Outcome::Rejected(r), _) => return Err(r.into()),
                (o, _) => return Err(unexpected(o)),
            }
            let update = Command::UpdateRoom {
                room: room.into(),
                config: config.clone(),
            };
            match self
                .node
                .write(crate::operators::attributed(update))
                .await?
            {
                (Outcome::Room(v), i) => return Ok((v, i, false)),
                (Outcome::Rejected(Rejection::RoomNotFound), _) if round < 3 => {}
                (Outcome::Rejected(r), _) => return Err(r.into()),
                (o, _) => return Err(unexpected(o)),
            }
        }
        unreachable!("the loop returns by its third round")
    }

    /// A room's view with its entry policy, as this node has applied them.
    pub(crate) fn room_body(&self, v: &sluice_statemachine::RoomView, index: u64) -> RoomBody {
        let policy = self
            .node
            .read(|st| st.sm.entry_policy(&v.name))
            .ok()
            .and_then(|(p, _)| p)
            .unwrap_or_default();
        RoomBody::new(v, &policy, index)
    }

    /// A room.
    pub async fn get_room(&self, room: &str, consistent: bool) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let read = |st: &sluice_raft::SmState| st.sm.room(room).zip(st.sm.entry_policy(room));
        let (v, i) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        let (v, policy) = v.ok_or(Rejection::RoomNotFound)?;
        Ok(RoomBody::new(&v, &policy, i))
    }

    /// Every room.
    pub async fn list_rooms(
        &self,
        after: Option<&str>,
        limit: usize,
        consistent: bool,
    ) -> Result<RoomList, ApiError> {
        if !(1..=ROOMS_PAGE_MAX).contains(&limit) {
            return Err(ApiError::invalid(
                "limit",
                format!("must be from 1 to {ROOMS_PAGE_MAX}"),
            ));
        }
        if let Some(after) = after {
            validate_name("after", after).map_err(ApiError::from)?;
        }
        let read = |st: &sluice_raft::SmState| {
            let (page, more) = st.sm.rooms_after(after, limit);
            let page: Vec<_> = page
                .into_iter()
                .map(|r| {
                    let p = st.sm.entry_policy(&r.name).unwrap_or_default();
                    (r, p)
                })
                .collect();
            (page, more)
        };
        let ((page, more), i) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        Ok(RoomList {
            next_after: page.last().filter(|_| more).map(|(r, _)| r.name.clone()),
            rooms: page.iter().map(|(r, p)| RoomBody::new(r, p, i)).collect(),
            applied_index: i,
        })
    }

    /// Deletes a room.
    pub async fn delete_room(&self, room: &str) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        match self
            .write(Command::DeleteRoom { room: room.into() })
            .await?
        {
            (Outcome::RoomDeleted { waiting, active }, i) => Ok(CountReply {
                count: waiting + active,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    pub(crate) async fn room_cmd(&self, cmd: Command) -> Result<RoomBody, ApiError> {
        match self.write(cmd).await? {
            (Outcome::Room(v), i) => {
                let _ = self.node.wait_applied(i, self.catch_up_timeout).await;
                Ok(self.room_body(&v, i))
            }
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Pause or resume.
    pub async fn pause(&self, room: &str, paused: bool) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let room = room.to_string();
        self.room_cmd(if paused {
            Command::Pause { room }
        } else {
            Command::Resume { room }
        })
        .await
    }

    /// Shows `text` to everyone in the room's line, live, or takes the notice down (`None` or
    /// blank).
    pub async fn set_notice(&self, room: &str, text: Option<&str>) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let text = text
            .map(|t| t.trim().replace("\r\n", "\n"))
            .filter(|t| !t.is_empty());
        sluice_statemachine::types::validate_notice(&text).map_err(ApiError::from)?;
        self.room_cmd(Command::SetNotice {
            room: room.into(),
            text,
        })
        .await
    }

    /// Switch mode.
    pub async fn set_mode(&self, room: &str, mode: &str) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let mode = Mode::parse(mode).ok_or_else(|| {
            ApiError::invalid("mode", "must be fifo, lottery, passthrough or reject")
        })?;
        self.room_cmd(Command::SetMode {
            room: room.into(),
            mode,
        })
        .await
    }

    /// Set origin health.
    pub async fn set_health(
        &self,
        room: &str,
        health: &str,
        slow_factor: Option<f64>,
    ) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let health = Health::parse(health)
            .ok_or_else(|| ApiError::invalid("health", "must be ok, slow or down"))?;
        let permille = slow_factor
            .map(slow_factor_permille)
            .transpose()
            .map_err(|(f, m)| ApiError::invalid(f, m))?;
        self.room_cmd(Command::SetHealth {
            room: room.into(),
            health,
            slow_factor_permille: permille,
        })
        .await
    }

    /// Records answers of a room's origin, as proxies report them (or as the probe measured
    /// them), classified against the room's origin rule: one command for the batch.
    pub async fn report_origin(
        &self,
        room: &str,
        source: HealthSource,
        answers: &[(u16, u64)],
    ) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        if answers.is_empty() || answers.len() > ORIGIN_REPORT_BODY_SAMPLES_MAX {
            return Err(ApiError::invalid(
                "samples",
                format!("1 to {ORIGIN_REPORT_BODY_SAMPLES_MAX} samples per report"),
            ));
        }
        let rule = self
            .node
            .read(|st| st.sm.entry_policy(room))?
            .0
            .ok_or(Rejection::RoomNotFound)?
            .origin
            .ok_or_else(|| {
                ApiError::invalid(
                    "origin",
                    "this room watches no origin: set its origin rule first",
                )
            })?;
        let mut samples = OriginSamples::default();
        for &(status, latency_ms) in answers {
            samples.add(&rule.sample(latency_ms, status == 0 || status >= 500));
        }
        self.room_cmd(Command::ReportOrigin {
            room: room.into(),
            source,
            samples,
        })
        .await
    }

    /// The rooms whose origin rule has a probe, with the rule, as this node has applied them.
    pub fn origin_probes(&self) -> Vec<(String, OriginRule)> {
        self.node
            .read(|st| st.sm.origin_probes())
            .map(|(v, _)| v)
            .unwrap_or_default()
    }

    /// Force-admit.
    pub async fn admit(&self, room: &str, count: u64) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        sluice_statemachine::check_force_admit(count)?;
        match self
            .write(Command::ForceAdmit {
                room: room.into(),
                count,
            })
            .await?
        {
            (Outcome::Count(n), i) => Ok(CountReply {
                count: n,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Revoke one visitor or every session.
    pub async fn revoke(
        &self,
        room: &str,
        visitor: Option<&str>,
        all: bool,
    ) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        let cmd = match (visitor, all) {
            (Some(v), false) => {
                let visitor = VisitorId::parse_hex(v)
                    .ok_or_else(|| ApiError::invalid("visitor_id", "must be 32 hex digits"))?;
                Command::Revoke {
                    room: room.into(),
                    visitor,
                }
            }
            (None, true) => Command::RevokeAll { room: room.into() },
            _ => {
                return Err(ApiError::invalid(
                    "visitor_id",
                    "give either visitor_id or all: true",
                ))
            }
        };
        match self.write(cmd).await? {
            (Outcome::Count(n), i) => Ok(CountReply {
                count: n,
                applied_index: i,
            }),
            (Outcome::Visitor(_), i) => Ok(CountReply {
                count: 1,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Bans a visitor from a room for `duration_secs` (while the room exists if `None`),
    /// ending its place or session; or, with `lift`, lifts its ban. Counts the places ended
    /// (or the bans lifted).
    pub async fn ban(
        &self,
        room: &str,
        visitor: &str,
        duration_secs: Option<u64>,
        lift: bool,
    ) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        let visitor = VisitorId::parse_hex(visitor)
            .ok_or_else(|| ApiError::invalid("visitor_id", "must be 32 hex digits"))?;
        if duration_secs.is_some_and(|d| d > BAN_SECS_MAX) {
            return Err(ApiError::invalid(
                "duration_secs",
                format!("must be at most {BAN_SECS_MAX} (a year); leave it out for a ban that lasts while the room exists"),
            ));
        }
        let cmd = if lift {
            Command::Unban {
                room: room.into(),
                visitor,
            }
        } else {
            Command::Ban {
                room: room.into(),
                visitor,
                until_ms: duration_secs.map(|d| self.node.now_ms() + d * 1000),
            }
        };
        match self.write(cmd).await? {
            (Outcome::Count(n), i) => Ok(CountReply {
                count: n,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Waiters in admission order.
    pub async fn queue(
        &self,
        room: &str,
        offset: u64,
        limit: usize,
        consistent: bool,
    ) -> Result<QueueReply, ApiError> {
        Self::check_room(room)?;
        if limit > QUEUE_PAGE_MAX {
            return Err(ApiError::invalid(
                "limit",
                format!("must be at most {QUEUE_PAGE_MAX}"),
            ));
        }
        let read = |st: &sluice_raft::SmState| {
            let view = st.sm.room(room)?;
            let entries = st.sm.queue(room, offset, limit).ok()?;
            Some((view, entries))
        };
        let (r, i) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        let (view, entries) = r.ok_or(Rejection::RoomNotFound)?;
        Ok(QueueReply {
            room: room.into(),
            mode: view.config.mode.as_str().into(),
            waiting: view.waiting,
            entries: entries
                .into_iter()
                .map(|e| QueueEntryBody {
                    position: e.position,
                    lane: e.lane,
                    visitor_id: e.visitor.to_string(),
                    seq: e.seq,
                    last_seen_ms: e.last_seen_ms,
                })
                .collect(),
            applied_index: i,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each changed setting is named with what it was and what it became, a new one and a
    /// removed one too; what did not change is not; a salt never is; and the note is bounded.
    #[test]
    pub(crate) fn settings_changes_name_each_changed_setting_and_no_secret() {
        let before = serde_json::json!({
            "config": {"capacity": 10, "mode": "fifo", "branding": {"title": "Sale"}},
            "entry": {"bypass": {"networks": []}, "identity": {"salt": [1, 2]}, "origin": null}
        });
        let after = serde_json::json!({
            "config": {"capacity": 20, "mode": "fifo", "branding": {"title": "Sale"}},
            "entry": {
                "bypass": {"networks": ["10.0.0.0/8"]},
                "identity": {"salt": [3, 4]},
                "origin": {"probe": {"url": "http://shop/health"}}
            }
        });
        let what = settings_changes(&before, &after);
        assert_eq!(
            what,
            "config.capacity: 10 → 20; entry.bypass.networks: [] → [\"10.0.0.0/8\"]; \
             entry.origin.probe.url: none → \"http://shop/health\""
        );
        assert_eq!(settings_changes(&before, &before), "");
        let long = serde_json::json!({
            "config": (0..200).map(|i| (format!("k{i:03}"), serde_json::json!("x".repeat(200))))
                .collect::<serde_json::Map<_, _>>()
        });
        let what = settings_changes(&serde_json::json!({}), &long);
        assert!(
            what.len() <= sluice_statemachine::limits::CHANGE_NOTE_LEN_MAX,
            "{}",
            what.len()
        );
        assert!(what.ends_with("; …"), "{what}");
        assert!(what.contains("config.k000: none → \"xxx"), "{what}");
    }
}
