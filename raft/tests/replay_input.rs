//! `replay` never panics on its input. An archive may come from anywhere (a copy made by hand, a
//! disk gone bad, someone who forged it): whatever its files hold, truncated, corrupted, forged
//! with a correct checksum, with terms that go down, log times near `u64::MAX` or lengths of
//! 2^40, the replay answers with a report or an error, quickly and in bounded memory.

use proptest::prelude::*;
use sluice_raft::archive::{
    replay, ArchivedEntry, Checkpoint, Frame, ReplayOptions, SegmentHeader,
};
use sluice_statemachine::draw::DrawKey;
use sluice_statemachine::ledger::Record;
use sluice_statemachine::limits::INSTANT_MS_MAX;
use sluice_statemachine::{
    digest_hex, Command, Mode, Proposal, RoomConfig, StateMachine, VisitorId,
};
use std::io::Write;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const T0: u64 = 1_800_000_000_000;
const KEY: DrawKey = DrawKey([7; 32]);
/// The archive's segments, by their entries.
const RANGES: [(u64, u64); 2] = [(1, 12), (13, 24)];
const CHECKPOINT_AT: u64 = 12;
/// Longest one replay of this small archive may take, whatever it holds.
const REPLAY_TIME_MAX: Duration = Duration::from_secs(20);

/// A lottery room's short history, as a node applies it: the entries, the records they made, and
/// the checkpoint at [`CHECKPOINT_AT`].
struct History {
    entries: Vec<ArchivedEntry>,
    records: Vec<Record>,
    checkpoint: Checkpoint,
}

fn history() -> &'static History {
    static H: OnceLock<History> = OnceLock::new();
    H.get_or_init(|| {
        let mut sm = StateMachine::new();
        sm.set_draw_key(KEY);
        sm.keep_ledger(true);
        let (mut entries, mut records, mut checkpoint) = (Vec::new(), Vec::new(), None);
        let last = RANGES[RANGES.len() - 1].1;
        for i in 1..=last {
            let cmd = match i {
                1 => Command::CreateRoom {
                    room: "lot".into(),
                    config: RoomConfig {
                        mode: Mode::Lottery,
                        capacity: 1_000,
                        admit_per_minute: 60,
                        admit_burst: 1,
                        ..RoomConfig::default()
                    },
                },
                i if i == last => Command::SetMode {
                    room: "lot".into(),
                    mode: Mode::Fifo,
                },
                i if i % 3 == 0 => Command::Tick,
                i => Command::Join {
                    room: "lot".into(),
                    visitor: VisitorId::from_u128(i as u128),
                },
            };
            // A blank entry (a new leader's) now and then.
            if i % 7 == 0 {
                sm.apply_empty(2, i);
                entries.push(ArchivedEntry {
                    index: i,
                    term: 2,
                    proposal: None,
                });
            } else {
                let proposal = Proposal {
                    time_ms: T0 + i * 1_000,
                    commands: vec![cmd],
                };
                sm.apply(2, i, &proposal);
                entries.push(ArchivedEntry {
                    index: i,
                    term: 2,
                    proposal: Some(proposal.encode()),
                });
            }
            records.extend(sm.take_ledger());
            if i == CHECKPOINT_AT {
                let chain = sm.ledger_chain();
                checkpoint = Some(Checkpoint {
                    index: i,
                    digest: digest_hex(&sm.digest()),
                    ledger_count: chain.count,
                    ledger_chain: digest_hex(&chain.hash),
                });
            }
        }
        History {
            entries,
            records,
            checkpoint: checkpoint.expect("a checkpoint"),
        }
    })
}

/// One segment, described before it is encoded.
#[derive(Clone, Debug)]
struct Seg {
    /// File name's range.
    name: (u64, u64),
    v1: bool,
    entries: Vec<ArchivedEntry>,
    records: Vec<Record>,
    /// Header fields replaced (by [`Mutation::Header`]'s numbering).
    header: Vec<(u8, u64)>,
    /// Edits of the inflated body (before compression; the checksum stays right).
    inflated: Vec<(usize, Vec<u8>)>,
    /// Frames whose length prefix is replaced (version 2).
    frame_lens: Vec<(usize, u32)>,
    /// Edits of the compressed body (the checksum stays right: the inflater sees garbage).
    compressed: Vec<(usize, Vec<u8>)>,
    /// Bit flips in the file as stored (the checksum then disagrees, unless in the header).
    flips: Vec<(usize, u8)>,
    /// Where the file is cut.
    truncate: Option<usize>,
}

fn segments() -> Vec<Seg> {
    let h = history();
    RANGES
        .iter()
        .map(|&(a, b)| Seg {
            name: (a, b),
            v1: false,
            entries: h
                .entries
                .iter()
                .filter(|e| (a..=b).contains(&e.index))
                .cloned()
                .collect(),
            records: h
                .records
                .iter()
                .filter(|r| (a..=b).contains(&r.index))
                .cloned()
                .collect(),
            header: Vec::new(),
            inflated: Vec::new(),
            frame_lens: Vec::new(),
            compressed: Vec::new(),
            flips: Vec::new(),
            truncate: None,
        })
        .collect()
}

/// `bytes` written over `to` at `at` (wrapped into its length; nothing if it is empty).
fn overwrite(to: &mut [u8], at: usize, bytes: &[u8]) {
    if to.is_empty() {
        return;
    }
    let start = at % to.len();
    for (i, b) in bytes.iter().enumerate() {
        if let Some(slot) = to.get_mut(start + i) {
            *slot = *b;
        }
    }
}

fn deflate(plain: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(plain).unwrap();
    z.finish().unwrap()
}

/// A segment file as a node writes one (`SLAR`, version, header length, header, body), with a
/// correct checksum of whatever body it is given.
fn assemble(version: u8, header: &SegmentHeader, body: &[u8]) -> Vec<u8> {
    let h = postcard::to_allocvec(header).unwrap();
    let mut out = b"SLAR".to_vec();
    out.push(version);
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(body);
    out
}

impl Seg {
    fn encode(&self) -> Vec<u8> {
        // The inflated body: frames (each entry, then the records of its index), or version 1's
        // (all entries, all records).
        let mut plain = Vec::new();
        if self.v1 {
            plain = postcard::to_allocvec(&(&self.entries, &self.records)).unwrap();
        } else {
            let mut starts = Vec::new();
            let mut records = self.records.iter().peekable();
            let mut put = |f: Frame, plain: &mut Vec<u8>| {
                let b = postcard::to_allocvec(&f).unwrap();
                starts.push(plain.len());
                plain.extend_from_slice(&(b.len() as u32).to_le_bytes());
                plain.extend_from_slice(&b);
            };
            for e in &self.entries {
                while let Some(r) = records.next_if(|r| r.index < e.index) {
                    put(Frame::Record(r.clone()), &mut plain);
                }
                let index = e.index;
                put(Frame::Entry(e.clone()), &mut plain);
                while let Some(r) = records.next_if(|r| r.index == index) {
                    put(Frame::Record(r.clone()), &mut plain);
                }
            }
            for r in records {
                put(Frame::Record(r.clone()), &mut plain);
            }
            for &(frame, len) in &self.frame_lens {
                if !starts.is_empty() {
                    let at = starts[frame % starts.len()];
                    plain[at..at + 4].copy_from_slice(&len.to_le_bytes());
                }
            }
        }
        for (at, bytes) in &self.inflated {
            overwrite(&mut plain, *at, bytes);
        }
        let mut body = deflate(&plain);
        for (at, bytes) in &self.compressed {
            overwrite(&mut body, *at, bytes);
        }
        let mut header = SegmentHeader {
            first: self.entries.first().map_or(0, |e| e.index),
            last: self.entries.last().map_or(0, |e| e.index),
            entries: self.entries.len() as u64,
            records: self.records.len() as u64,
            records_from: self.name.0,
            body_len: body.len() as u64,
            body_blake3: *blake3::hash(&body).as_bytes(),
        };
        for &(field, value) in &self.header {
            match field % 6 {
                0 => header.first = value,
                1 => header.last = value,
                2 => header.entries = value,
                3 => header.records = value,
                4 => header.records_from = value,
                _ => header.body_len = value,
            }
        }
        let mut file = assemble(if self.v1 { 1 } else { 2 }, &header, &body);
        for &(at, mask) in &self.flips {
            let n = file.len();
            file[at % n] ^= mask;
        }
        if let Some(at) = self.truncate {
            file.truncate(at % (file.len() + 1));
        }
        file
    }
}

/// What is done to the archive.
#[derive(Clone, Debug)]
enum Mutation {
    /// Segment `seg` written as version 1, as earlier nodes wrote it.
    V1 { seg: usize },
    /// Entry `at`'s term (forged, with a correct checksum).
    Term { at: usize, term: u64 },
    /// Entry `at`'s index.
    Index { at: usize, index: u64 },
    /// Entry `at`'s proposal stamped with log time `time`.
    Time { at: usize, time: u64 },
    /// Entry `at`'s proposal bytes replaced.
    Proposal { at: usize, bytes: Vec<u8> },
    /// Record `at` dropped.
    DropRecord { at: usize },
    /// A field of a segment's header: first, last, entries, records, records_from, body_len.
    Header { seg: usize, field: u8, value: u64 },
    /// A segment's file name says another range.
    Rename { seg: usize, first: u64, last: u64 },
    /// Bytes of the inflated body replaced (a length prefix, a varint, garbage).
    Inflated {
        seg: usize,
        at: usize,
        bytes: Vec<u8>,
    },
    /// A frame's 4-byte length set to `len` (version 2).
    FrameLen { seg: usize, frame: usize, len: u32 },
    /// Bytes of the compressed body replaced, the checksum made right.
    Compressed {
        seg: usize,
        at: usize,
        bytes: Vec<u8>,
    },
    /// Bits flipped in the stored file.
    Flip { seg: usize, at: usize, mask: u8 },
    /// The stored file cut short.
    Truncate { seg: usize, at: usize },
    /// The first segment replaced by a base snapshot at its last index holding these bytes.
    Base { bytes: Vec<u8> },
    /// `archive.json` says the archive holds entries through `through`.
    Through { through: u64 },
}

/// A postcard varint, as the format's lengths and counts are written.
fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// Numbers at the edges: zero, small, around 2^32 and 2^40, past the year 2400 in ms, and near
/// `u64::MAX`.
fn edgy() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..30u64,
        Just(u64::from(u32::MAX)),
        Just(1u64 << 40),
        (INSTANT_MS_MAX - 2..INSTANT_MS_MAX + 2),
        (u64::MAX - 100..=u64::MAX),
        any::<u64>(),
    ]
}

/// Bytes to write over something: a huge varint (a count or a length), a 4-byte length, or
/// garbage.
fn patch() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        edgy().prop_map(varint),
        edgy().prop_map(|v| (v as u32).to_le_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 1..12),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let seg = 0..RANGES.len();
    let entry = 0..RANGES[RANGES.len() - 1].1 as usize;
    prop_oneof![
        seg.clone().prop_map(|seg| Mutation::V1 { seg }),
        (entry.clone(), edgy()).prop_map(|(at, term)| Mutation::Term { at, term }),
        (entry.clone(), edgy()).prop_map(|(at, index)| Mutation::Index { at, index }),
        (entry.clone(), edgy()).prop_map(|(at, time)| Mutation::Time { at, time }),
        (entry.clone(), patch()).prop_map(|(at, bytes)| Mutation::Proposal { at, bytes }),
        any::<usize>().prop_map(|at| Mutation::DropRecord { at }),
        (seg.clone(), 0..6u8, edgy()).prop_map(|(seg, field, value)| Mutation::Header {
            seg,
            field,
            value
        }),
        (seg.clone(), edgy(), edgy()).prop_map(|(seg, first, last)| Mutation::Rename {
            seg,
            first,
            last
        }),
        (seg.clone(), any::<usize>(), patch())
            .prop_map(|(seg, at, bytes)| { Mutation::Inflated { seg, at, bytes } }),
        (
            seg.clone(),
            any::<usize>(),
            prop_oneof![
                Just(u32::MAX),
                Just(64 << 20),
                Just((64 << 20) + 1),
                0..64u32,
                any::<u32>()
            ]
        )
            .prop_map(|(seg, frame, len)| Mutation::FrameLen { seg, frame, len }),
        (seg.clone(), any::<usize>(), patch())
            .prop_map(|(seg, at, bytes)| { Mutation::Compressed { seg, at, bytes } }),
        (seg.clone(), any::<usize>(), 1..=255u8).prop_map(|(seg, at, mask)| Mutation::Flip {
            seg,
            at,
            mask
        }),
        (seg.clone(), any::<usize>()).prop_map(|(seg, at)| Mutation::Truncate { seg, at }),
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..64),
            // A snapshot file's opening with a header length of 2^32 - 1.
            Just(b"SLRS\x01\xff\xff\xff\xff".to_vec()),
            // A snapshot file whose header is cut short.
            Just(b"SLRS\x01\x00\x00\x01\x00\x00".to_vec()),
        ]
        .prop_map(|bytes| Mutation::Base { bytes }),
        edgy().prop_map(|through| Mutation::Through { through }),
    ]
}

/// The `at`-th entry of the archive (counted across segments), if there is one.
fn entry(segs: &mut [Seg], mut at: usize) -> Option<&mut ArchivedEntry> {
    for s in segs.iter_mut() {
        if at < s.entries.len() {
            return s.entries.get_mut(at);
        }
        at -= s.entries.len();
    }
    None
}

/// Writes the archive, mutated, into `dir`.
fn write_archive(dir: &Path, mutations: &[Mutation]) {
    let mut segs = segments();
    let mut through = RANGES[RANGES.len() - 1].1;
    let mut base = None;
    for m in mutations {
        match m.clone() {
            Mutation::V1 { seg } => segs[seg].v1 = true,
            Mutation::Term { at, term } => {
                if let Some(e) = entry(&mut segs, at) {
                    e.term = term;
                }
            }
            Mutation::Index { at, index } => {
                if let Some(e) = entry(&mut segs, at) {
                    e.index = index;
                }
            }
            Mutation::Time { at, time } => {
                if let Some(e) = entry(&mut segs, at) {
                    let mut p = match &e.proposal {
                        Some(p) => match Proposal::decode(p) {
                            Ok(p) => p,
                            // An earlier mutation already overwrote this proposal's bytes.
                            Err(_) => continue,
                        },
                        None => Proposal {
                            time_ms: 0,
                            commands: vec![Command::Tick],
                        },
                    };
                    p.time_ms = time;
                    e.proposal = Some(p.encode());
                }
            }
            Mutation::Proposal { at, bytes } => {
                if let Some(e) = entry(&mut segs, at) {
                    // Over the proposal's opening (its version, time and count), or in place of
                    // it.
                    let mut p = e.proposal.clone().unwrap_or_default();
                    if p.len() < 2 {
                        p = bytes;
                    } else {
                        overwrite(&mut p[1..], 0, &bytes);
                    }
                    e.proposal = Some(p);
                }
            }
            Mutation::DropRecord { at } => {
                let n: usize = segs.iter().map(|s| s.records.len()).sum();
                let mut at = at % n.max(1);
                for s in segs.iter_mut() {
                    if at < s.records.len() {
                        s.records.remove(at);
                        break;
                    }
                    at -= s.records.len();
                }
            }
            Mutation::Header { seg, field, value } => segs[seg].header.push((field, value)),
            Mutation::Rename { seg, first, last } => segs[seg].name = (first, last),
            Mutation::Inflated { seg, at, bytes } => segs[seg].inflated.push((at, bytes)),
            Mutation::FrameLen { seg, frame, len } => segs[seg].frame_lens.push((frame, len)),
            Mutation::Compressed { seg, at, bytes } => segs[seg].compressed.push((at, bytes)),
            Mutation::Flip { seg, at, mask } => segs[seg].flips.push((at, mask)),
            Mutation::Truncate { seg, at } => segs[seg].truncate = Some(at),
            Mutation::Base { bytes } => base = Some(bytes),
            Mutation::Through { through: t } => through = t,
        }
    }
    if let Some(bytes) = base {
        let dropped = segs.remove(0);
        std::fs::write(dir.join(format!("base-{:020}.bin", dropped.name.1)), bytes).unwrap();
    }
    for s in &segs {
        let (a, b) = s.name;
        std::fs::write(dir.join(format!("seg-{a:020}-{b:020}.slar")), s.encode()).unwrap();
    }
    std::fs::write(
        dir.join(format!("chk-{CHECKPOINT_AT:020}.json")),
        serde_json::to_vec(&history().checkpoint).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("archive.json"),
        format!("{{\"archived_through\":{through},\"last_base\":null}}"),
    )
    .unwrap();
}

fn opts() -> ReplayOptions {
    ReplayOptions {
        key: KEY,
        ..ReplayOptions::default()
    }
}

/// The process's peak resident memory so far, in bytes.
fn peak_rss() -> u64 {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).unwrap();
    // Kilobytes on Linux.
    usage.max_rss() as u64 * 1024
}

/// The archive as written, without mutations, replays clean: the mutations start from a good
/// archive.
#[test]
fn the_unmutated_archive_replays_clean() {
    let dir = tempfile::tempdir().unwrap();
    write_archive(dir.path(), &[]);
    let (report, _) = replay(dir.path(), &opts()).unwrap();
    assert!(report.ok(), "{:?}", report.mismatches);
    assert_eq!((report.entries, report.checkpoints), (24, 1), "{report:?}");
    // And as version 1, both segments.
    let dir = tempfile::tempdir().unwrap();
    write_archive(
        dir.path(),
        &[Mutation::V1 { seg: 0 }, Mutation::V1 { seg: 1 }],
    );
    let (report, _) = replay(dir.path(), &opts()).unwrap();
    assert!(report.ok(), "{:?}", report.mismatches);
    assert_eq!(report.entries, 24);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        // A failure is shrunk, but not for long.
        max_shrink_iters: 512,
        ..ProptestConfig::default()
    })]

    /// Whatever is done to the archive, the replay returns (a report or an error), never
    /// panics, and soon.
    #[test]
    fn replay_never_panics_on_a_mutated_archive(
        mutations in prop::collection::vec(mutation(), 1..4)
    ) {
        let dir = tempfile::tempdir().unwrap();
        write_archive(dir.path(), &mutations);
        let started = Instant::now();
        let got = replay(dir.path(), &opts());
        let took = started.elapsed();
        prop_assert!(took < REPLAY_TIME_MAX, "took {took:?}");
        // An error says what is wrong: never an empty message.
        if let Err(e) = &got {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

/// Forged lengths of 2^40 (a version 1 entry's proposal, its count of entries) and a version 2
/// frame of 4 GiB are errors at once, that name what is wrong; and a version 1 body that goes on
/// past its records is refused without inflating it.
#[test]
fn forged_lengths_are_errors_at_once_in_bounded_memory() {
    let check = |what: &str, body: Vec<u8>, version: u8, entries: u64, want: &str| {
        let dir = tempfile::tempdir().unwrap();
        let header = SegmentHeader {
            first: 1,
            last: entries,
            entries,
            records: 0,
            records_from: 1,
            body_len: body.len() as u64,
            body_blake3: *blake3::hash(&body).as_bytes(),
        };
        std::fs::write(
            dir.path().join(format!("seg-{:020}-{entries:020}.slar", 1)),
            assemble(version, &header, &body),
        )
        .unwrap();
        let started = Instant::now();
        let (report, _) = replay(dir.path(), &opts()).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: took {:?}",
            started.elapsed()
        );
        assert!(
            report
                .mismatches
                .first()
                .is_some_and(|m| m.contains("seg-") && m.contains(want)),
            "{what}: {:?}",
            report.mismatches
        );
    };
    // Version 1: one entry whose proposal says it is 2^40 bytes long, then 1.5 GiB of zeros (a
    // body of 1.5 MiB, which a reader that inflated it whole would hold whole). The reader
    // holds at most one value's bytes.
    let mut opening = varint(1);
    opening.extend_from_slice(&[1, 2, 1]); // index 1, term 2, Some
    opening.extend(varint(1 << 40));
    let bomb = {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&opening).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..1_536 {
            z.write_all(&zeros).unwrap();
        }
        z.finish().unwrap()
    };
    check(
        "v1 proposal of 2^40 bytes",
        bomb,
        1,
        1,
        "larger than 67108864 bytes",
    );
    // Version 1: a count of 2^40 entries where the header says one.
    let mut plain = varint(1 << 40);
    plain.extend_from_slice(&[1, 2, 0, 0]);
    check(
        "v1 count of 2^40",
        deflate(&plain),
        1,
        1,
        "holds 1099511627776 entries",
    );
    // Version 1: a well-formed body followed by 64 MiB of zeros.
    let mut plain = postcard::to_allocvec(&(
        vec![ArchivedEntry {
            index: 1,
            term: 2,
            proposal: None,
        }],
        Vec::<Record>::new(),
    ))
    .unwrap();
    plain.resize(plain.len() + (64 << 20), 0);
    check(
        "v1 trailing bytes",
        deflate(&plain),
        1,
        1,
        "bytes follow the last record",
    );
    // Version 2: a frame of 4 GiB, and one of 2^26 bytes in a body that holds 8.
    let mut plain = u32::MAX.to_le_bytes().to_vec();
    plain.extend_from_slice(&[0; 8]);
    check(
        "v2 frame of 4 GiB",
        deflate(&plain),
        2,
        1,
        "a frame of 4294967295 bytes",
    );
    let mut plain = (64u32 << 20).to_le_bytes().to_vec();
    plain.extend_from_slice(&[0; 8]);
    check(
        "v2 frame longer than the body",
        deflate(&plain),
        2,
        1,
        "truncated frame 0 at byte 0",
    );
    // None of it took more than a few hundred MiB (the version 1 body above inflates to 1.5 GiB,
    // which the reader never holds whole).
    assert!(peak_rss() < 1 << 30, "peak {} MiB", peak_rss() >> 20);
}

/// An archive whose terms go down, or whose log time is near `u64::MAX`, is refused before the
/// state machine sees it (it asserts entries come in order), with an error that names the segment
/// and the entry.
#[test]
fn entries_out_of_order_or_past_any_clock_are_errors_not_panics() {
    let cases = [
        (
            vec![Mutation::Term { at: 15, term: 1 }],
            "entry 16 of term 1 comes after entry 15 of term 2",
        ),
        (
            vec![Mutation::Time {
                at: 4,
                time: u64::MAX,
            }],
            "entry 5: its log time 18446744073709551615 ms is past",
        ),
        (
            vec![Mutation::Time {
                at: 4,
                time: u64::MAX - 1_000,
            }],
            "entry 5: its log time",
        ),
    ];
    for (mutations, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        write_archive(dir.path(), &mutations);
        let err = replay(dir.path(), &opts())
            .map(|r| r.0)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("seg-") && err.contains(want),
            "{mutations:?}: {err}"
        );
    }
    // Terms that go down across segments, checksums and all right: the second segment's first
    // entry.
    let dir = tempfile::tempdir().unwrap();
    write_archive(
        dir.path(),
        &[
            Mutation::Term { at: 12, term: 1 },
            Mutation::Term { at: 13, term: 1 },
        ],
    );
    let err = replay(dir.path(), &opts())
        .map(|r| r.0)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("entry 13 of term 1 comes after entry 12 of term 2"),
        "{err}"
    );
}
