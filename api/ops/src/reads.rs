//! Local reads of this node's applied state that the pages, the dashboard and the metrics make:
//! no Raft round trip, no wait for a visitor's own writes (the visitor operations in `core`
//! do that), and a node that cannot read answers with the plain default.

use crate::core::Sluice;
use crate::model::{CodeBatchBody, OverviewBody};
use sluice_statemachine::{EntryPolicy, RoomView};

impl Sluice {
    /// `GET /v1/overview`: every room together, as this node has applied them.
    pub fn overview(&self) -> Result<OverviewBody, crate::error::ApiError> {
        let (rooms, i) = self.node.read(|st| st.sm.rooms())?;
        Ok(OverviewBody::of(&rooms, i))
    }

    /// Every room, as this node has applied it (none while it cannot read).
    pub fn rooms_here(&self) -> Vec<RoomView> {
        self.node
            .read(|st| st.sm.rooms())
            .map(|(r, _)| r)
            .unwrap_or_default()
    }

    /// The room as this node has applied it, for pages (a local read; `None` when there is no
    /// such room or the node cannot read).
    pub fn room_view(&self, room: &str) -> Option<RoomView> {
        self.node
            .read(|st| st.sm.room(room))
            .ok()
            .and_then(|(v, _)| v)
    }

    /// The first `limit` rooms by name as this node has applied them, for the dashboard's
    /// history (a local read; empty while the node cannot read).
    pub fn room_views(&self, limit: usize) -> Vec<RoomView> {
        self.node
            .read(|st| st.sm.rooms_after(None, limit).0)
            .map(|(v, _)| v)
            .unwrap_or_default()
    }

    /// What `f` reads of `room`'s entry policy, as this node has applied it, read in place (no
    /// copy of the policy); `None` without such a room, or while the node cannot read.
    pub fn entry_policy_here<T>(&self, room: &str, f: impl FnOnce(&EntryPolicy) -> T) -> Option<T> {
        self.node
            .read(|st| st.sm.policy(room).map(f))
            .ok()
            .and_then(|(t, _)| t)
    }

    /// `room`'s batches of access codes, as this node has applied them.
    pub fn code_batches_here(&self, room: &str) -> Vec<CodeBatchBody> {
        self.node
            .read(|st| st.sm.code_batches(room))
            .ok()
            .and_then(|(b, _)| b.ok())
            .unwrap_or_default()
            .iter()
            .map(CodeBatchBody::from)
            .collect()
    }

    /// Whether the operator credential (a dashboard session) `id` was ended (signed out) in
    /// replicated state; a node that cannot read says it was, so that nothing is let in on
    /// a guess.
    pub fn credential_ended(&self, id: &[u8; 16]) -> bool {
        self.node
            .read(|st| st.sm.credential_ended(id))
            .map_or(true, |(ended, _)| ended)
    }
}
