//! The crates' layering, as their manifests state it: a crate can name only what its
//! `[dependencies]` list, so the rule "the edges speak to the operations, never to consensus"
//! is kept by the compiler once the manifests say it. This test keeps the manifests saying it.

use std::collections::BTreeSet;
use std::path::Path;

/// Each of the project's crates, where it lives, and the project's crates it may depend on
/// (normal and build dependencies; dev-dependencies are the tests' business).
const LAYERS: [(&str, &str, &[&str]); 11] = [
    ("sluice-statemachine", "statemachine", &[]),
    ("sluice-gate", "raft/gate", &[]),
    (
        "sluice-raft",
        "raft",
        &["sluice-statemachine", "sluice-gate"],
    ),
    (
        "sluice-ops",
        "api/ops",
        &["sluice-statemachine", "sluice-raft", "sluice-gate"],
    ),
    (
        "sluice-web",
        "api/web",
        &["sluice-statemachine", "sluice-ops", "sluice-gate"],
    ),
    (
        "sluice-grpc",
        "api/grpc",
        &["sluice-statemachine", "sluice-ops", "sluice-gate"],
    ),
    ("sluice-ctl", "api/ctl", &["sluice-ops"]),
    (
        "sluice-api",
        "api",
        &[
            "sluice-statemachine",
            "sluice-raft",
            "sluice-gate",
            "sluice-ops",
            "sluice-web",
            "sluice-grpc",
            "sluice-ctl",
        ],
    ),
    ("sluice-testkit", "testkit", &[]),
    (
        "sluice-jepsen",
        "jepsen",
        &["sluice-statemachine", "sluice-testkit"],
    ),
    (
        "sluice-cluster-sim",
        "cluster-sim",
        &["sluice-statemachine", "sluice-raft", "sluice-jepsen"],
    ),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The project's crates `dir`'s manifest depends on (normal and build dependencies), and its
/// package name.
fn manifest(dir: &str) -> (String, BTreeSet<String>) {
    let text = std::fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
    let m: toml::Table = text.parse().unwrap();
    let name = m["package"]["name"].as_str().unwrap().to_string();
    let mut deps = BTreeSet::new();
    for section in ["dependencies", "build-dependencies"] {
        if let Some(t) = m.get(section).and_then(|d| d.as_table()) {
            deps.extend(t.keys().filter(|k| k.starts_with("sluice-")).cloned());
        }
    }
    (name, deps)
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    for (name, dir, allowed) in LAYERS {
        let (package, deps) = manifest(dir);
        assert_eq!(package, name, "{dir}/Cargo.toml");
        let extra: Vec<_> = deps
            .iter()
            .filter(|d| !allowed.contains(&d.as_str()))
            .collect();
        assert!(
            extra.is_empty(),
            "{name} depends on {extra:?}, outside its layer"
        );
    }
}

#[test]
fn only_the_operations_and_the_binary_name_the_raft_crate() {
    for (name, dir, _) in LAYERS {
        let (_, deps) = manifest(dir);
        let may = matches!(name, "sluice-ops" | "sluice-api" | "sluice-cluster-sim");
        assert_eq!(deps.contains("sluice-raft"), may, "{name}");
    }
    // The edges in particular.
    for dir in ["api/web", "api/grpc", "api/ctl"] {
        assert!(!manifest(dir).1.contains("sluice-raft"), "{dir}");
    }
}

#[test]
fn every_workspace_member_is_placed_in_a_layer() {
    let text = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let m: toml::Table = text.parse().unwrap();
    let members: BTreeSet<&str> = m["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let placed: BTreeSet<&str> = LAYERS.iter().map(|(_, dir, _)| *dir).collect();
    assert_eq!(members, placed);
}

/// The Raft crate's modules are public only under its `test-support` feature; no crate's
/// normal or build dependencies may switch it on (its own tests and other crates' tests may).
#[test]
fn no_crate_builds_against_the_raft_crates_internals() {
    for (name, dir, _) in LAYERS {
        let text = std::fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
        let m: toml::Table = text.parse().unwrap();
        for section in ["dependencies", "build-dependencies"] {
            let Some(raft) = m.get(section).and_then(|d| d.get("sluice-raft")) else {
                continue;
            };
            let features = raft.get("features").and_then(|f| f.as_array());
            let internal = features
                .into_iter()
                .flatten()
                .any(|f| f.as_str() == Some("test-support"));
            assert!(
                !internal,
                "{name}'s [{section}] opens sluice-raft's internals"
            );
        }
    }
}
