//! Turns the waiting page's words (`i18n/<tag>.toml`, one file per language) into the statics
//! of `src/i18n.rs`, so that a text is checked when the crate is built and costs nothing to look
//! up. A file whose keys differ from English's stops the build, naming the key.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

/// The languages' tags and the names of their statics.
const LANGS: [(&str, &str); 15] = [
    ("en", "EN"),
    ("de", "DE"),
    ("fr", "FR"),
    ("es", "ES"),
    ("it", "IT"),
    ("pt", "PT"),
    ("nl", "NL"),
    ("pl", "PL"),
    ("sv", "SV"),
    ("da", "DA"),
    ("nb", "NB"),
    ("fi", "FI"),
    ("cs", "CS"),
    ("ja", "JA"),
    ("tr", "TR"),
];

/// The tables that are not plain texts, and the keys each may hold (`few` and `many` may be
/// left out: they are then `other`).
const UNITS: [&str; 4] = ["s", "min", "h", "d"];
const PLURAL: [&str; 4] = ["one", "few", "many", "other"];

fn load(dir: &Path, tag: &str) -> toml::Table {
    let path = dir.join(format!("{tag}.toml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("i18n/{tag}.toml: {e}"));
    text.parse()
        .unwrap_or_else(|e| panic!("i18n/{tag}.toml: {e}"))
}

fn text<'a>(t: &'a toml::Table, tag: &str, key: &str) -> &'a str {
    t.get(key)
        .and_then(|v| v.as_str())
        .unwrap_or_else(|| panic!("i18n/{tag}.toml: `{key}` is missing or not a string"))
}

fn table<'a>(t: &'a toml::Table, tag: &str, key: &str) -> &'a toml::Table {
    t.get(key)
        .and_then(|v| v.as_table())
        .unwrap_or_else(|| panic!("i18n/{tag}.toml: `[{key}]` is missing"))
}

fn main() {
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("i18n");
    println!("cargo::rerun-if-changed=i18n");
    let en = load(&dir, "en");
    let plain: BTreeSet<&str> = en
        .iter()
        .filter(|(_, v)| v.is_str())
        .map(|(k, _)| k.as_str())
        .collect();
    let mut out = String::new();
    for (tag, name) in LANGS {
        let t = load(&dir, tag);
        for key in t.keys() {
            let known = plain.contains(key.as_str()) || key == "units" || key == "people_ahead";
            assert!(known, "i18n/{tag}.toml: `{key}` is not a text of en.toml");
        }
        writeln!(out, "static {name}: Texts = Texts {{").unwrap();
        for key in &plain {
            let field = if *key == "continue" { "continue_" } else { key };
            writeln!(out, "    {field}: {:?},", text(&t, tag, key)).unwrap();
        }
        let units = table(&t, tag, "units");
        for key in units.keys() {
            assert!(
                UNITS.contains(&key.as_str()),
                "i18n/{tag}.toml: `units.{key}`?"
            );
        }
        write!(out, "    units: Units {{").unwrap();
        for key in UNITS {
            write!(out, " {key}: {:?},", text(units, tag, key)).unwrap();
        }
        writeln!(out, " }},").unwrap();
        let plural = table(&t, tag, "people_ahead");
        for key in plural.keys() {
            assert!(
                PLURAL.contains(&key.as_str()),
                "i18n/{tag}.toml: `people_ahead.{key}`?"
            );
        }
        let other = text(plural, tag, "other");
        let form = |key: &str| plural.get(key).and_then(|v| v.as_str()).unwrap_or(other);
        writeln!(
            out,
            "    people_ahead: Plural {{ one: {:?}, few: {:?}, many: {:?}, other: {:?} }},",
            text(plural, tag, "one"),
            form("few"),
            form("many"),
            other
        )
        .unwrap();
        writeln!(out, "}};").unwrap();
    }
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("texts.rs");
    std::fs::write(dest, out).unwrap();
}
