//! A visitor's status as a stream of changes: what the HTTP event stream (`/events`) and the
//! gRPC `Visitor/Watch` call send.

use crate::core::{Sluice, TicketSource};
use crate::error::ApiError;
use crate::error::Kind;
use crate::model::{ReplyState, VisitorReply};
use crate::watches::Held;
use futures::Stream;
use sluice_statemachine::{VisitorId, VisitorState, VisitorView, Woken};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often a waiter at `position` is read and, if its place, wait or count moved, sent
/// them: the line moves with every admission, and a stream costs its wakeups, so the front hears
/// each second and the back less often. What the page must show at once does not wait for
/// this: an admission, an ended place or a notice wakes the watch as soon as this node applies
/// it ([`follow_applies`]); a waiter becoming held or provisional is told at the next read.
fn push_every(position: Option<u64>) -> Duration {
    match position.unwrap_or(0) {
        0..1_000 => Duration::from_secs(1),
        1_000..10_000 => Duration::from_secs(2),
        _ => Duration::from_secs(5),
    }
}

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

/// What a waiter's place read now would change of what was sent: nothing, figures that move
/// with the line (sent at the waiter's pace), or what the page must show at once.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    None,
    Figures,
    Urgent,
}

fn change(last: &Sent, view: &VisitorView) -> Change {
    let VisitorState::Waiting {
        position,
        ahead,
        provisional,
        held,
        waiting,
        eta_secs,
        eta_max_secs,
        notice,
        ..
    } = &view.state
    else {
        return Change::Urgent;
    };
    if last.state != ReplyState::Waiting
        || last.notice != *notice
        || last.held != held.then_some(true)
        || last.provisional != provisional.then_some(true)
    {
        return Change::Urgent;
    }
    if last.position != *position
        || last.ahead != *ahead
        || last.eta != (*eta_secs, *eta_max_secs)
        || last.waiting != *waiting
    {
        return Change::Figures;
    }
    Change::None
}

struct State {
    sluice: Arc<Sluice>,
    room: String,
    src: TicketSource,
    shutdown: CancellationToken,
    pending: Option<VisitorReply>,
    last: Option<Sent>,
    sent_at: tokio::time::Instant,
    /// When the visitor's place was last read.
    read_at: tokio::time::Instant,
    done: bool,
    /// The visitor, and the index its replies are at least at (its own writes).
    visitor: VisitorId,
    min_index: u64,
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
    // Whatever this node applied between the read above and the hold is read once more at once.
    held.woken.notify_one();
    let st = State {
        presence_every: sluice.presence_every(&room),
        present_at: tokio::time::Instant::now(),
        shutdown: sluice.watches.shutdown(),
        sluice,
        room,
        src,
        min_index: first.applied_index,
        pending: Some(first),
        last: None,
        sent_at: tokio::time::Instant::now(),
        read_at: tokio::time::Instant::now(),
        done: false,
        visitor,
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
                st.sent_at = tokio::time::Instant::now();
                st.done = r.state != ReplyState::Waiting;
                return Some((Ok(r), st));
            }
            let position = st.last.as_ref().and_then(|l| l.position);
            let next_read = st.read_at + push_every(position);
            let next_presence = st.present_at + st.presence_every;
            tokio::select! {
                _ = st.shutdown.cancelled() => return None,
                _ = st.held.replaced.cancelled() => return None,
                _ = st.held.woken.notified() => {}
                _ = tokio::time::sleep_until(next_read.min(next_presence)) => {}
            }
            st.read_at = tokio::time::Instant::now();
            if st.present_at.elapsed() >= st.presence_every {
                st.present_at = tokio::time::Instant::now();
                let _ = st.sluice.touch(&st.room, &st.src, Some(st.client));
            }
            // Boxed: a read's state is held only while it runs, not by every idle stream.
            if let Some(err) = Box::pin(st.poll()).await {
                st.done = true;
                return Some((Err(err), st));
            }
        }
    }))
}

/// Wakes this node's watches as its applies change their visitors' status at once, until
/// `cancel` fires. Subscribed now: call it before the first watch opens.
pub fn follow_applies(sluice: Arc<Sluice>, cancel: CancellationToken) {
    use tokio::sync::broadcast::error::RecvError;
    let mut woken = sluice.node.woken();
    tokio::spawn(async move {
        loop {
            let batch = tokio::select! {
                _ = cancel.cancelled() => return,
                b = woken.recv() => b,
            };
            match batch {
                Ok(b) => sluice.watches.wake(&b),
                // Fallen behind: whoever was named in what was missed is among everyone.
                Err(RecvError::Lagged(_)) => sluice.watches.wake(&[Woken::All]),
                Err(RecvError::Closed) => return,
            }
        }
    });
}

impl State {
    /// Reads the visitor's place and, if there is something to send now, makes it the pending
    /// reply; an error that ends the watch. A waiter's place is read without its ticket's MAC
    /// and its reply (a ticket issued) built only when sent; a visitor no longer waiting, or a
    /// read that fails, gets the full status read (the admission token, the network counting).
    async fn poll(&mut self) -> Option<ApiError> {
        let last = self.last.as_ref().expect("a watch sends before it polls");
        let read = self.sluice.node.read(|st| {
            st.sm
                .visitor(&self.room, self.visitor)
                .map(|v| (change(last, &v), v))
        });
        if let Ok((Ok((change, view)), index)) = read {
            let due = || self.sent_at.elapsed() >= push_every(last.position);
            match change {
                Change::None => return None,
                Change::Figures if !due() => return None,
                // No longer waiting: the full status below.
                Change::Urgent if !matches!(view.state, VisitorState::Waiting { .. }) => {}
                Change::Figures | Change::Urgent => {
                    self.pending =
                        Some(self.sluice.reply(&self.room, &view, self.min_index, index));
                    return None;
                }
            }
        }
        match self
            .sluice
            .status(&self.room, &self.src, false, Some(self.client))
            .await
        {
            Ok(r) => {
                if self.last.as_ref() != Some(&sent_of(&r)) {
                    self.pending = Some(r);
                }
                None
            }
            // Leaderless or slow for now: the next poll may do.
            Err(e) if e.kind == Kind::Unavailable || e.kind == Kind::Timeout => None,
            Err(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(position: u64, notice: Option<&str>) -> VisitorView {
        VisitorView {
            visitor: VisitorId([7; 16]),
            seq: 1,
            state: VisitorState::Waiting {
                position: Some(position),
                lane: None,
                ahead: Some(position - 1),
                provisional: false,
                held: false,
                waiting: Some(100),
                next_check_secs: 5,
                eta_secs: Some(60),
                eta_max_secs: Some(90),
                last_seen_ms: 0,
                notice: notice.map(str::to_string),
            },
        }
    }

    fn sent(position: u64, notice: Option<&str>) -> Sent {
        Sent {
            state: ReplyState::Waiting,
            position: Some(position),
            ahead: Some(position - 1),
            eta: (Some(60), Some(90)),
            waiting: Some(100),
            provisional: None,
            held: None,
            notice: notice.map(str::to_string),
        }
    }

    #[test]
    fn the_line_moving_is_paced_and_what_the_page_must_show_is_not() {
        assert_eq!(change(&sent(5, None), &waiting(5, None)), Change::None);
        assert_eq!(change(&sent(5, None), &waiting(4, None)), Change::Figures);
        assert_eq!(
            change(&sent(5, None), &waiting(5, Some("soon"))),
            Change::Urgent
        );
        let admitted = VisitorView {
            visitor: VisitorId([7; 16]),
            seq: 1,
            state: VisitorState::Admitted {
                admitted_at_ms: 1,
                last_active_ms: 1,
                expires_at_ms: 2,
            },
        };
        assert_eq!(change(&sent(5, None), &admitted), Change::Urgent);
    }

    #[test]
    fn the_front_of_the_line_hears_more_often_than_the_back() {
        assert!(push_every(Some(1)) < push_every(Some(5_000)));
        assert!(push_every(Some(5_000)) < push_every(Some(50_000)));
        assert!(push_every(None) <= Duration::from_secs(1));
    }
}
