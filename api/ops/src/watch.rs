//! A visitor's status as a stream of changes: what the HTTP event stream (`/events`) and the
//! gRPC `Visitor/Watch` call send.

use crate::core::{Sluice, TicketSource};
use crate::error::ApiError;
use crate::error::Kind;
use crate::model::{ReplyState, VisitorReply};
use crate::watches::Held;
use futures::Stream;
use sluice_statemachine::VisitorId;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often an open watch reads the visitor's status from this node's applied state.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// What makes a status worth sending again: everything the waiting page shows of it.
#[derive(PartialEq)]
struct Sent {
    state: ReplyState,
    position: Option<u64>,
    ahead: Option<u64>,
    eta: (Option<u64>, Option<u64>),
    waiting: Option<u64>,
    provisional: Option<bool>,
    held: Option<bool>,
    notice: Option<String>,
}

fn sent_of(r: &VisitorReply) -> Sent {
    Sent {
        state: r.state,
        position: r.position,
        ahead: r.ahead,
        eta: (r.eta_secs, r.eta_max_secs),
        waiting: r.waiting,
        provisional: r.provisional,
        held: r.held,
        notice: r.notice.clone(),
    }
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
    /// The client's address (a room that counts the networks a session is used from counts it).
    client: IpAddr,
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
    let client = address;
    let address = crate::auth::client_key(address);
    let first = sluice.status(&room, &src, false, Some(client)).await?;
    let visitor = VisitorId::parse_hex(&first.visitor_id).expect("the reply names its visitor");
    let held = sluice.watches.hold(address, &room, visitor)?;
    let st = State {
        presence_every: sluice.presence_every(&room),
        present_at: tokio::time::Instant::now(),
        shutdown: sluice.watches.shutdown(),
        sluice,
        room,
        src,
        pending: Some(first),
        last: None,
        done: false,
        held,
        client,
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
                let _ = st.sluice.touch(&st.room, &st.src, Some(st.client));
            }
            match st
                .sluice
                .status(&st.room, &st.src, false, Some(st.client))
                .await
            {
                Ok(r) => {
                    if st.last.as_ref() != Some(&sent_of(&r)) {
                        st.pending = Some(r);
                    }
                }
                // Leaderless or slow for now: the next poll may do.
                Err(e) if e.kind == Kind::Unavailable || e.kind == Kind::Timeout => {}
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
        }
    }))
}
