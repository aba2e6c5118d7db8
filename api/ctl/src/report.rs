//! `sluice ctl report`: a room's report from the ledger, as a table, CSV or the node's JSON.

use super::{human, Node, Output};
use reqwest::Method;
use serde_json::Value;

/// `report`: the node's report of `room` over `from..to` (unix seconds), printed as asked.
pub async fn report(
    node: &Node,
    room: &str,
    from: Option<u64>,
    to: Option<u64>,
    csv: bool,
) -> anyhow::Result<()> {
    let mut q: Vec<(&str, String)> = Vec::new();
    q.extend(from.map(|t| ("from", t.saturating_mul(1000).to_string())));
    q.extend(to.map(|t| ("to", t.saturating_mul(1000).saturating_add(999).to_string())));
    if csv {
        q.push(("format", "csv".into()));
        let path = format!(
            "/v1/rooms/{room}/report?{}",
            serde_urlencoded::to_string(&q)?
        );
        let (_, body) = node.answer(node.request(Method::GET, &path)).await?;
        return super::print_out(&body);
    }
    let path = format!(
        "/v1/rooms/{room}/report?{}",
        serde_urlencoded::to_string(&q)?
    );
    let (_, v) = node.json(node.request(Method::GET, &path)).await?;
    if node.output == Output::Json {
        return super::print_out(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    }
    super::print_out(&render(&v))
}

/// The report for people: the minutes in which anything happened, the totals, and where the
/// figures come from.
pub fn render(v: &Value) -> String {
    let mut t = human::Table::new(&[
        "MINUTE (UTC)",
        "ARRIVED",
        "ADMITTED",
        "ABANDONED",
        "WAIT P50",
        "P90",
        "P99",
        "ESTIMATE RIGHT",
    ]);
    let num = |r: &Value, k: &str| r[k].as_u64().unwrap_or(0);
    let wait = |r: &Value, k: &str| {
        r[k].as_u64()
            .map(super::time::format_duration)
            .unwrap_or_else(|| "-".into())
    };
    let right = |r: &Value| match num(r, "estimates_compared") {
        0 => "-".to_string(),
        n => format!("{}/{n}", num(r, "estimates_right")),
    };
    let row = |t: &mut human::Table, label: String, r: &Value| {
        t.row(vec![
            label,
            num(r, "arrivals").to_string(),
            num(r, "admissions").to_string(),
            num(r, "abandonments").to_string(),
            wait(r, "wait_p50_secs"),
            wait(r, "wait_p90_secs"),
            wait(r, "wait_p99_secs"),
            right(r),
        ]);
    };
    let mut quiet = 0;
    for r in v["minutes"].as_array().into_iter().flatten() {
        if ["arrivals", "admissions", "abandonments"]
            .iter()
            .all(|k| num(r, k) == 0)
        {
            quiet += 1;
            continue;
        }
        let minute = r["minute"].as_str().unwrap_or("-");
        // 2026-12-24T18:05:00.000Z → 2026-12-24 18:05
        let label = minute.get(..16).unwrap_or(minute).replacen('T', " ", 1);
        row(&mut t, label, r);
    }
    row(&mut t, "total".into(), &v["totals"]);
    let mut out = format!(
        "Room {} from {} to {}:\n",
        human::clean(v["room"].as_str().unwrap_or("-")),
        human::clean(v["from"].as_str().unwrap_or("-")),
        human::clean(v["to"].as_str().unwrap_or("-")),
    );
    out.push_str(&t.render());
    if quiet > 0 {
        out.push_str(&format!(
            "({quiet} minutes with nothing happening are not shown.)\n"
        ));
    }
    out.push_str(&format!(
        "(Waits of visitors whose place was taken in the range: {}; estimates compared with the \
node's samples of the last day: {}; {} ledger records, complete from log index {}.)\n",
        num(&v["totals"], "waits_measured"),
        num(&v["totals"], "estimates_compared"),
        num(v, "records"),
        num(v, "complete_from"),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_shows_busy_minutes_and_the_totals() {
        let quiet = json!({"minute": "2026-12-24T18:01:00.000Z", "arrivals": 0, "admissions": 0,
            "abandonments": 0, "waits_measured": 0, "estimates_compared": 0, "estimates_right": 0});
        let busy = json!({"minute": "2026-12-24T18:00:00.000Z", "arrivals": 12, "admissions": 3,
            "abandonments": 1, "waits_measured": 3, "wait_p50_secs": 75, "wait_p90_secs": 130,
            "wait_p99_secs": 130, "estimates_compared": 3, "estimates_right": 2});
        let v = json!({"room": "sale", "from": "a", "to": "b", "minutes": [busy, quiet],
            "totals": {"arrivals": 12, "admissions": 3, "abandonments": 1, "waits_measured": 3,
                "estimates_compared": 3, "estimates_right": 2},
            "records": 16, "complete_from": 1});
        let text = render(&v);
        assert!(text.contains("2026-12-24 18:00"), "{text}");
        assert!(!text.contains("18:01"), "{text}");
        assert!(text.contains("2/3"), "{text}");
        assert!(text.contains("1 minutes with nothing"), "{text}");
        let total = text.lines().find(|l| l.starts_with("total")).unwrap();
        assert!(total.contains("12") && total.contains(" 3 "), "{total}");
    }
}
