//! The dashboard's forms: fields that show the operator's own input again after an error,
//! every error at its field and in one summary at the top, and instants as date-time pickers.
//!
//! Instants: a `datetime-local` picker shows and takes the operator's own time zone. The page's
//! script (`admin.js`) turns the stored instant (`data-unix`) into the browser's local time when
//! the page loads and, on submit, writes the picked instant as unix seconds into the hidden
//! `{name}.unix` field; without the script the picker's value is read as UTC, as its label says.

use std::cell::RefCell;
use std::collections::BTreeMap;

/// A form's fields, as submitted.
pub type Fields = BTreeMap<String, String>;
/// Errors by field name (`""`: the form's own).
pub type Errors = BTreeMap<String, String>;

/// Reads a submitted form, collecting every field's error instead of stopping at the first.
#[derive(Debug)]
pub struct Reader<'a> {
    f: &'a Fields,
    /// What was wrong, by field.
    pub errors: Errors,
}

impl<'a> Reader<'a> {
    /// A reader of `f`.
    pub fn new(f: &'a Fields) -> Self {
        Reader {
            f,
            errors: Errors::new(),
        }
    }

    /// Records that `name` is wrong (the first error of a field is kept).
    pub fn fail(&mut self, name: &str, why: impl Into<String>) {
        self.errors
            .entry(name.to_string())
            .or_insert_with(|| why.into());
    }

    /// The field, trimmed; `None` when absent or empty.
    pub fn text(&self, name: &str) -> Option<String> {
        self.f
            .get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// Whether a checkbox was ticked.
    pub fn checked(&self, name: &str) -> bool {
        self.f.contains_key(name)
    }

    /// The lines of a text area, trimmed, without empty ones.
    pub fn lines(&self, name: &str) -> Vec<String> {
        self.f
            .get(name)
            .map(|v| {
                v.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A whole number that must be given.
    pub fn num(&mut self, name: &str) -> u64 {
        match self.text(name) {
            None => {
                self.fail(name, "is required");
                0
            }
            Some(v) => v.parse().unwrap_or_else(|_| {
                self.fail(name, "must be a whole number");
                0
            }),
        }
    }

    /// A whole number, or empty (`None`).
    pub fn opt_num(&mut self, name: &str) -> Option<u64> {
        let v = self.text(name)?;
        match v.parse() {
            Ok(n) => Some(n),
            Err(_) => {
                self.fail(name, "must be a whole number, or empty");
                None
            }
        }
    }

    /// A whole number, or `default` when empty.
    pub fn num_or(&mut self, name: &str, default: u64) -> u64 {
        self.opt_num(name).unwrap_or(default)
    }

    /// An instant (unix seconds) from a date-time picker: the browser's own conversion when its
    /// script ran, else the picker's value as UTC; empty is `None`.
    pub fn when(&mut self, name: &str) -> Option<u64> {
        if let Some(unix) = self.text(&format!("{name}.unix")) {
            if let Ok(t) = unix.parse() {
                return Some(t);
            }
        }
        let v = self.text(name)?;
        match parse_instant(&v) {
            Some(t) => Some(t),
            None => {
                self.fail(name, "must be a date and time, 2026-12-24T18:00");
                None
            }
        }
    }
}

/// A field of a dashboard form, as `templates/admin/field.html` shows it.
#[derive(askama::Template)]
#[template(path = "admin/field.html")]
pub struct Field {
    /// The field's name (its id is `f-{name}`).
    name: String,
    /// Its label (constant markup).
    label: &'static str,
    /// What it is for (constant markup), or empty.
    hint: &'static str,
    /// What is wrong with the operator's input.
    error: Option<String>,
    input: Input,
}

/// How a field takes its value, and the value it shows.
enum Input {
    /// An input of `kind` (`text`, `number`, `url`…).
    Text { kind: &'static str, value: String },
    /// A checkbox.
    Check { checked: bool },
    /// A text area.
    Area { value: String },
    /// A choice among `(value, label)` options.
    Select {
        options: &'static [(&'static str, &'static str)],
        current: String,
    },
    /// A date-time picker, and the instant as unix seconds.
    When { value: String, unix: String },
}

/// Every error of a refused form in one list (`templates/admin/errors.html`).
#[derive(askama::Template)]
#[template(path = "admin/errors.html")]
pub struct Summary {
    items: Vec<Problem>,
}

/// An error in the summary.
enum Problem {
    /// At a field of the form, named by its label (tags left out).
    Field {
        name: String,
        label: String,
        error: String,
    },
    /// Of no field on the form (`name` empty: the form's own).
    Other { name: String, error: String },
}

/// Makes fields that show the operator's input again after an error and mark each field's
/// error; remembers each field's label for the summary.
#[derive(Debug)]
pub struct View<'a> {
    errors: &'a Errors,
    submitted: Option<&'a Fields>,
    labels: RefCell<Vec<(String, &'static str)>>,
}

impl<'a> View<'a> {
    /// Fields showing stored values, or `submitted` ones (after an error).
    pub fn new(errors: &'a Errors, submitted: Option<&'a Fields>) -> Self {
        View {
            errors,
            submitted,
            labels: RefCell::new(Vec::new()),
        }
    }

    fn value(&self, name: &str, stored: &str) -> String {
        match self.submitted {
            Some(f) => f.get(name).cloned().unwrap_or_default(),
            None => stored.to_string(),
        }
    }

    fn is_checked(&self, name: &str, stored: bool) -> bool {
        match self.submitted {
            Some(f) => f.contains_key(name),
            None => stored,
        }
    }

    /// The field `name`, its label remembered, with its error if it has one.
    fn field(&self, name: &str, label: &'static str, hint: &'static str, input: Input) -> Field {
        self.labels.borrow_mut().push((name.to_string(), label));
        Field {
            name: name.to_string(),
            label,
            hint,
            error: self.errors.get(name).cloned(),
            input,
        }
    }

    /// A labelled input of `kind` (`text`, `number`, `url`…), with an optional hint.
    pub fn input(
        &self,
        name: &str,
        label: &'static str,
        stored: &str,
        kind: &'static str,
        hint: &'static str,
    ) -> Field {
        let value = self.value(name, stored);
        self.field(name, label, hint, Input::Text { kind, value })
    }

    /// A whole number, or empty.
    pub fn number(
        &self,
        name: &str,
        label: &'static str,
        stored: Option<u64>,
        hint: &'static str,
    ) -> Field {
        let v = stored.map(|n| n.to_string()).unwrap_or_default();
        self.input(name, label, &v, "number", hint)
    }

    /// A checkbox.
    pub fn check(&self, name: &str, label: &'static str, stored: bool) -> Field {
        let checked = self.is_checked(name, stored);
        self.field(name, label, "", Input::Check { checked })
    }

    /// A text area.
    pub fn area(&self, name: &str, label: &'static str, stored: &str, hint: &'static str) -> Field {
        let value = self.value(name, stored);
        self.field(name, label, hint, Input::Area { value })
    }

    /// A choice among `(value, label)` options.
    pub fn select(
        &self,
        name: &str,
        label: &'static str,
        stored: &str,
        options: &'static [(&'static str, &'static str)],
    ) -> Field {
        let current = self.value(name, stored);
        self.field(name, label, "", Input::Select { options, current })
    }

    /// A date-time picker in the operator's time zone (see the module's notes), or empty.
    pub fn when(
        &self,
        name: &str,
        label: &'static str,
        stored: Option<u64>,
        hint: &'static str,
    ) -> Field {
        let (value, unix) = match self.submitted {
            Some(f) => (
                f.get(name).cloned().unwrap_or_default(),
                f.get(&format!("{name}.unix")).cloned().unwrap_or_default(),
            ),
            None => (
                stored.map(picker_utc).unwrap_or_default(),
                stored.map(|t| t.to_string()).unwrap_or_default(),
            ),
        };
        self.field(name, label, hint, Input::When { value, unix })
    }

    /// Every error in one list at the top of the form, each linked to its field, in the
    /// form's order (call after the fields are made); `None` without errors.
    pub fn summary(&self) -> Option<Summary> {
        if self.errors.is_empty() {
            return None;
        }
        let labels = self.labels.borrow();
        let mut items: Vec<Problem> = labels
            .iter()
            .filter_map(|(name, label)| {
                self.errors.get(name).map(|e| Problem::Field {
                    name: name.clone(),
                    label: strip_tags(label),
                    error: e.clone(),
                })
            })
            .collect();
        // Errors of no field on this form (the engine's names for parts of it).
        for (name, e) in self.errors {
            if !labels.iter().any(|(n, _)| n == name) {
                items.push(Problem::Other {
                    name: name.clone(),
                    error: e.clone(),
                });
            }
        }
        Some(Summary { items })
    }
}

fn strip_tags(label: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in label.chars() {
        match c {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => out.push(c),
            _ => {}
        }
    }
    out
}

use sluice_ops::civil::days_from_civil;

pub use sluice_ops::civil::{picker_utc, readable_utc};

/// An instant written as unix seconds, or as `YYYY-MM-DDTHH:MM[:SS][Z]` in UTC (a date-time
/// picker's value, or RFC 3339 in UTC).
pub fn parse_instant(s: &str) -> Option<u64> {
    let s = s.trim();
    if !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok();
    }
    let s = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-');
    let (y, m, day) = (d.next()?, d.next()?, d.next()?);
    if y.len() != 4 || m.len() != 2 || day.len() != 2 {
        return None;
    }
    let (y, m, day): (i64, u32, u32) = (y.parse().ok()?, m.parse().ok()?, day.parse().ok()?);
    let mut t = time.splitn(3, ':');
    let (h, mi) = (t.next()?, t.next()?);
    let sec = t.next().unwrap_or("0");
    if h.len() != 2 || mi.len() != 2 {
        return None;
    }
    let (h, mi, sec): (u64, u64, u64) = (h.parse().ok()?, mi.parse().ok()?, sec.parse().ok()?);
    let days_in_month = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => return None,
    };
    if !(1970..=2400).contains(&y)
        || day == 0
        || day > days_in_month
        || h > 23
        || mi > 59
        || sec > 59
    {
        return None;
    }
    let days = u64::try_from(days_from_civil(y, m, day)).ok()?;
    Some(days * 86_400 + h * 3_600 + mi * 60 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_read_and_write_alike() {
        for t in [0, 951_782_400, 1_767_225_600, 1_798_135_200, 4_102_444_800] {
            assert_eq!(parse_instant(&picker_utc(t)), Some(t - t % 60), "{t}");
        }
        assert_eq!(parse_instant("2026-12-24T18:00"), Some(1_798_135_200));
        assert_eq!(parse_instant("2026-12-24T18:00:30Z"), Some(1_798_135_230));
        assert_eq!(parse_instant("2024-02-29T00:00"), Some(1_709_164_800));
        assert_eq!(parse_instant("1798135200"), Some(1_798_135_200));
        for bad in [
            "",
            "2026-13-01T00:00",
            "2025-02-29T00:00",
            "2026-12-24",
            "2026-12-24T24:00",
            "26-12-24T18:00",
            "2026-12-24T18:60",
            "tomorrow",
            "2026-12-24T18:00+01:00",
        ] {
            assert_eq!(parse_instant(bad), None, "{bad}");
        }
        assert_eq!(readable_utc(1_798_135_200), "2026-12-24 18:00 UTC");
    }

    #[test]
    fn a_reader_collects_every_error_and_a_view_keeps_the_input() {
        let f: Fields = [
            ("capacity", "ten"),
            ("rate", ""),
            ("opens_at", "2026-12-24T18:00"),
            ("closes_at", "2026-12-24T18:00"),
            ("closes_at.unix", "1798138800"),
            ("ttl", "5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let mut r = Reader::new(&f);
        assert_eq!(r.num("capacity"), 0);
        assert_eq!(r.num("rate"), 0);
        assert_eq!(r.opt_num("ttl"), Some(5));
        assert_eq!(r.when("opens_at"), Some(1_798_135_200), "no script: UTC");
        assert_eq!(
            r.when("closes_at"),
            Some(1_798_138_800),
            "the browser's conversion"
        );
        assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
        let v = View::new(&r.errors, Some(&f));
        let html = [
            v.input("capacity", "Capacity", "100", "number", ""),
            v.input("ttl", "TTL <small>s</small>", "60", "number", ""),
        ]
        .map(|f| f.to_string())
        .concat();
        assert!(
            html.contains("value=\"ten\""),
            "the operator's input: {html}"
        );
        assert!(html.contains("value=\"5\""), "{html}");
        assert!(html.contains("aria-invalid=\"true\" aria-describedby=\"err-capacity\""));
        let summary = v.summary().expect("errors").to_string();
        assert!(
            summary.contains("<a href=\"#f-capacity\">Capacity: must be a whole number</a>"),
            "{summary}"
        );
        assert!(
            summary.contains("rate: is required"),
            "a field of no label: {summary}"
        );
        assert!(summary.contains("2 things"), "{summary}");
    }

    #[test]
    fn values_are_escaped() {
        let errors = Errors::new();
        let v = View::new(&errors, None);
        let html = v.input("t", "Title", "\"><script>", "text", "").to_string();
        assert!(!html.contains("<script>"), "{html}");
        assert!(v.summary().is_none());
    }
}
