//! A room's own waiting page (`branding.template`): HTML with placeholders for the page's
//! parts, which the edge renders with `minijinja` in a sandbox.
//!
//! What a template can do is small on purpose, so that what it costs is bounded by its size:
//! show values (`{{ title }}`), choose with `{% if %}` / `{% elif %}` / `{% else %}` (per-language
//! blocks: `{% if lang == "de" %}…{% endif %}`), compare, and change a text's case with the
//! filters `upper`, `lower` and `trim`. It cannot loop, assign, define macros, include or
//! extend other templates, multiply, or reach files or the network (the engine is built
//! without its loader and multi-template support and is given no functions). Every value is
//! HTML-escaped unless it is one of the page's parts, which the edge builds.
//!
//! [`check`] is what the edge asks before a template is stored (replicated with the room's
//! entry policy): it parses, uses only known names, and renders in every language, on the join
//! page and the waiting page, with each part a working page needs exactly once. [`render`]
//! makes a page; it fails (and the edge shows the built-in page) only if the template went
//! over its bounds.

use minijinja::value::Value;
use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The languages a page is rendered in (the tags of the pages' languages): [`check`] renders a
/// template in each.
pub const PAGE_LANGS: [&str; 15] = [
    "cs", "da", "de", "en", "es", "fr", "it", "nl", "nb", "pl", "pt", "fi", "sv", "tr", "ja",
];

/// Most instructions one rendering may run (a template of the largest size, every line a
/// value, takes a few thousand).
const FUEL: u64 = 50_000;

/// Longest page a template may make, in bytes (the built-in page is under 10 KiB).
pub const OUTPUT_BYTES_MAX: usize = 256 * 1024;

/// The statements a template may use.
const STATEMENTS: [&str; 6] = ["if", "elif", "else", "endif", "raw", "endraw"];

/// The page's parts, as the edge builds them (HTML), by their placeholders' names.
#[derive(Clone, Copy, Debug, Default)]
pub struct Parts<'a> {
    /// The operator's notice (`<p id="notice">`, hidden without one, so that a notice set
    /// while the visitor waits appears).
    pub notice: &'a str,
    /// Where the visitor stands: the place, the countdown to the opening, the lane, the people
    /// ahead (and the room's draw commitment and code form, when it has them).
    pub position: &'a str,
    /// The estimated wait, and why there is none when there is not.
    pub estimate: &'a str,
    /// The progress bar, when the page last heard from the node, and the live region that
    /// says what changed.
    pub progress: &'a str,
    /// The language links.
    pub switcher: &'a str,
    /// The form that joins the line (and its proof-of-work progress and code field).
    pub join_form: &'a str,
}

/// Which page a template renders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    /// The page that asks a visitor without a place to join.
    Join,
    /// The page of a visitor in line.
    Wait,
}

impl PageKind {
    fn name(self) -> &'static str {
        match self {
            PageKind::Join => "join",
            PageKind::Wait => "wait",
        }
    }

    /// The parts this page cannot work without (the others are empty on it).
    fn required(self) -> &'static [&'static str] {
        match self {
            PageKind::Join => &["join_form"],
            PageKind::Wait => &["notice", "position", "estimate", "progress"],
        }
    }
}

/// What a template is rendered with besides the parts.
#[derive(Clone, Copy, Debug)]
pub struct PageValues<'a> {
    /// Which page.
    pub kind: PageKind,
    /// The page's language tag (one of [`PAGE_LANGS`]).
    pub lang: &'a str,
    /// The room's name.
    pub room: &'a str,
    /// The page's heading, in its language ("You are in line").
    pub heading: &'a str,
    /// The room's branding.
    pub title: Option<&'a str>,
    /// The room's message.
    pub message: Option<&'a str>,
    /// The room's logo.
    pub logo_url: Option<&'a str>,
}

/// The names a template may use: the values, then the parts.
pub const NAMES: [&str; 13] = [
    "page",
    "lang",
    "room",
    "heading",
    "title",
    "message",
    "logo_url",
    "notice",
    "position",
    "estimate",
    "progress",
    "switcher",
    "join_form",
];

/// Why a template was refused (for the field `branding.template`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

/// An environment holding `source` compiled, as the template `page`.
fn compile(source: &str) -> Result<Environment<'static>, TemplateError> {
    let mut env = Environment::empty();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(32);
    env.add_filter("upper", |s: String| s.to_uppercase());
    env.add_filter("lower", |s: String| s.to_lowercase());
    env.add_filter("trim", |s: String| s.trim().to_string());
    env.add_template_owned("page", source.to_string())
        .map_err(|e| TemplateError(described(&e)))?;
    Ok(env)
}

/// Most compiled templates kept: parsing is most of a rendering's cost (a template of the
/// largest size takes about a millisecond to parse and a tenth of that to render), so pages
/// are rendered from the compiled form, kept by source. Emptied when full.
const COMPILED_MAX: usize = 64;

fn compiled(source: &str) -> Result<Arc<Environment<'static>>, TemplateError> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Environment<'static>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(env) = cache.lock().expect("not poisoned").get(source) {
        return Ok(env.clone());
    }
    let env = Arc::new(compile(source)?);
    let mut c = cache.lock().expect("not poisoned");
    if c.len() >= COMPILED_MAX {
        c.clear();
    }
    c.insert(source.to_string(), env.clone());
    Ok(env)
}

fn context(v: &PageValues<'_>, parts: &Parts<'_>) -> Value {
    let text = |s: Option<&str>| s.map_or(Value::from(()), Value::from);
    let html = |s: &str| Value::from_safe_string(s.to_string());
    let pairs = [
        ("page", Value::from(v.kind.name())),
        ("lang", Value::from(v.lang)),
        ("room", Value::from(v.room)),
        ("heading", Value::from(v.heading)),
        ("title", text(v.title)),
        ("message", text(v.message)),
        ("logo_url", text(v.logo_url)),
        ("notice", html(parts.notice)),
        ("position", html(parts.position)),
        ("estimate", html(parts.estimate)),
        ("progress", html(parts.progress)),
        ("switcher", html(parts.switcher)),
        ("join_form", html(parts.join_form)),
    ];
    let map: std::collections::BTreeMap<Value, Value> = pairs
        .into_iter()
        .map(|(k, v)| (Value::from(k), v))
        .collect();
    Value::from(map)
}

/// A writer that refuses to grow past [`OUTPUT_BYTES_MAX`].
struct Bounded(Vec<u8>);

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > OUTPUT_BYTES_MAX {
            return Err(std::io::Error::other("the page is too long"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn described(e: &minijinja::Error) -> String {
    let what = e
        .detail()
        .map_or_else(|| e.kind().to_string(), str::to_string);
    match e.line() {
        Some(line) => format!("line {line}: {what}"),
        None => what,
    }
}

/// The page `source` makes with `values` and `parts` (the template checked by [`check`]; an
/// error only if it went over its bounds).
pub fn render(
    source: &str,
    values: &PageValues<'_>,
    parts: &Parts<'_>,
) -> Result<String, TemplateError> {
    render_in(&*compiled(source)?, values, parts)
}

fn render_in(
    env: &Environment<'static>,
    values: &PageValues<'_>,
    parts: &Parts<'_>,
) -> Result<String, TemplateError> {
    let t = env
        .get_template("page")
        .map_err(|e| TemplateError(described(&e)))?;
    let mut out = Bounded(Vec::new());
    t.render_captured_to(context(values, parts), &mut out)
        .map_err(|e| TemplateError(described(&e)))?;
    String::from_utf8(out.0).map_err(|_| TemplateError("not UTF-8".into()))
}

/// Whether `source` makes a working page in every language, on both pages: the first reason
/// it does not, else `Ok`.
pub fn check(source: &str) -> Result<(), TemplateError> {
    if source.len() > sluice_statemachine::policy::PAGE_TEMPLATE_BYTES_MAX {
        return Err(TemplateError(format!(
            "at most {} bytes",
            sluice_statemachine::policy::PAGE_TEMPLATE_BYTES_MAX
        )));
    }
    scan(source)?;
    let env = compile(source)?;
    let t = env
        .get_template("page")
        .map_err(|e| TemplateError(described(&e)))?;
    let mut unknown: Vec<String> = t
        .undeclared_variables(false)
        .into_iter()
        .filter(|n| !NAMES.contains(&n.as_str()))
        .collect();
    unknown.sort();
    if let Some(n) = unknown.first() {
        return Err(TemplateError(format!(
            "{n} is not a value a page template has (it has: {})",
            NAMES.join(", ")
        )));
    }
    let marker = |name: &str| format!("<!--sluice:{name}-->");
    let markers: Vec<String> = NAMES[7..].iter().map(|n| marker(n)).collect();
    let parts = Parts {
        notice: &markers[0],
        position: &markers[1],
        estimate: &markers[2],
        progress: &markers[3],
        switcher: &markers[4],
        join_form: &markers[5],
    };
    for kind in [PageKind::Wait, PageKind::Join] {
        for lang in PAGE_LANGS {
            let values = PageValues {
                kind,
                lang,
                room: "room",
                heading: "Heading",
                title: Some("Title"),
                message: Some("Message"),
                logo_url: Some("https://example.com/logo.png"),
            };
            // On each page, the other page's parts are empty.
            let mut shown = parts;
            match kind {
                PageKind::Join => {
                    (shown.notice, shown.position, shown.estimate, shown.progress) =
                        ("", "", "", "")
                }
                PageKind::Wait => shown.join_form = "",
            }
            let html = render_in(&env, &values, &shown)?;
            for name in kind.required() {
                let n = html.matches(&marker(name)).count();
                if n != 1 {
                    return Err(TemplateError(format!(
                        "the {} page in {lang} shows {{{{ {name} }}}} {n} times: it needs it \
                         exactly once, as it is",
                        kind.name()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Refuses what the engine would run but a page template may not: statements other than
/// [`STATEMENTS`], and `*` (repetition) in an expression. Comments and `raw` blocks are text.
fn scan(source: &str) -> Result<(), TemplateError> {
    let b = source.as_bytes();
    let line = |at: usize| source[..at].matches('\n').count() + 1;
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] != b'{' || !matches!(b[i + 1], b'{' | b'%' | b'#') {
            i += 1;
            continue;
        }
        let open = b[i + 1];
        let start = i;
        let close: &[u8] = match open {
            b'{' => b"}}",
            b'%' => b"%}",
            _ => b"#}",
        };
        let end = find_close(b, i + 2, close, open != b'#')
            .ok_or_else(|| TemplateError(format!("line {}: a tag is not closed", line(start))))?;
        let inner = &source[i + 2..end];
        i = end + 2;
        if open == b'#' {
            continue;
        }
        if outside_strings(inner).contains('*') {
            return Err(TemplateError(format!(
                "line {}: `*` is not available in a page template",
                line(start)
            )));
        }
        if open == b'%' {
            let word: String = inner
                .trim_start_matches(['-', '+'])
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !STATEMENTS.contains(&word.as_str()) {
                return Err(TemplateError(format!(
                    "line {}: {{% {word} %}} is not available in a page template (only if, elif, \
                     else and raw)",
                    line(start)
                )));
            }
            if word == "raw" {
                // Up to the `endraw` tag: text, whatever it looks like.
                let rest = &source[i..];
                let at = rest.find("endraw").ok_or_else(|| {
                    TemplateError(format!("line {}: raw is not ended", line(start)))
                })?;
                let after = rest[at..].find("%}").ok_or_else(|| {
                    TemplateError(format!("line {}: raw is not ended", line(start)))
                })?;
                i += at + after + 2;
            }
        }
    }
    Ok(())
}

/// Where `close` ends the tag whose inside starts at `from` (skipping quoted strings when
/// `strings`).
fn find_close(b: &[u8], from: usize, close: &[u8], strings: bool) -> Option<usize> {
    let mut i = from;
    let mut quote = None::<u8>;
    while i < b.len() {
        match quote {
            Some(_) if b[i] == b'\\' => i += 1,
            Some(q) if b[i] == q => quote = None,
            Some(_) => {}
            None if strings && (b[i] == b'"' || b[i] == b'\'') => quote = Some(b[i]),
            None if b[i..].starts_with(close) => return Some(i),
            None => {}
        }
        i += 1;
    }
    None
}

/// `expr` with its quoted strings' contents left out.
fn outside_strings(expr: &str) -> String {
    let mut out = String::new();
    let mut quote = None::<char>;
    let mut escaped = false;
    for c in expr.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "<header>{% if title %}<h1>{{ title }}</h1>{% endif %}</header>\n\
        <p>{% if lang == \"de\" %}Bitte warten{% elif lang == 'fr' %}Patientez{% else %}Please wait{% endif %}</p>\n\
        {{ notice }}{{ position }}{{ estimate }}{{ progress }}{{ join_form }}{{ switcher }}";

    fn values(kind: PageKind, lang: &str) -> PageValues<'_> {
        PageValues {
            kind,
            lang,
            room: "shop",
            heading: "In line",
            title: Some("<Drop> & co"),
            message: None,
            logo_url: None,
        }
    }

    #[test]
    fn a_template_renders_its_parts_and_escapes_values() {
        check(GOOD).unwrap();
        let parts = Parts {
            position: "<p id=\"pos\">4</p>",
            ..Parts::default()
        };
        let html = render(GOOD, &values(PageKind::Wait, "de"), &parts).unwrap();
        assert!(html.contains("<h1>&lt;Drop&gt; &amp; co</h1>"), "{html}");
        assert!(
            html.contains("Bitte warten") && !html.contains("Please"),
            "{html}"
        );
        assert!(html.contains("<p id=\"pos\">4</p>"), "{html}");
        let html = render(GOOD, &values(PageKind::Wait, "ja"), &parts).unwrap();
        assert!(html.contains("Please wait"), "{html}");
    }

    #[test]
    fn templates_that_would_not_make_a_working_page_are_refused() {
        let no_estimate = GOOD.replace("{{ estimate }}", "");
        let twice = GOOD.replace("{{ progress }}", "{{ progress }}{{ progress }}");
        let in_one_language = GOOD.replace(
            "{{ notice }}",
            "{% if lang == \"en\" %}{{ notice }}{% endif %}",
        );
        let changed = GOOD.replace("{{ position }}", "{{ position|upper }}");
        let typo = GOOD.replace("{{ title }}", "{{ titel }}");
        let no_form = GOOD.replace("{{ join_form }}", "");
        for (bad, says) in [
            (no_estimate.as_str(), "estimate"),
            (twice.as_str(), "progress"),
            (in_one_language.as_str(), "notice"),
            (changed.as_str(), "position"),
            (typo.as_str(), "titel"),
            (no_form.as_str(), "join_form"),
            ("{% if %}", "line 1"),
            ("{{ position", "not closed"),
            (
                "ok\n{% for x in room %}{{ x }}{% endfor %}",
                "line 2: {% for %}",
            ),
            ("{% set x = 1 %}", "{% set %}"),
            ("{% include \"x\" %}", "{% include %}"),
            ("{% extends \"x\" %}", "{% extends %}"),
            ("{% macro m() %}{% endmacro %}", "{% macro %}"),
            ("{% filter upper %}x{% endfilter %}", "{% filter %}"),
            ("{{ room * 100000000 }}", "`*`"),
            ("{{ room|center(100000000) }}", ""),
            ("{{ range(10) }}", "range"),
        ] {
            let e = check(bad).expect_err(bad).0;
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = format!(
            "{GOOD}{}",
            " ".repeat(sluice_statemachine::policy::PAGE_TEMPLATE_BYTES_MAX)
        );
        assert!(check(&long).unwrap_err().0.contains("bytes"));
    }

    #[test]
    fn comments_strings_and_raw_blocks_are_text() {
        let t = format!(
            "{{# {{% for x in y %}} 2 * 3 #}}{{% raw %}}{{% for %}} * {{% endraw %}}\
             {{{{ \"a * b }}}}\" }}}}{GOOD}"
        );
        check(&t).unwrap();
        let html = render(&t, &values(PageKind::Join, "en"), &Parts::default()).unwrap();
        assert!(
            html.contains("{% for %} * ") && html.contains("a * b }}"),
            "{html}"
        );
    }

    #[test]
    fn a_page_past_its_bound_is_an_error_not_a_page() {
        let big = "x".repeat(OUTPUT_BYTES_MAX / 2);
        let parts = Parts {
            switcher: &big,
            ..Parts::default()
        };
        let t = format!("{GOOD}{{{{ switcher }}}}{{{{ switcher }}}}");
        assert!(render(&t, &values(PageKind::Wait, "en"), &parts).is_err());
        assert!(render(GOOD, &values(PageKind::Wait, "en"), &parts).is_ok());
    }
}
