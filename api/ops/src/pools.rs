//! Pools: a backend's share of rooms, assigned and released or reported by the pool's traffic
//! (through the one unattributed write path).

use crate::core::{unexpected, Sluice};
use crate::error::ApiError;
use crate::model::*;
use sluice_statemachine::types::validate_name;
use sluice_statemachine::{Command, Outcome, Rejection};

impl Sluice {
    /// Create or reconfigure a pool.
    pub async fn put_pool(&self, pool: &str, body: &PoolBody) -> Result<PoolReply, ApiError> {
        validate_name("pool", pool)?;
        sluice_statemachine::validate_pool(body.room_capacity, body.rooms_max)?;
        match self
            .write(Command::PutPool {
                pool: pool.into(),
                room_capacity: body.room_capacity,
                rooms_max: body.rooms_max,
            })
            .await?
        {
            (Outcome::Pool(v), i) => Ok(PoolReply::new(&v, i)),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// A pool.
    pub async fn get_pool(&self, pool: &str, consistent: bool) -> Result<PoolReply, ApiError> {
        validate_name("pool", pool)?;
        let read = |st: &sluice_raft::SmState| st.sm.pool(pool);
        let (v, i) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        Ok(PoolReply::new(&v.ok_or(Rejection::PoolNotFound)?, i))
    }

    /// Every pool, by name (at most [`POOLS_MAX`](sluice_statemachine::limits::POOLS_MAX)).
    pub fn list_pools(&self) -> Result<Vec<PoolReply>, ApiError> {
        let (pools, i) = self.node.read(|st| st.sm.pools())?;
        Ok(pools.iter().map(|p| PoolReply::new(p, i)).collect())
    }

    /// Deletes a pool (its rooms' counts with it; the rooms themselves are the caller's).
    pub async fn delete_pool(&self, pool: &str) -> Result<u64, ApiError> {
        validate_name("pool", pool)?;
        match self
            .write(Command::DeletePool { pool: pool.into() })
            .await?
        {
            (Outcome::PoolDeleted, i) => Ok(i),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Take a place in the first room under capacity (pool traffic: attributed to nobody).
    pub async fn assign(&self, pool: &str) -> Result<AssignReply, ApiError> {
        validate_name("pool", pool)?;
        match self
            .write_as_is(Command::PoolAssign { pool: pool.into() })
            .await?
        {
            (
                Outcome::Assigned {
                    room_index,
                    room,
                    count,
                    total,
                },
                i,
            ) => Ok(AssignReply {
                room,
                room_index,
                count,
                total,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    pub(crate) fn pool_room_index(pool: &str, body: &PoolRoomBody) -> Result<u64, ApiError> {
        match (&body.room_index, &body.room) {
            (Some(i), None) => Ok(*i),
            (None, Some(r)) => r
                .strip_prefix(pool)
                .and_then(|s| s.strip_prefix('-'))
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| ApiError::invalid("room", format!("must be {pool}-<index>"))),
            _ => Err(ApiError::invalid(
                "room_index",
                "give either room_index or room",
            )),
        }
    }

    /// Give a place back, or report a real count (pool traffic: attributed to nobody).
    pub async fn release_or_report(
        &self,
        pool: &str,
        body: &PoolRoomBody,
        report: bool,
    ) -> Result<PoolReply, ApiError> {
        validate_name("pool", pool)?;
        let room_index = Self::pool_room_index(pool, body)?;
        let cmd = if report {
            let count = body
                .count
                .ok_or_else(|| ApiError::invalid("count", "is required"))?;
            sluice_statemachine::check_pool_report(count)?;
            Command::PoolReport {
                pool: pool.into(),
                room_index,
                count,
            }
        } else {
            Command::PoolRelease {
                pool: pool.into(),
                room_index,
            }
        };
        match self.write_as_is(cmd).await? {
            (Outcome::Pool(v), i) => Ok(PoolReply::new(&v, i)),
            (o, _) => Err(unexpected(o)),
        }
    }
}
