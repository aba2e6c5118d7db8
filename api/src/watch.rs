//! A visitor's status as a stream of changes: what the HTTP event stream (`/events`) and the
//! gRPC `Visitor/Watch` call send.

use crate::core::{Sluice, TicketSource};
use crate::error::ApiError;
use crate::model::VisitorReply;
use axum::http::StatusCode;
use futures::Stream;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How often an open watch reads the visitor's status from this node's applied state.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// The watches open on this node: at most `limits.event_streams_max`, over both APIs, ended
/// when the node shuts down.
#[derive(Debug)]
pub struct Watches {
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
}

impl Watches {
    /// Room for `max` watches at once, all ended when `shutdown` fires.
    pub fn new(max: usize, shutdown: CancellationToken) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max.max(1))),
            shutdown,
        }
    }
}

/// (state, position, ETA, waiting): what makes a status worth sending again.
type Sent = (String, Option<u64>, Option<u64>, Option<u64>);

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
    /// This watch's slot among the node's.
    _slot: OwnedSemaphorePermit,
}

/// Opens a watch of the visitor `src` names in `room`: its status now, then each change, until
/// it is no longer waiting (the last status sent says what it became), or an error that
/// retrying would not cure, sent as the last item. Refused when the node's watches are all in
/// use (503 `too_many_streams`), or when the status cannot be read now.
pub async fn open(
    sluice: Arc<Sluice>,
    room: String,
    src: TicketSource,
) -> Result<impl Stream<Item = Result<VisitorReply, ApiError>>, ApiError> {
    let Ok(slot) = sluice.watches.slots.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            "this node has as many status streams open as it serves; poll the status instead",
        )
        .retry(5));
    };
    let first = sluice.status(&room, &src, false).await?;
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
        _slot: slot,
    };
    Ok(futures::stream::unfold(st, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if let Some(r) = st.pending.take() {
                st.last = Some((r.state.clone(), r.position, r.eta_secs, r.waiting));
                st.done = r.state != "waiting";
                return Some((Ok(r), st));
            }
            tokio::select! {
                _ = st.shutdown.cancelled() => return None,
                _ = tokio::time::sleep(POLL_EVERY) => {}
            }
            if st.present_at.elapsed() >= st.presence_every {
                st.present_at = tokio::time::Instant::now();
                let _ = st.sluice.touch(&st.room, &st.src);
            }
            match st.sluice.status(&st.room, &st.src, false).await {
                Ok(r) => {
                    if st.last.as_ref()
                        != Some(&(r.state.clone(), r.position, r.eta_secs, r.waiting))
                    {
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
