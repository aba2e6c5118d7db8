//! `sluice ctl ledger export` (a room's admission ledger as JSON lines, page after page) and
//! `sluice ctl explain` (the node's explanation of one visitor's place, in sentences).

use super::{human, parse_ago, Node, Output};
use clap::Subcommand;
use reqwest::Method;
use serde_json::Value;
use sluice_ops::cluster::LEDGER_PAGE_MAX;
use sluice_ops::ledger::LedgerRecordBody;
use std::io::Write;

/// Ledger commands.
#[derive(Debug, Subcommand)]
#[command(after_help = "Example:\n  sluice ctl ledger export --room sale > ledger.jsonl")]
pub enum LedgerCmd {
    /// Every record of a room's admission ledger on the node asked, in log order, as JSON
    /// lines (one record per line, as the API gives them, the same with either --output),
    /// written a page at a time. A summary goes to standard error. If a page fails, the lines
    /// already written stay, the exit status is not 0, and the message says how to go on
    /// (--after).
    #[command(
        after_help = "Examples:\n  sluice ctl ledger export --room sale > ledger.jsonl\n  sluice ctl ledger export --room sale --visitor 2b6c523d308efbfd588402d732fd854e --from 24h"
    )]
    Export {
        /// The room's name (a room since deleted too: its records are kept).
        #[arg(long)]
        room: String,
        /// Only this visitor's records (32 hex digits).
        #[arg(long)]
        visitor: Option<String>,
        /// Only from this log time on: a time ago (30m, 24h, 7d), a UTC date and time
        /// (2026-12-24T18:00:00Z, or a date alone), or @unix-seconds.
        #[arg(long, value_parser = parse_ago)]
        from: Option<u64>,
        /// Only up to this log time (as --from).
        #[arg(long, value_parser = parse_ago)]
        to: Option<u64>,
        /// Go on after this record: a page's `next`, as a failed export printed it.
        #[arg(long)]
        after: Option<String>,
        /// Read through everything the cluster has committed, not only what this node has
        /// applied.
        #[arg(long)]
        consistent: bool,
    },
}

/// What a page read ends with.
struct Page {
    next: Option<String>,
    complete_from: u64,
    through: u64,
}

/// A record as one line: as the API wrote it (its fields in the API's order) when this `ctl`
/// knows all its fields, else as it came (fields sorted), so that nothing is lost.
fn line(record: &Value) -> anyhow::Result<String> {
    if let Ok(typed) = serde_json::from_value::<LedgerRecordBody>(record.clone()) {
        if serde_json::to_value(&typed)? == *record {
            return Ok(serde_json::to_string(&typed)?);
        }
    }
    Ok(serde_json::to_string(record)?)
}

/// Writes `text` to standard output; `false` once the reader has gone away (`| head`).
fn write_out(text: &str) -> anyhow::Result<bool> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(anyhow::anyhow!("writing standard output: {e}")),
    }
}

/// One page of `room`'s ledger, its records written as lines; how many, and where it ends.
async fn export_page(
    node: &Node,
    room: &str,
    query: &[(&str, String)],
) -> anyhow::Result<(u64, bool, Page)> {
    let path = format!(
        "/v1/rooms/{room}/ledger?{}",
        serde_urlencoded::to_string(query)?
    );
    let (_, v) = node.json(node.request(Method::GET, &path)).await?;
    let records = v["records"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("{} answered a page without records", node.base))?;
    let mut text = String::new();
    for r in records {
        text.push_str(&line(r)?);
        text.push('\n');
    }
    let open = write_out(&text)?;
    let page = Page {
        next: v["next"].as_str().map(str::to_string),
        complete_from: v["complete_from"].as_u64().unwrap_or(1),
        through: v["through"].as_u64().unwrap_or(0),
    };
    Ok((records.len() as u64, open, page))
}

/// `ledger export`: every page, one after the other, each written before the next is asked
/// for (memory holds one page).
#[allow(clippy::too_many_arguments)]
pub async fn export(
    node: &Node,
    room: &str,
    visitor: Option<String>,
    from: Option<u64>,
    to: Option<u64>,
    mut after: Option<String>,
    consistent: bool,
) -> anyhow::Result<()> {
    let mut fixed: Vec<(&str, String)> = vec![("limit", LEDGER_PAGE_MAX.to_string())];
    fixed.extend(visitor.map(|v| ("visitor", v)));
    fixed.extend(from.map(|t| ("from", t.saturating_mul(1000).to_string())));
    fixed.extend(to.map(|t| ("to", t.saturating_mul(1000).saturating_add(999).to_string())));
    if consistent {
        fixed.push(("consistent", "true".into()));
    }
    let mut written = 0u64;
    let coverage = loop {
        let mut query = fixed.clone();
        query.extend(after.clone().map(|a| ("after", a)));
        // Only the first page waits for the cluster's commit: the rest go on from it.
        if after.is_some() {
            query.retain(|(k, _)| *k != "consistent");
        }
        let (n, open, page) = match export_page(node, room, &query).await {
            Ok(p) => p,
            Err(e) => {
                let resume = match &after {
                    Some(a) => format!("; go on with --after {a}"),
                    None => String::new(),
                };
                return Err(e.context(format!(
                    "exporting the ledger of room {room}: {written} records written{resume}"
                )));
            }
        };
        written += n;
        if !open {
            return Ok(());
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break (page.complete_from, page.through),
        }
    };
    eprintln!(
        "{written} records of room {room} written (this node's records are complete from log index {} through {})",
        coverage.0, coverage.1
    );
    Ok(())
}

/// `explain`: the node's explanation, as sentences for a person or its JSON.
pub async fn explain(node: &Node, room: &str, visitor: &str) -> anyhow::Result<()> {
    let path = format!("/v1/rooms/{room}/visitors/{visitor}/explain");
    let (_, v) = node.json(node.request(Method::GET, &path)).await?;
    if node.output == Output::Json {
        return super::print_out(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    }
    let mut out = format!(
        "Visitor {} in room {} ({}):\n",
        human::clean(v["visitor_id"].as_str().unwrap_or(visitor)),
        human::clean(v["room"].as_str().unwrap_or(room)),
        human::clean(v["state"].as_str().unwrap_or("-")),
    );
    for s in v["sentences"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}\n",
            human::clean(s["text"].as_str().unwrap_or_default())
        ));
    }
    out.push_str(&format!(
        "(from {}'s ledger, complete from log index {} through {}, and its state at index {})\n",
        node.base, v["complete_from"], v["through"], v["applied_index"]
    ));
    super::print_out(&out)
}
