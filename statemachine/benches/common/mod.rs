//! What the state machine benches share: the room configurations and the visitors.

#![allow(dead_code)]

use sluice_statemachine::*;

pub const WAITERS: u64 = 1_000_000;

/// The `v`-th visitor: ids spread as random ones are.
pub fn visitor(v: u64) -> VisitorId {
    VisitorId::from_u128(v as u128 * 0x9e37_79b9_7f4a_7c15 + 1)
}

/// Nobody is admitted: every join becomes a waiter.
pub fn room_config() -> RoomConfig {
    RoomConfig {
        capacity: 1,
        admit_per_minute: 1,
        waiter_ttl_secs: 3_600,
        max_waiting: WAITERS + 1,
        paused: true,
        ..RoomConfig::default()
    }
}

/// Everybody is admitted at once: every join becomes a session.
pub fn sessions_config() -> RoomConfig {
    RoomConfig {
        capacity: WAITERS + 1,
        admit_per_minute: 60_000_000,
        admit_burst: 1_000_000,
        session_ttl_secs: 3_600,
        max_waiting: WAITERS + 1,
        ..RoomConfig::default()
    }
}

pub fn new_machine(now: u64, config: RoomConfig) -> StateMachine {
    let mut sm = StateMachine::new();
    sm.apply(
        1,
        1,
        &Proposal {
            time_ms: now,
            commands: vec![Command::CreateRoom {
                room: "bench".into(),
                config,
            }],
        },
    );
    sm
}
