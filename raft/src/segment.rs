//! The archive's segment files: entries `first..=last` of the log and the ledger records they
//! made, read back one frame at a time.
//!
//! A segment is `SLAR`, a version byte, a 4-byte big-endian header length, the header
//! ([`SegmentHeader`]: the range, the counts, the body's length and BLAKE3), then the body, a
//! DEFLATE stream:
//! - version 2 (written now): frames in log order, each a 4-byte little-endian length and the
//!   postcard encoding of a [`Frame`]: an entry, then the records it made. A reader holds one
//!   frame at a time, so replaying a segment of a million entries takes a few buffers, not the
//!   whole segment decoded;
//! - version 1 (still read): the postcard encoding of (all entries, all records), decoded whole
//!   and handed out as the same frames.

use serde::{Deserialize, Serialize};
use sluice_statemachine::ledger::Record;
use std::io::{self, BufRead, BufReader, Read, Write};

const SEG_MAGIC: &[u8; 4] = b"SLAR";
const SEG_V1: u8 = 1;
const SEG_V2: u8 = 2;
/// The largest segment body (uncompressed) the reader accepts.
pub const SEGMENT_BODY_MAX: u64 = 4 << 30;
/// The most entries one segment holds (a purge archives at most this many per segment).
pub const SEGMENT_ENTRIES_MAX: u64 = 1_000_000;
/// The largest segment file the reader reads: a body of [`SEGMENT_BODY_MAX`] compressed (DEFLATE
/// adds a few bytes per 64 KiB to what does not compress), and its header.
pub const SEGMENT_FILE_MAX: u64 = SEGMENT_BODY_MAX + (1 << 20);
/// The largest frame the reader accepts: above any entry the log takes (a proposal of the most
/// commands, each of the largest kind) and any record.
pub const FRAME_BYTES_MAX: u32 = 64 << 20;

pub(crate) fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// One archived log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedEntry {
    /// Index.
    pub index: u64,
    /// Term.
    pub term: u64,
    /// The proposal as in the log (`Proposal::encode`); `None` for blank and membership
    /// entries.
    pub proposal: Option<Vec<u8>>,
}

/// A segment's header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentHeader {
    /// First index.
    pub first: u64,
    /// Last index.
    pub last: u64,
    /// Entries (`last - first + 1`).
    pub entries: u64,
    /// Ledger records.
    pub records: u64,
    /// Ledger records are whole from this index on (the node kept none of earlier entries).
    pub records_from: u64,
    /// Compressed body length.
    pub body_len: u64,
    /// BLAKE3 of the compressed body.
    pub body_blake3: [u8; 32],
}

/// What a segment's body holds, in log order: each entry followed by the records it made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Frame {
    /// A log entry.
    Entry(ArchivedEntry),
    /// A ledger record.
    Record(Record),
}

/// Entries and records merged into frames: each entry, then the records of its index; a record
/// of no entry here comes before the first entry after it.
fn frames(
    entries: impl IntoIterator<Item = ArchivedEntry>,
    records: impl IntoIterator<Item = Record>,
) -> impl Iterator<Item = Frame> {
    let mut records = records.into_iter().peekable();
    let mut entries = entries.into_iter().peekable();
    std::iter::from_fn(move || {
        let next_entry = entries.peek().map(|e| e.index);
        match (next_entry, records.peek().map(|r| r.index)) {
            (Some(e), Some(r)) if r < e => records.next().map(Frame::Record),
            (Some(_), _) => entries.next().map(Frame::Entry),
            (None, _) => records.next().map(Frame::Record),
        }
    })
}

/// Encodes a segment file (version 2).
pub fn encode_segment(
    entries: &[ArchivedEntry],
    records: &[Record],
    records_from: u64,
) -> io::Result<Vec<u8>> {
    let (first, last) = match (entries.first(), entries.last()) {
        (Some(f), Some(l)) => (f.index, l.index),
        _ => return Err(bad("an empty segment")),
    };
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut buf = Vec::new();
    for frame in frames(entries.iter().cloned(), records.iter().cloned()) {
        buf.clear();
        buf = postcard::to_extend(&frame, buf).map_err(io::Error::other)?;
        z.write_all(&(buf.len() as u32).to_le_bytes())?;
        z.write_all(&buf)?;
    }
    let body = z.finish()?;
    let (entries, records) = (entries.len() as u64, records.len() as u64);
    with_header(SEG_V2, first, last, entries, records, records_from, body)
}

/// A segment file of `version`: its header (over `first..=last`, counting `entries` and
/// `records`, with `body`'s length and checksum), then `body`.
fn with_header(
    version: u8,
    first: u64,
    last: u64,
    entries: u64,
    records: u64,
    records_from: u64,
    body: Vec<u8>,
) -> io::Result<Vec<u8>> {
    let header = SegmentHeader {
        first,
        last,
        entries,
        records,
        records_from,
        body_len: body.len() as u64,
        body_blake3: *blake3::hash(&body).as_bytes(),
    };
    let h = postcard::to_allocvec(&header).map_err(io::Error::other)?;
    let mut out = Vec::with_capacity(9 + h.len() + body.len());
    out.extend_from_slice(SEG_MAGIC);
    out.push(version);
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(&body);
    Ok(out)
}

/// Longest segment header the reader accepts (a header is a few dozen bytes).
const HEADER_BYTES_MAX: usize = 4 << 10;
/// Bytes read from the inflated body at a time while a version 1 value is incomplete.
const READ_AHEAD: usize = 64 << 10;

/// A segment read frame by frame. The header and the body's checksum are checked when it is
/// opened; the frames (their order, sizes and counts against the header) as they are read.
/// Whatever the file holds, the reader holds at most one frame's bytes at a time (at most
/// `FRAME_BYTES_MAX`) and inflates at most `SEGMENT_BODY_MAX` bytes of body.
pub struct SegmentReader<'a> {
    header: SegmentHeader,
    body: Body<'a>,
    entries: u64,
    records: u64,
    /// Frames read so far (for errors: which frame is wrong).
    frames: u64,
    done: bool,
}

/// The inflated body, read with a bound on its length.
type Inflated<'a> = io::Take<flate2::read::DeflateDecoder<&'a [u8]>>;

fn inflate(body: &[u8]) -> Inflated<'_> {
    flate2::read::DeflateDecoder::new(body).take(SEGMENT_BODY_MAX + 1)
}

enum Body<'a> {
    V1(Box<V1Body<'a>>),
    V2 {
        z: BufReader<Inflated<'a>>,
        buf: Vec<u8>,
        /// Bytes of the inflated body read so far.
        offset: u64,
    },
}

/// Postcard values read one at a time from an inflated body, holding the bytes of at most one
/// value (and never more than [`FRAME_BYTES_MAX`] of them).
struct Values<'a> {
    z: Inflated<'a>,
    buf: Vec<u8>,
    /// Bytes of `buf` already decoded.
    at: usize,
    /// Bytes of the inflated body decoded before `buf[at]`.
    offset: u64,
}

impl<'a> Values<'a> {
    fn new(body: &'a [u8]) -> Self {
        Values {
            z: inflate(body),
            buf: Vec::new(),
            at: 0,
            offset: 0,
        }
    }

    /// The next value, `what` (for errors).
    fn next<T: serde::de::DeserializeOwned>(&mut self, what: &str) -> io::Result<T> {
        loop {
            let held = &self.buf[self.at..];
            match postcard::take_from_bytes::<T>(held) {
                Ok((v, rest)) => {
                    let used = held.len() - rest.len();
                    self.at += used;
                    self.offset += used as u64;
                    return Ok(v);
                }
                // More bytes are needed: read on (doubling, so that a large value is decoded a
                // few times, not once per read), as long as one value may be that large.
                Err(postcard::Error::DeserializeUnexpectedEnd) => {
                    let held = held.len();
                    let max = FRAME_BYTES_MAX as usize;
                    if held > max {
                        return Err(bad(format!(
                            "segment body: {what} at byte {} is larger than {max} bytes",
                            self.offset
                        )));
                    }
                    self.buf.drain(..self.at);
                    self.at = 0;
                    let want = held.max(READ_AHEAD).min(max + 1 - held) as u64;
                    let got = (&mut self.z)
                        .take(want)
                        .read_to_end(&mut self.buf)
                        .map_err(|e| inflating(e, self.offset))?;
                    if got == 0 {
                        return Err(if self.z.limit() == 0 {
                            too_large()
                        } else {
                            bad(format!(
                                "truncated segment body: it ends inside {what} at byte {}",
                                self.offset
                            ))
                        });
                    }
                }
                Err(e) => {
                    return Err(bad(format!(
                        "segment body: {what} at byte {}: {e}",
                        self.offset
                    )))
                }
            }
        }
    }

    /// Checks that nothing follows the last value (without inflating what would).
    fn at_end(&mut self) -> io::Result<()> {
        let mut one = [0u8; 1];
        let more = self
            .z
            .read(&mut one)
            .map_err(|e| inflating(e, self.offset))?;
        if self.at < self.buf.len() || more != 0 {
            return Err(bad(format!(
                "segment body: bytes follow the last record, at byte {}",
                self.offset
            )));
        }
        Ok(())
    }
}

/// An error of the inflater (a body that is not DEFLATE) near byte `at` of what it inflated.
fn inflating(e: io::Error, at: u64) -> io::Error {
    bad(format!("segment body: inflating it after byte {at}: {e}"))
}

fn too_large() -> io::Error {
    bad(format!(
        "segment body too large: it inflates past {SEGMENT_BODY_MAX} bytes"
    ))
}

/// A version 1 body, the postcard encoding of (all entries, all records), read as frames
/// without decoding it whole: the entries from one reader of the body, the records from a
/// second one that first passes over the entries.
struct V1Body<'a> {
    entries: Values<'a>,
    entries_left: u64,
    records: Values<'a>,
    records_left: u64,
    next_entry: Option<ArchivedEntry>,
    next_record: Option<Record>,
}

impl<'a> V1Body<'a> {
    fn new(body: &'a [u8], header: &SegmentHeader) -> io::Result<Self> {
        let mut entries = Values::new(body);
        let mut records = Values::new(body);
        let counts = |n: u64, want: u64, what: &str| {
            if n == want {
                Ok(())
            } else {
                Err(bad(format!(
                    "the segment holds {n} {what}, its header says {want}"
                )))
            }
        };
        let n = entries.next::<u64>("the entries' count")?;
        counts(n, header.entries, "entries")?;
        records.next::<u64>("the entries' count")?;
        for _ in 0..n {
            records.next::<ArchivedEntry>("an entry")?;
        }
        let r = records.next::<u64>("the records' count")?;
        counts(r, header.records, "records")?;
        Ok(V1Body {
            entries,
            entries_left: n,
            records,
            records_left: r,
            next_entry: None,
            next_record: None,
        })
    }

    /// Each entry, then the records of its index, as [`frames`] merges them.
    fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        if self.next_entry.is_none() && self.entries_left > 0 {
            self.entries_left -= 1;
            self.next_entry = Some(self.entries.next("an entry")?);
        }
        if self.next_record.is_none() && self.records_left > 0 {
            self.records_left -= 1;
            self.next_record = Some(self.records.next("a record")?);
        }
        let record_first = match (&self.next_entry, &self.next_record) {
            (Some(e), Some(r)) => r.index < e.index,
            (Some(_), None) => false,
            (None, _) => true,
        };
        let frame = if record_first {
            self.next_record.take().map(Frame::Record)
        } else {
            self.next_entry.take().map(Frame::Entry)
        };
        if frame.is_none() {
            self.records.at_end()?;
        }
        Ok(frame)
    }
}

impl std::fmt::Debug for SegmentReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentReader")
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl<'a> SegmentReader<'a> {
    /// Opens a segment file's bytes: checks the magic, version, header and checksum.
    pub fn new(bytes: &'a [u8]) -> io::Result<Self> {
        let (magic, version, len, rest) = match bytes {
            [m0, m1, m2, m3, v, l0, l1, l2, l3, rest @ ..] => (
                [*m0, *m1, *m2, *m3],
                *v,
                u32::from_be_bytes([*l0, *l1, *l2, *l3]),
                rest,
            ),
            _ => return Err(bad("not an archive segment")),
        };
        if &magic != SEG_MAGIC {
            return Err(bad("not an archive segment"));
        }
        if version != SEG_V1 && version != SEG_V2 {
            return Err(bad(format!("unknown segment version {version}")));
        }
        let len = len as usize;
        if len > HEADER_BYTES_MAX {
            return Err(bad(format!(
                "a segment header of {len} bytes (at most {HEADER_BYTES_MAX})"
            )));
        }
        if rest.len() < len {
            return Err(bad(format!(
                "truncated segment header: {len} bytes, {} in the file",
                rest.len()
            )));
        }
        let (h, body) = rest.split_at(len);
        let header: SegmentHeader =
            postcard::from_bytes(h).map_err(|e| bad(format!("segment header: {e}")))?;
        if body.len() as u64 != header.body_len {
            return Err(bad(format!(
                "segment body is {} bytes, its header says {}",
                body.len(),
                header.body_len
            )));
        }
        if *blake3::hash(body).as_bytes() != header.body_blake3 {
            return Err(bad("the segment's checksum does not match its body"));
        }
        if header.entries == 0 || header.last.checked_sub(header.first) != Some(header.entries - 1)
        {
            return Err(bad(format!(
                "the segment's header does not add up: entries {}..={}, {} of them",
                header.first, header.last, header.entries
            )));
        }
        let body = if version == SEG_V1 {
            Body::V1(Box::new(V1Body::new(body, &header)?))
        } else {
            Body::V2 {
                z: BufReader::with_capacity(256 << 10, inflate(body)),
                buf: Vec::new(),
                offset: 0,
            }
        };
        Ok(SegmentReader {
            header,
            body,
            entries: 0,
            records: 0,
            frames: 0,
            done: false,
        })
    }

    /// The segment's header.
    pub fn header(&self) -> &SegmentHeader {
        &self.header
    }

    fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        let n = self.frames;
        match &mut self.body {
            Body::V1(body) => body.next_frame(),
            Body::V2 { z, buf, offset } => {
                let at = *offset;
                if z.fill_buf().map_err(|e| inflating(e, at))?.is_empty() {
                    if z.get_ref().limit() == 0 {
                        return Err(too_large());
                    }
                    return Ok(None);
                }
                let mut len = [0u8; 4];
                z.read_exact(&mut len).map_err(|e| {
                    bad(format!("truncated frame {n} at byte {at} of the body: {e}"))
                })?;
                let len = u32::from_le_bytes(len);
                if len > FRAME_BYTES_MAX {
                    return Err(bad(format!(
                        "frame {n} at byte {at} of the body: a frame of {len} bytes \
                         (at most {FRAME_BYTES_MAX})"
                    )));
                }
                // Read as it comes, not allocated up front: a length the body does not hold
                // costs only what the body holds.
                buf.clear();
                z.by_ref()
                    .take(u64::from(len))
                    .read_to_end(buf)
                    .map_err(|e| inflating(e, at))?;
                if buf.len() != len as usize {
                    if z.get_ref().limit() == 0 {
                        return Err(too_large());
                    }
                    return Err(bad(format!(
                        "truncated frame {n} at byte {at} of the body: {len} bytes, {} left",
                        buf.len()
                    )));
                }
                *offset += 4 + u64::from(len);
                postcard::from_bytes(buf)
                    .map(Some)
                    .map_err(|e| bad(format!("segment frame {n} at byte {at} of the body: {e}")))
            }
        }
    }

    /// Checks one frame against the header: entries contiguous from `first`, counts within it.
    fn check(&mut self, frame: &Frame) -> io::Result<()> {
        let n = self.frames;
        self.frames += 1;
        match frame {
            Frame::Entry(e) => {
                let want = self.header.first.checked_add(self.entries);
                if self.entries >= self.header.entries || want != Some(e.index) {
                    return Err(bad(format!(
                        "the segment's entries do not match its header: frame {n} is entry {}, \
                         the header says {}..={}",
                        e.index, self.header.first, self.header.last
                    )));
                }
                self.entries += 1;
            }
            Frame::Record(_) => {
                self.records += 1;
                if self.records > self.header.records {
                    return Err(bad(format!(
                        "the segment holds more records than its header says ({}, at frame {n})",
                        self.header.records
                    )));
                }
            }
        }
        Ok(())
    }
}

impl Iterator for SegmentReader<'_> {
    type Item = io::Result<Frame>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let got = self.next_frame().and_then(|f| match f {
            Some(frame) => self.check(&frame).map(|()| Some(frame)),
            None if self.entries != self.header.entries || self.records != self.header.records => {
                Err(bad(format!(
                    "the segment's entries do not match its header: it ends after {} entries \
                     and {} records, the header says {} and {}",
                    self.entries, self.records, self.header.entries, self.header.records
                )))
            }
            None => Ok(None),
        });
        match got {
            Ok(Some(frame)) => Some(Ok(frame)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_statemachine::ledger::Event;
    use sluice_statemachine::VisitorId;

    /// A whole segment, decoded and checked.
    fn decode_segment(
        bytes: &[u8],
    ) -> io::Result<(SegmentHeader, Vec<ArchivedEntry>, Vec<Record>)> {
        let mut reader = SegmentReader::new(bytes)?;
        let (mut entries, mut records) = (Vec::new(), Vec::new());
        for frame in reader.by_ref() {
            match frame? {
                Frame::Entry(e) => entries.push(e),
                Frame::Record(r) => records.push(r),
            }
        }
        Ok((reader.header, entries, records))
    }

    fn entry(index: u64) -> ArchivedEntry {
        ArchivedEntry {
            index,
            term: 3,
            proposal: index.is_multiple_of(2).then(|| vec![index as u8; 5]),
        }
    }

    fn record(index: u64, n: u32) -> Record {
        Record {
            index,
            sub: 0,
            n,
            time_ms: 1_000 + index,
            room: "sale".into(),
            by: None,
            event: Event::Joined {
                visitor: VisitorId::from_u128(u128::from(index)),
                seq: index,
                lane: None,
                position: 1,
            },
        }
    }

    /// Version 1, as earlier nodes wrote it.
    fn encode_v1(entries: &[ArchivedEntry], records: &[Record], from: u64) -> Vec<u8> {
        let plain = postcard::to_allocvec(&(entries, records)).unwrap();
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&plain).unwrap();
        let body = z.finish().unwrap();
        let (first, last) = (entries[0].index, entries.last().unwrap().index);
        let (n, m) = (entries.len() as u64, records.len() as u64);
        with_header(SEG_V1, first, last, n, m, from, body).unwrap()
    }

    fn sample() -> (Vec<ArchivedEntry>, Vec<Record>) {
        let entries: Vec<_> = (10..=20).map(entry).collect();
        // Two records at 10, none at 11, one at 15 and 20; one before the first entry.
        let records = vec![
            record(9, 0),
            record(10, 0),
            record(10, 1),
            record(15, 0),
            record(20, 0),
        ];
        (entries, records)
    }

    #[test]
    fn both_versions_read_back_as_each_entry_followed_by_its_records() {
        let (entries, records) = sample();
        let want: Vec<String> = [
            "r9", "e10", "r10", "r10", "e11", "e12", "e13", "e14", "e15", "r15", "e16", "e17",
            "e18", "e19", "e20", "r20",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for bytes in [
            encode_segment(&entries, &records, 9).unwrap(),
            encode_v1(&entries, &records, 9),
        ] {
            let reader = SegmentReader::new(&bytes).unwrap();
            assert_eq!(reader.header().records_from, 9);
            let got: Vec<String> = reader
                .map(|f| match f.unwrap() {
                    Frame::Entry(e) => format!("e{}", e.index),
                    Frame::Record(r) => format!("r{}", r.index),
                })
                .collect();
            assert_eq!(got, want);
            let (h, e, r) = decode_segment(&bytes).unwrap();
            assert_eq!(
                (h.first, h.last, e, r),
                (10, 20, entries.clone(), records.clone())
            );
        }
    }

    /// A segment whose body is `frames`, with a header that counts `entries` and `records`
    /// over `first..=last` and a correct checksum (what a careless or hostile writer makes).
    fn forged(frames: &[Vec<u8>], first: u64, last: u64, entries: u64, records: u64) -> Vec<u8> {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        for f in frames {
            z.write_all(f).unwrap();
        }
        let body = z.finish().unwrap();
        with_header(SEG_V2, first, last, entries, records, first, body).unwrap()
    }

    fn framed(f: &Frame) -> Vec<u8> {
        let b = postcard::to_allocvec(f).unwrap();
        let mut out = (b.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&b);
        out
    }

    fn error_of(bytes: &[u8]) -> String {
        match SegmentReader::new(bytes) {
            Err(e) => e.to_string(),
            Ok(r) => r
                .filter_map(|f| f.err())
                .map(|e| e.to_string())
                .next()
                .unwrap_or_else(|| "no error".into()),
        }
    }

    #[test]
    fn a_segment_that_does_not_match_its_header_or_bounds_is_refused() {
        let e = |i| framed(&Frame::Entry(entry(i)));
        let r = |i| framed(&Frame::Record(record(i, 0)));
        // Well formed: read whole.
        assert_eq!(
            error_of(&forged(&[e(1), r(1), e(2)], 1, 2, 2, 1)),
            "no error"
        );
        // An entry missing, out of order, repeated, or past the last.
        for (frames, what) in [
            (vec![e(1)], "missing"),
            (vec![e(2), e(1)], "out of order"),
            (vec![e(1), e(1)], "repeated"),
            (vec![e(1), e(2), e(3)], "past the last"),
        ] {
            let msg = error_of(&forged(&frames, 1, 2, 2, 0));
            assert!(msg.contains("entries do not match"), "{what}: {msg}");
        }
        // More records than the header says, or fewer.
        assert!(error_of(&forged(&[e(1), r(1), r(1), e(2)], 1, 2, 2, 1)).contains("more records"));
        assert!(error_of(&forged(&[e(1), e(2)], 1, 2, 2, 1)).contains("do not match"));
        // A frame that claims more bytes than any frame may have, or than the body holds.
        let mut huge = (FRAME_BYTES_MAX + 1).to_le_bytes().to_vec();
        huge.extend_from_slice(&[0; 16]);
        assert!(error_of(&forged(&[e(1), huge], 1, 2, 2, 0)).contains("a frame of"));
        let mut short = 100u32.to_le_bytes().to_vec();
        short.extend_from_slice(&[0; 10]);
        assert!(error_of(&forged(&[e(1), short], 1, 2, 2, 0)).contains("truncated frame"));
        // Bytes that are not a frame.
        let mut junk = 4u32.to_le_bytes().to_vec();
        junk.extend_from_slice(&[0xff; 4]);
        assert!(error_of(&forged(&[junk], 1, 1, 1, 0)).contains("segment frame"));
        // A header whose range and count disagree, or that counts no entries.
        assert!(error_of(&forged(&[e(1)], 1, 5, 1, 0)).contains("does not add up"));
        assert!(error_of(&forged(&[], 1, 1, 0, 0)).contains("does not add up"));
        // A changed byte in the body, and an unknown version.
        let mut b = encode_segment(&[entry(1)], &[], 1).unwrap();
        let at = b.len() - 3;
        b[at] ^= 1;
        assert!(error_of(&b).contains("checksum"));
        b[4] = 9;
        assert!(error_of(&b).contains("unknown segment version 9"));
        assert!(error_of(b"SLA").contains("not an archive segment"));
        // A header longer than any header, or longer than the file.
        let mut b = encode_segment(&[entry(1)], &[], 1).unwrap();
        b[5..9].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(error_of(&b).contains("a segment header of 4294967295 bytes"));
        b[5..9].copy_from_slice(&4000u32.to_be_bytes());
        assert!(error_of(&b).contains("truncated segment header"));
        // Entries at the end of u64: read whole, and one past the last refused (no overflow).
        let last = u64::MAX;
        assert_eq!(error_of(&forged(&[e(last)], last, last, 1, 0)), "no error");
        assert!(error_of(&forged(&[e(last), e(last)], last, last, 1, 0))
            .contains("entries do not match"));
    }

    /// A version 1 segment larger than the reader's read-ahead, with values larger than it,
    /// reads back as the same frames as version 2: a value that straddles reads is read whole.
    #[test]
    fn a_large_version_1_segment_reads_back_frame_by_frame() {
        let entries: Vec<ArchivedEntry> = (1..=3_000u64)
            .map(|i| ArchivedEntry {
                index: i,
                term: 3,
                proposal: Some(vec![i as u8; (i % 97) as usize * 13]),
            })
            .chain([ArchivedEntry {
                index: 3_001,
                term: 4,
                proposal: Some(vec![7; 5 * READ_AHEAD + 3]),
            }])
            .collect();
        let records: Vec<Record> = (0..=3_001u64)
            .filter(|i| i % 5 == 0)
            .map(|i| record(i, 0))
            .collect();
        let read = |b: &[u8]| -> Vec<Frame> {
            SegmentReader::new(b).unwrap().map(|f| f.unwrap()).collect()
        };
        let v1 = read(&encode_v1(&entries, &records, 1));
        assert_eq!(v1, read(&encode_segment(&entries, &records, 1).unwrap()));
        assert_eq!(v1.len(), entries.len() + records.len());
    }

    /// Version 1 bodies that do not hold what their header says, go on past their records, end
    /// inside a value, or hold a value larger than any frame, are errors that say so.
    #[test]
    fn a_version_1_body_that_does_not_add_up_is_refused() {
        let v1 = |plain: &[u8], entries: u64, records: u64| {
            let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(plain).unwrap();
            let body = z.finish().unwrap();
            error_of(&with_header(SEG_V1, 1, entries, entries, records, 1, body).unwrap())
        };
        let good = postcard::to_allocvec(&(vec![entry(1), entry(2)], vec![record(1, 0)])).unwrap();
        assert_eq!(v1(&good, 2, 1), "no error");
        assert!(v1(&good, 3, 1).contains("holds 2 entries, its header says 3"));
        assert!(v1(&good, 2, 0).contains("holds 1 records, its header says 0"));
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(v1(&trailing, 2, 1).contains("bytes follow the last record"));
        assert!(v1(&good[..good.len() - 3], 2, 1).contains("truncated segment body"));
        // One entry whose proposal claims 2^40 bytes, and 70 MiB of zeros after it.
        let mut huge = vec![1, 1, 3, 1];
        huge.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x20]);
        huge.resize(huge.len() + (70 << 20), 0);
        assert!(v1(&huge, 1, 0).contains("is larger than 67108864 bytes"));
    }
}
