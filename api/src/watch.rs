//! A visitor's status as a stream of changes: what the HTTP event stream (`/events`) and the
//! gRPC `Visitor/Watch` call send.

use crate::core::{Sluice, TicketSource};
use crate::error::ApiError;
use crate::model::{ReplyState, VisitorReply};
use axum::http::StatusCode;
use futures::Stream;
use sluice_statemachine::VisitorId;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How often an open watch reads the visitor's status from this node's applied state.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// The watches open on this node: at most `limits.event_streams_max`, over both APIs, and at
/// most `per_address_max` from one client address; one per visitor (a new one ends the one
/// before: a visitor is one page, and tabs reopen theirs when it ends). All end when the node
/// shuts down.
#[derive(Debug)]
pub struct Watches {
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
    per_address_max: usize,
    open: std::sync::Mutex<Open>,
}

/// Who holds the open watches.
#[derive(Debug, Default)]
struct Open {
    by_address: HashMap<IpAddr, usize>,
    /// Each visitor's watch: its number (to tell it from a later one) and its end.
    by_visitor: HashMap<(String, VisitorId), (u64, CancellationToken)>,
    next: u64,
}

impl Watches {
    /// Room for `max` watches at once, `per_address_max` from one address, all ended when
    /// `shutdown` fires.
    pub fn new(max: usize, per_address_max: usize, shutdown: CancellationToken) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max.max(1))),
            shutdown,
            per_address_max: per_address_max.max(1),
            open: std::sync::Mutex::default(),
        }
    }

    /// Watches open now (for metrics and tests).
    pub fn open_count(&self) -> usize {
        self.open
            .lock()
            .expect("watch lock")
            .by_address
            .values()
            .sum()
    }
}

/// A watch's place among the node's: released (and its address's count with it) when dropped.
struct Held {
    watches: Arc<Sluice>,
    address: IpAddr,
    visitor: (String, VisitorId),
    number: u64,
    /// Fires when a newer watch of the same visitor replaces this one.
    replaced: CancellationToken,
    _slot: OwnedSemaphorePermit,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self.watches.watches.open.lock().expect("watch lock");
        if let Some(n) = open.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                open.by_address.remove(&self.address);
            }
        }
        if open
            .by_visitor
            .get(&self.visitor)
            .is_some_and(|(number, _)| *number == self.number)
        {
            open.by_visitor.remove(&self.visitor);
        }
    }
}

/// 503 `too_many_streams`: the node's (or this address's) watches are all in use.
fn too_many(whose: &str) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_streams",
        format!("{whose} as many status streams open as it may; poll the status instead"),
    )
    .retry(5)
}

/// (state, position, ETA, waiting, notice): what makes a status worth sending again.
type Sent = (
    ReplyState,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<String>,
);

fn sent_of(r: &VisitorReply) -> Sent {
    (r.state, r.position, r.eta_secs, r.waiting, r.notice.clone())
}

struct State {
    sluice: Arc<Sluice>,
    room: String,
    src: TicketSource,
    shutdown: CancellationToken,
    pending: Option<VisitorReply>,
    last: Option<Sent>,
    done: bool,
    /// A visitor with a watch open is present: recorded as active this often, so that a waiter
    /// who only listens keeps its place (as one who sends heartbeats does).
    presence_every: Duration,
    present_at: tokio::time::Instant,
    /// This watch's place among the node's.
    held: Held,
}

/// Opens a watch of the visitor `src` names in `room`, for a client at `address`: its status
/// now, then each change, until it is no longer waiting (the last status sent says what it
/// became), or an error that retrying would not cure, sent as the last item. Refused when the
/// node's watches, or this address's, are all in use (503 `too_many_streams`), or when the
/// status cannot be read now. A visitor's earlier watch ends when this one opens.
pub async fn open(
    sluice: Arc<Sluice>,
    room: String,
    src: TicketSource,
    address: IpAddr,
) -> Result<impl Stream<Item = Result<VisitorReply, ApiError>>, ApiError> {
    let address = crate::auth::client_key(address);
    let first = sluice.status(&room, &src, false).await?;
    let visitor = VisitorId::parse_hex(&first.visitor_id).expect("the reply names its visitor");
    let held = {
        let w = &sluice.watches;
        let mut open = w.open.lock().expect("watch lock");
        if open.by_address.get(&address).copied().unwrap_or(0) >= w.per_address_max {
            return Err(too_many("this address has"));
        }
        let Ok(slot) = w.slots.clone().try_acquire_owned() else {
            return Err(too_many("this node has"));
        };
        *open.by_address.entry(address).or_insert(0) += 1;
        open.next += 1;
        let (number, replaced) = (open.next, CancellationToken::new());
        let key = (room.clone(), visitor);
        if let Some((_, earlier)) = open
            .by_visitor
            .insert(key.clone(), (number, replaced.clone()))
        {
            earlier.cancel();
        }
        Held {
            watches: sluice.clone(),
            address,
            visitor: key,
            number,
            replaced,
            _slot: slot,
        }
    };
    let st = State {
        presence_every: sluice.presence_every(&room),
        present_at: tokio::time::Instant::now(),
        shutdown: sluice.watches.shutdown.clone(),
        sluice,
        room,
        src,
        pending: Some(first),
        last: None,
        done: false,
        held,
    };
    Ok(futures::stream::unfold(st, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if let Some(r) = st.pending.take() {
                st.last = Some(sent_of(&r));
                st.done = r.state != ReplyState::Waiting;
                return Some((Ok(r), st));
            }
            tokio::select! {
                _ = st.shutdown.cancelled() => return None,
                _ = st.held.replaced.cancelled() => return None,
                _ = tokio::time::sleep(POLL_EVERY) => {}
            }
            if st.present_at.elapsed() >= st.presence_every {
                st.present_at = tokio::time::Instant::now();
                let _ = st.sluice.touch(&st.room, &st.src);
            }
            match st.sluice.status(&st.room, &st.src, false).await {
                Ok(r) => {
                    if st.last.as_ref() != Some(&sent_of(&r)) {
                        st.pending = Some(r);
                    }
                }
                // Leaderless or slow for now: the next poll may do.
                Err(e)
                    if e.status == StatusCode::SERVICE_UNAVAILABLE
                        || e.status == StatusCode::GATEWAY_TIMEOUT => {}
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
        }
    }))
}
