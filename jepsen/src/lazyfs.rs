//! A filesystem that forgets what was never synced, for crash tests (the LazyFS approach).
//!
//! `kill -9` leaves the page cache intact: a node that acknowledged an entry before its WAL was
//! synced still finds the entry after a restart. Mounted over FUSE on a node's data directory
//! (the `sluice-lazyfs` binary), this filesystem passes every read and write straight through to
//! a backing directory and keeps the bookkeeping needed to undo what a power failure would
//! lose. On [`State::crash`], called once the node has been killed, every byte and every name
//! that was not made durable is dropped, and the node restarts on what a disk would have kept.
//!
//! # Durability rules (POSIX's, taken strictly)
//!
//! - **Data**: `fsync` or `fdatasync` of a file makes its whole current content durable (its
//!   length included). Nothing else does: not `close`, not a sync of its directory.
//! - **Names**: creating, removing or renaming an entry is durable only once the directory that
//!   holds the entry has been fsynced after the change (for a rename between directories, each
//!   side by a sync of its own directory). Syncing a file does not make its name durable.
//!
//! On a crash each directory that changed since its last sync gets back the listing it had at
//! that sync; each file gets back the content it had at its last sync (a file never synced is
//! empty); anything that is then named nowhere is deleted. An object durably named in two
//! places (renamed out of a directory not synced since, into one that was) stays where it is
//! now. Optionally the crash tears the last unsynced write: a prefix of it, of a length drawn
//! from a seed, is kept at its offset (after a gap of zeros if the durable content ends before
//! it), as a disk that had written some of its sectors would.
//!
//! # Memory and disk
//!
//! The backing directory always holds the current content, so reads and unsynced appends cost
//! no memory: a file's bookkeeping is its durable length and an undo log of the durable bytes
//! that were overwritten or cut off since its last sync (each kept once, at its first
//! overwrite). Undo logs hold at most [`UNDO_BYTES_MAX`] bytes in all; a write or truncation
//! that needs more fails with `ENOSPC` (a log-structured store overwrites nothing, so this is
//! never near). A directory with unsynced changes keeps a copy of its durable listing (names
//! and inode numbers). An object whose removal is not durable yet is moved to the store's
//! `trash/` directory on the backing filesystem, not copied, and deleted once the removal is
//! durable or at the crash. At most [`NODES_MAX`] files and directories are tracked.
//!
//! Regular files and directories only: hard links and symbolic links are refused (`EPERM`),
//! as are device nodes and `RENAME_EXCHANGE`; `fallocate` is not offered (callers fall back).

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bytes of overwritten durable data kept to undo, over all files.
pub const UNDO_BYTES_MAX: u64 = 64 << 20;
/// Files and directories tracked (the backing tree at mount included).
pub const NODES_MAX: usize = 1_000_000;
/// The longest name an entry may have (as on Linux filesystems).
pub const NAME_MAX: usize = 255;
/// The root directory's inode number (FUSE's).
pub const ROOT: u64 = 1;

/// The backing tree of a store (`store/tree`): the current content.
pub const TREE: &str = "tree";
/// Where removed objects wait until their removal is durable.
const TRASH: &str = "trash";

fn errno(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.code())
}

/// What a crash dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashReport {
    /// Unsynced bytes dropped: appended past the durable length, or overwriting durable bytes.
    pub bytes_dropped: u64,
    /// Files whose content went back to their last sync.
    pub files_rolled_back: u64,
    /// Directory entries undone (unsynced creations and renames removed, unsynced removals and
    /// renames put back).
    pub entries_rolled_back: u64,
    /// Files and directories deleted because no durable name was left for them.
    pub objects_deleted: u64,
    /// The torn write, if the crash was asked to tear one and there was one.
    pub torn: Option<TornWrite>,
}

/// The last unsynced write, torn by a crash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TornWrite {
    /// The file, relative to the mount.
    pub path: String,
    /// Where the write began.
    pub offset: u64,
    /// How many of its bytes were kept.
    pub kept: u64,
    /// How long it was.
    pub length: u64,
}

/// The prefix of a write that a crash keeps.
#[derive(Debug)]
struct Tear {
    ino: u64,
    offset: u64,
    prefix: Vec<u8>,
    length: u64,
}

/// What a crash would drop now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsynced {
    /// Bytes past files' durable lengths, plus overwritten durable bytes kept to undo.
    pub bytes: u64,
    /// Files with unsynced content.
    pub files: u64,
    /// Directories with unsynced entries.
    pub dirs: u64,
}

/// Where an object is named.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Place {
    Root,
    Named(u64, OsString),
    /// Removed, the removal not durable yet (or still open): kept as `trash/<ino>`.
    Trash,
}

#[derive(Debug, Default)]
struct FileBook {
    /// The length at the last sync.
    durable_len: u64,
    /// Durable bytes overwritten (or cut off) since the last sync: offset → the bytes at that
    /// sync. Ranges never overlap.
    undo: BTreeMap<u64, Vec<u8>>,
    /// The latest write since the last sync: (sequence number, offset, length).
    last_write: Option<(u64, u64, u64)>,
}

impl FileBook {
    fn undo_len(&self) -> u64 {
        self.undo.values().map(|v| v.len() as u64).sum()
    }
}

#[derive(Debug, Default)]
struct DirBook {
    children: BTreeMap<OsString, u64>,
    /// The listing at the last sync, if it changed since.
    durable: Option<BTreeMap<OsString, u64>>,
}

impl DirBook {
    fn durable_listing(&self) -> &BTreeMap<OsString, u64> {
        self.durable.as_ref().unwrap_or(&self.children)
    }
}

#[derive(Debug)]
enum Body {
    File(FileBook),
    Dir(DirBook),
}

#[derive(Debug)]
struct Node {
    place: Place,
    body: Body,
    /// The backing file, open while the node is (read and write).
    handle: Option<Arc<File>>,
    /// Open handles the kernel holds.
    opens: u64,
}

/// The filesystem's state: the bookkeeping over the backing tree. Every operation the FUSE
/// layer serves is a method here, so the rules can be tested without a mount.
#[derive(Debug)]
pub struct State {
    tree: PathBuf,
    trash: PathBuf,
    nodes: HashMap<u64, Node>,
    next_ino: u64,
    undo_bytes: u64,
    write_seq: u64,
}

/// Reads `buf.len()` bytes at `offset`, or up to the end of the file (the rest left as is).
fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// Keeps, in `book`'s undo log, the bytes of `[from, to)` that it does not hold yet (read from
/// `file`, which still has them: the caller is about to overwrite them).
fn save_original(
    file: &File,
    book: &mut FileBook,
    total: &mut u64,
    from: u64,
    to: u64,
) -> io::Result<()> {
    let mut gaps = Vec::new();
    let mut pos = from;
    if let Some((&k, v)) = book.undo.range(..=from).next_back() {
        pos = pos.max(k + v.len() as u64);
    }
    for (&k, v) in book.undo.range(from..to) {
        if k > pos {
            gaps.push((pos, k));
        }
        pos = pos.max(k + v.len() as u64);
    }
    if pos < to {
        gaps.push((pos, to));
    }
    let need: u64 = gaps.iter().map(|(a, b)| b - a).sum();
    if *total + need > UNDO_BYTES_MAX {
        eprintln!(
            "sluice-lazyfs: refusing a write: undoing it would keep more than {UNDO_BYTES_MAX} \
             bytes of overwritten synced data (UNDO_BYTES_MAX)"
        );
        return Err(errno(Errno::ENOSPC));
    }
    for (a, b) in gaps {
        let mut buf = vec![0u8; (b - a) as usize];
        read_up_to(file, &mut buf, a)?;
        book.undo.insert(a, buf);
    }
    *total += need;
    Ok(())
}

impl State {
    /// The state over the store `store` (`store/tree` is the content, created if missing;
    /// `store/trash` is emptied). Everything already in the tree counts as durable.
    pub fn open(store: &Path) -> io::Result<State> {
        let tree = store.join(TREE);
        let trash = store.join(TRASH);
        fs::create_dir_all(&tree)?;
        match fs::remove_dir_all(&trash) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        fs::create_dir_all(&trash)?;
        let mut state = State {
            tree: tree.clone(),
            trash,
            nodes: HashMap::new(),
            next_ino: ROOT + 1,
            undo_bytes: 0,
            write_seq: 0,
        };
        state.nodes.insert(
            ROOT,
            Node {
                place: Place::Root,
                body: Body::Dir(DirBook::default()),
                handle: None,
                opens: 0,
            },
        );
        state.load(ROOT, &tree)?;
        Ok(state)
    }

    /// Tracks what is under `path`, the directory `dir`.
    fn load(&mut self, dir: u64, path: &Path) -> io::Result<()> {
        let mut entries: Vec<fs::DirEntry> = fs::read_dir(path)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let md = e.metadata()?;
            let body = if md.is_dir() {
                Body::Dir(DirBook::default())
            } else if md.is_file() {
                Body::File(FileBook {
                    durable_len: md.len(),
                    ..FileBook::default()
                })
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "{}: only regular files and directories are supported",
                        e.path().display()
                    ),
                ));
            };
            let ino = self.add_node(Place::Named(dir, e.file_name()), body)?;
            self.dir_mut(dir)?.children.insert(e.file_name(), ino);
            if md.is_dir() {
                self.load(ino, &e.path())?;
            }
        }
        Ok(())
    }

    fn add_node(&mut self, place: Place, body: Body) -> io::Result<u64> {
        if self.nodes.len() >= NODES_MAX {
            eprintln!("sluice-lazyfs: more than {NODES_MAX} files and directories (NODES_MAX)");
            return Err(errno(Errno::ENOSPC));
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(
            ino,
            Node {
                place,
                body,
                handle: None,
                opens: 0,
            },
        );
        Ok(ino)
    }

    fn node(&self, ino: u64) -> io::Result<&Node> {
        self.nodes.get(&ino).ok_or_else(|| errno(Errno::ENOENT))
    }

    fn node_mut(&mut self, ino: u64) -> io::Result<&mut Node> {
        self.nodes.get_mut(&ino).ok_or_else(|| errno(Errno::ENOENT))
    }

    fn dir(&self, ino: u64) -> io::Result<&DirBook> {
        match &self.node(ino)?.body {
            Body::Dir(d) => Ok(d),
            Body::File(_) => Err(errno(Errno::ENOTDIR)),
        }
    }

    fn dir_mut(&mut self, ino: u64) -> io::Result<&mut DirBook> {
        match &mut self.node_mut(ino)?.body {
            Body::Dir(d) => Ok(d),
            Body::File(_) => Err(errno(Errno::ENOTDIR)),
        }
    }

    fn is_dir(&self, ino: u64) -> bool {
        matches!(self.nodes.get(&ino).map(|n| &n.body), Some(Body::Dir(_)))
    }

    /// The backing path of `ino`.
    pub fn path(&self, ino: u64) -> io::Result<PathBuf> {
        let mut names = Vec::new();
        let mut at = ino;
        loop {
            match &self.node(at)?.place {
                Place::Root => {
                    let mut p = self.tree.clone();
                    p.extend(names.iter().rev());
                    return Ok(p);
                }
                Place::Trash => {
                    let mut p = self.trash.join(at.to_string());
                    p.extend(names.iter().rev());
                    return Ok(p);
                }
                Place::Named(parent, name) => {
                    names.push(name.clone());
                    at = *parent;
                }
            }
        }
    }

    /// `ino`'s path relative to the mount (for reports).
    fn shown_path(&self, ino: u64) -> String {
        self.path(ino)
            .ok()
            .and_then(|p| p.strip_prefix(&self.tree).ok().map(Path::to_path_buf))
            .map_or_else(|| format!("#{ino}"), |p| p.display().to_string())
    }

    /// The entry `name` of the directory `parent`.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> io::Result<u64> {
        self.dir(parent)?
            .children
            .get(name)
            .copied()
            .ok_or_else(|| errno(Errno::ENOENT))
    }

    /// The backing metadata of `ino`.
    pub fn metadata(&self, ino: u64) -> io::Result<Metadata> {
        let node = self.node(ino)?;
        match &node.handle {
            Some(f) => f.metadata(),
            None => fs::symlink_metadata(self.path(ino)?),
        }
    }

    /// Whether `ino` has been removed (and waits in the trash).
    pub fn removed(&self, ino: u64) -> bool {
        self.nodes
            .get(&ino)
            .is_some_and(|n| n.place == Place::Trash)
    }

    /// The entries of the directory `ino`: name, inode, whether a directory.
    pub fn entries(&self, ino: u64) -> io::Result<Vec<(OsString, u64, bool)>> {
        Ok(self
            .dir(ino)?
            .children
            .iter()
            .map(|(name, &c)| (name.clone(), c, self.is_dir(c)))
            .collect())
    }

    fn check_name(name: &OsStr) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let b = name.as_bytes();
        if b.len() > NAME_MAX {
            return Err(errno(Errno::ENAMETOOLONG));
        }
        if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
            return Err(errno(Errno::EINVAL));
        }
        Ok(())
    }

    /// Remembers the durable listing of `dir` before its first change since its last sync.
    fn touch_dir(&mut self, dir: u64) -> io::Result<()> {
        let d = self.dir_mut(dir)?;
        if d.durable.is_none() {
            d.durable = Some(d.children.clone());
        }
        Ok(())
    }

    /// Creates the regular file `name` in `parent` (with permissions `mode`) and opens it.
    pub fn create(&mut self, parent: u64, name: &OsStr, mode: u32) -> io::Result<u64> {
        Self::check_name(name)?;
        if self.dir(parent)?.children.contains_key(name) {
            return Err(errno(Errno::EEXIST));
        }
        let path = self.path(parent)?.join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode & 0o7777)
            .open(&path)?;
        let ino = match self.add_node(
            Place::Named(parent, name.to_owned()),
            Body::File(FileBook::default()),
        ) {
            Ok(ino) => ino,
            Err(e) => {
                let _ = fs::remove_file(&path);
                return Err(e);
            }
        };
        self.touch_dir(parent)?;
        self.dir_mut(parent)?.children.insert(name.to_owned(), ino);
        let node = self.node_mut(ino)?;
        node.handle = Some(Arc::new(file));
        node.opens = 1;
        Ok(ino)
    }

    /// Creates the directory `name` in `parent`.
    pub fn mkdir(&mut self, parent: u64, name: &OsStr, mode: u32) -> io::Result<u64> {
        Self::check_name(name)?;
        if self.dir(parent)?.children.contains_key(name) {
            return Err(errno(Errno::EEXIST));
        }
        let path = self.path(parent)?.join(name);
        fs::create_dir(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777))?;
        let ino = match self.add_node(
            Place::Named(parent, name.to_owned()),
            Body::Dir(DirBook::default()),
        ) {
            Ok(ino) => ino,
            Err(e) => {
                let _ = fs::remove_dir(&path);
                return Err(e);
            }
        };
        self.touch_dir(parent)?;
        self.dir_mut(parent)?.children.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// Opens the file `ino` once more.
    pub fn open_file(&mut self, ino: u64) -> io::Result<()> {
        let handle = self.file(ino)?;
        let node = self.node_mut(ino)?;
        node.handle = Some(handle);
        node.opens += 1;
        Ok(())
    }

    /// Closes one open handle of `ino`.
    pub fn release(&mut self, ino: u64) -> io::Result<()> {
        let Some(node) = self.nodes.get_mut(&ino) else {
            // Deleted by a crash while the kernel still held it open.
            return Ok(());
        };
        node.opens = node.opens.saturating_sub(1);
        if node.opens == 0 {
            node.handle = None;
            if node.place == Place::Trash {
                return self.purge_trash();
            }
        }
        Ok(())
    }

    /// The backing file of `ino`: its open handle, or opened now.
    fn file(&self, ino: u64) -> io::Result<Arc<File>> {
        let node = self.node(ino)?;
        if !matches!(node.body, Body::File(_)) {
            return Err(errno(Errno::EISDIR));
        }
        match &node.handle {
            Some(f) => Ok(f.clone()),
            None => Ok(Arc::new(open_rw(&self.path(ino)?)?)),
        }
    }

    /// Up to `size` bytes of `ino` at `offset`.
    pub fn read(&self, ino: u64, offset: u64, size: usize) -> io::Result<Vec<u8>> {
        let file = self.file(ino)?;
        let mut buf = vec![0u8; size];
        let n = read_up_to(&file, &mut buf, offset)?;
        buf.truncate(n);
        Ok(buf)
    }

    fn split_file(&mut self, ino: u64) -> io::Result<(&mut FileBook, &mut u64)> {
        let State {
            nodes, undo_bytes, ..
        } = self;
        match nodes.get_mut(&ino).map(|n| &mut n.body) {
            Some(Body::File(book)) => Ok((book, undo_bytes)),
            Some(Body::Dir(_)) => Err(errno(Errno::EISDIR)),
            None => Err(errno(Errno::ENOENT)),
        }
    }

    /// Writes `data` at `offset` of `ino` (unsynced until [`State::fsync`]).
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> io::Result<()> {
        let file = self.file(ino)?;
        let len = data.len() as u64;
        let end = offset.checked_add(len).ok_or_else(|| errno(Errno::EFBIG))?;
        self.write_seq += 1;
        let seq = self.write_seq;
        let (book, total) = self.split_file(ino)?;
        if offset < book.durable_len && len > 0 {
            save_original(&file, book, total, offset, end.min(book.durable_len))?;
        }
        file.write_all_at(data, offset)?;
        if len > 0 {
            book.last_write = Some((seq, offset, len));
        }
        Ok(())
    }

    /// Sets the length of `ino` (unsynced until [`State::fsync`]).
    pub fn truncate(&mut self, ino: u64, len: u64) -> io::Result<()> {
        let file = self.file(ino)?;
        let (book, total) = self.split_file(ino)?;
        if len < book.durable_len {
            save_original(&file, book, total, len, book.durable_len)?;
        }
        file.set_len(len)?;
        if let Some((seq, off, n)) = book.last_write {
            book.last_write = (off < len).then(|| (seq, off, n.min(len - off)));
        }
        Ok(())
    }

    /// Makes the content of `ino` durable (`fsync`, `fdatasync`). Returns the backing file, for
    /// the caller to sync too if it likes (outside any lock).
    pub fn fsync(&mut self, ino: u64) -> io::Result<Arc<File>> {
        let file = self.file(ino)?;
        let len = file.metadata()?.len();
        let (book, total) = self.split_file(ino)?;
        *total -= book.undo_len();
        book.undo.clear();
        book.durable_len = len;
        book.last_write = None;
        Ok(file)
    }

    /// Makes the entries of the directory `ino` durable (`fsync` of the directory).
    pub fn fsyncdir(&mut self, ino: u64) -> io::Result<()> {
        self.dir_mut(ino)?.durable = None;
        self.purge_trash()
    }

    /// Whether some directory's durable listing names `ino`.
    fn durably_named(&self, ino: u64) -> bool {
        self.nodes.values().any(|n| match &n.body {
            Body::Dir(d) => d.durable_listing().values().any(|&c| c == ino),
            Body::File(_) => false,
        })
    }

    /// `ino` lost its name: kept in the trash while open or durably named, deleted otherwise.
    fn discard(&mut self, ino: u64) -> io::Result<()> {
        let path = self.path(ino)?;
        let node = self.node(ino)?;
        if node.opens > 0 || self.durably_named(ino) {
            fs::rename(&path, self.trash.join(ino.to_string()))?;
            self.node_mut(ino)?.place = Place::Trash;
        } else {
            if self.is_dir(ino) {
                fs::remove_dir_all(&path)?;
            } else {
                fs::remove_file(&path)?;
            }
            self.forget(ino);
        }
        Ok(())
    }

    /// Drops `ino` and, for a directory, everything under it from the bookkeeping.
    fn forget(&mut self, ino: u64) -> u64 {
        let Some(node) = self.nodes.remove(&ino) else {
            return 0;
        };
        match node.body {
            Body::File(book) => {
                self.undo_bytes -= book.undo_len();
                1
            }
            Body::Dir(d) => 1 + d.children.values().map(|&c| self.forget(c)).sum::<u64>(),
        }
    }

    /// Deletes what waits in the trash that no durable listing names and nobody holds open.
    fn purge_trash(&mut self) -> io::Result<()> {
        loop {
            let mut gone: Vec<u64> = self
                .nodes
                .iter()
                .filter(|(_, n)| n.place == Place::Trash && n.opens == 0)
                .map(|(&ino, _)| ino)
                .filter(|&ino| !self.durably_named(ino))
                .collect();
            if gone.is_empty() {
                return Ok(());
            }
            gone.sort_unstable();
            for ino in gone {
                self.delete_trashed(ino)?;
            }
        }
    }

    fn delete_trashed(&mut self, ino: u64) -> io::Result<u64> {
        let path = self.trash.join(ino.to_string());
        if self.is_dir(ino) {
            fs::remove_dir_all(&path)?;
        } else {
            fs::remove_file(&path)?;
        }
        Ok(self.forget(ino))
    }

    /// Removes the file `name` from `parent`.
    pub fn unlink(&mut self, parent: u64, name: &OsStr) -> io::Result<()> {
        let ino = self.lookup(parent, name)?;
        if self.is_dir(ino) {
            return Err(errno(Errno::EISDIR));
        }
        self.touch_dir(parent)?;
        self.dir_mut(parent)?.children.remove(name);
        self.discard(ino)
    }

    /// Removes the empty directory `name` from `parent`.
    pub fn rmdir(&mut self, parent: u64, name: &OsStr) -> io::Result<()> {
        let ino = self.lookup(parent, name)?;
        if !self.dir(ino)?.children.is_empty() {
            return Err(errno(Errno::ENOTEMPTY));
        }
        self.touch_dir(parent)?;
        self.dir_mut(parent)?.children.remove(name);
        self.discard(ino)
    }

    /// Whether `ino` is `ancestor` or lies under it.
    fn under(&self, mut ino: u64, ancestor: u64) -> bool {
        loop {
            if ino == ancestor {
                return true;
            }
            match self.nodes.get(&ino).map(|n| &n.place) {
                Some(Place::Named(parent, _)) => ino = *parent,
                _ => return false,
            }
        }
    }

    /// Renames `parent/name` to `new_parent/new_name`, replacing what is there unless
    /// `noreplace`.
    pub fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        noreplace: bool,
    ) -> io::Result<()> {
        Self::check_name(new_name)?;
        let ino = self.lookup(parent, name)?;
        self.dir(new_parent)?;
        if parent == new_parent && name == new_name {
            return Ok(());
        }
        if self.is_dir(ino) && self.under(new_parent, ino) {
            return Err(errno(Errno::EINVAL));
        }
        let target = self.dir(new_parent)?.children.get(new_name).copied();
        if let Some(t) = target {
            if noreplace {
                return Err(errno(Errno::EEXIST));
            }
            match (self.is_dir(ino), self.is_dir(t)) {
                (true, false) => return Err(errno(Errno::ENOTDIR)),
                (false, true) => return Err(errno(Errno::EISDIR)),
                (true, true) if !self.dir(t)?.children.is_empty() => {
                    return Err(errno(Errno::ENOTEMPTY))
                }
                _ => {}
            }
        }
        let from = self.path(ino)?;
        let to = self.path(new_parent)?.join(new_name);
        self.touch_dir(parent)?;
        self.touch_dir(new_parent)?;
        if let Some(t) = target {
            // The replaced object loses its name first (to the trash, or gone), so that the
            // backing rename below does not destroy what a crash may have to restore.
            self.dir_mut(new_parent)?.children.remove(new_name);
            self.discard(t)?;
        }
        fs::rename(&from, &to)?;
        self.dir_mut(parent)?.children.remove(name);
        self.dir_mut(new_parent)?
            .children
            .insert(new_name.to_owned(), ino);
        self.node_mut(ino)?.place = Place::Named(new_parent, new_name.to_owned());
        Ok(())
    }

    /// What a crash would drop now.
    pub fn unsynced(&self) -> io::Result<Unsynced> {
        let mut u = Unsynced::default();
        for (&ino, node) in &self.nodes {
            match &node.body {
                Body::File(book) => {
                    let len = self.metadata(ino)?.len();
                    let bytes = len.saturating_sub(book.durable_len) + book.undo_len();
                    if bytes > 0 || len != book.durable_len {
                        u.files += 1;
                        u.bytes += bytes;
                    }
                }
                Body::Dir(d) => u.dirs += u64::from(d.durable.is_some()),
            }
        }
        Ok(u)
    }

    /// A power failure: every unsynced byte and entry is dropped, as described in the module
    /// documentation. With `tear`, a prefix of the last unsynced write survives, its length
    /// drawn from the seed (at least one byte and not the whole write: a write of one byte
    /// cannot be torn). Call it only while no process uses the filesystem.
    pub fn crash(&mut self, tear: Option<u64>) -> io::Result<CrashReport> {
        let mut report = CrashReport::default();
        // The write to tear, read before anything changes.
        let torn = match tear {
            Some(seed) => self.torn_write(seed)?,
            None => None,
        };

        // Names: every directory that changed goes back to its synced listing.
        let mut dirs: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| matches!(&n.body, Body::Dir(d) if d.durable.is_some()))
            .map(|(&ino, _)| ino)
            .collect();
        dirs.sort_unstable();
        for &d in &dirs {
            let (durable, current) = {
                let book = self.dir(d)?;
                (book.durable_listing().clone(), book.children.clone())
            };
            for (name, c) in current {
                if durable.get(&name) != Some(&c) {
                    fs::rename(self.path(c)?, self.trash.join(c.to_string()))?;
                    self.node_mut(c)?.place = Place::Trash;
                    self.dir_mut(d)?.children.remove(&name);
                    report.entries_rolled_back += 1;
                }
            }
        }
        for &d in &dirs {
            let durable = self.dir(d)?.durable_listing().clone();
            for (name, c) in durable {
                if self.dir(d)?.children.get(&name) == Some(&c) {
                    continue;
                }
                if self.nodes.get(&c).is_some_and(|n| n.place == Place::Trash) {
                    fs::rename(self.trash.join(c.to_string()), self.path(d)?.join(&name))?;
                    self.node_mut(c)?.place = Place::Named(d, name.clone());
                    self.dir_mut(d)?.children.insert(name, c);
                    report.entries_rolled_back += 1;
                }
            }
            self.dir_mut(d)?.durable = None;
        }
        let mut trashed: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.place == Place::Trash)
            .map(|(&ino, _)| ino)
            .collect();
        trashed.sort_unstable();
        for ino in trashed {
            report.objects_deleted += self.delete_trashed(ino)?;
        }

        // Content: every file goes back to its synced length and bytes.
        let mut files: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| matches!(n.body, Body::File(_)))
            .map(|(&ino, _)| ino)
            .collect();
        files.sort_unstable();
        for ino in files {
            let file = self.file(ino)?;
            let len = file.metadata()?.len();
            let (book, total) = self.split_file(ino)?;
            let undo = std::mem::take(&mut book.undo);
            book.last_write = None;
            let restored: u64 = undo.values().map(|v| v.len() as u64).sum();
            *total -= restored;
            if len == book.durable_len && undo.is_empty() {
                continue;
            }
            report.files_rolled_back += 1;
            report.bytes_dropped += len.saturating_sub(book.durable_len) + restored;
            file.set_len(book.durable_len)?;
            for (off, bytes) in &undo {
                file.write_all_at(bytes, *off)?;
            }
        }

        // The torn write's prefix, if its file survived.
        if let Some(Tear {
            ino,
            offset,
            prefix,
            length,
        }) = torn
        {
            if self.nodes.contains_key(&ino) {
                self.file(ino)?.write_all_at(&prefix, offset)?;
                report.torn = Some(TornWrite {
                    path: self.shown_path(ino),
                    offset,
                    kept: prefix.len() as u64,
                    length,
                });
            }
        }

        // What survived is durable.
        let files: Vec<u64> = self.nodes.keys().copied().collect();
        for ino in files {
            if matches!(self.node(ino)?.body, Body::File(_)) {
                let len = self.metadata(ino)?.len();
                let (book, _) = self.split_file(ino)?;
                book.durable_len = len;
            }
        }
        Ok(report)
    }

    /// The latest unsynced write and the prefix of it to keep.
    fn torn_write(&self, seed: u64) -> io::Result<Option<Tear>> {
        let latest = self
            .nodes
            .iter()
            .filter_map(|(&ino, n)| match &n.body {
                Body::File(book) => book.last_write.map(|w| (w, ino)),
                Body::Dir(_) => None,
            })
            .max();
        let Some(((_, offset, length), ino)) = latest else {
            return Ok(None);
        };
        if length < 2 {
            return Ok(None);
        }
        let keep = 1 + seed % (length - 1);
        let mut prefix = vec![0u8; keep as usize];
        let file = self.file(ino)?;
        let n = read_up_to(&file, &mut prefix, offset)?;
        prefix.truncate(n);
        Ok((!prefix.is_empty()).then_some(Tear {
            ino,
            offset,
            prefix,
            length,
        }))
    }
}

/// Attributes and entries are never cached by the kernel: a crash changes them behind its back.
const TTL: Duration = Duration::ZERO;

/// What `statfs` reports: the filesystem has no capacity of its own (the backing one's applies).
const STATFS_BLOCKS: u64 = 1 << 30;
const STATFS_BLOCK_SIZE: u32 = 4096;

fn file_attr(ino: u64, md: &Metadata, removed: bool) -> FileAttr {
    let time = |secs: i64, nanos: i64| {
        UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32)
    };
    FileAttr {
        ino: INodeNo(ino),
        size: md.len(),
        blocks: md.blocks(),
        atime: time(md.atime(), md.atime_nsec()),
        mtime: time(md.mtime(), md.mtime_nsec()),
        ctime: time(md.ctime(), md.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: if md.is_dir() {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: (md.mode() & 0o7777) as u16,
        nlink: if removed { 0 } else { md.nlink() as u32 },
        uid: md.uid(),
        gid: md.gid(),
        rdev: md.rdev() as u32,
        blksize: md.blksize() as u32,
        flags: 0,
    }
}

/// The FUSE filesystem over a shared [`State`] (shared with whoever crashes it).
#[derive(Debug, Clone)]
pub struct LazyFs {
    state: Arc<Mutex<State>>,
}

impl LazyFs {
    /// The filesystem over `state`.
    pub fn new(state: Arc<Mutex<State>>) -> Self {
        Self { state }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in one request must not take the filesystem down with it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn attr(state: &State, ino: u64) -> io::Result<FileAttr> {
        Ok(file_attr(ino, &state.metadata(ino)?, state.removed(ino)))
    }
}

/// Mounts `fs` at `mountpoint` (root only: no fusermount is used) and serves it on background
/// threads until the returned session is dropped or unmounted.
pub fn mount(fs: LazyFs, mountpoint: &Path) -> io::Result<fuser::BackgroundSession> {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("sluice-lazyfs".into()),
        fuser::MountOption::Subtype("sluice-lazyfs".into()),
    ];
    // Two request loops: a slow sync of one file does not hold up reads of another.
    config.n_threads = Some(2);
    fuser::spawn_mount(fs, mountpoint, &config)
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let state = self.lock();
        match state
            .lookup(parent.0, name)
            .and_then(|ino| Self::attr(&state, ino))
        {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e.into()),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let state = self.lock();
        match Self::attr(&state, ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e.into()),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut state = self.lock();
        let ino = ino.0;
        let result = (|| {
            if let Some(len) = size {
                state.truncate(ino, len)?;
            }
            let path = state.path(ino)?;
            if let Some(mode) = mode {
                fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777))?;
            }
            if uid.is_some() || gid.is_some() {
                std::os::unix::fs::chown(&path, uid, gid)?;
            }
            if atime.is_some() || mtime.is_some() {
                let at = |t: TimeOrNow| match t {
                    TimeOrNow::SpecificTime(t) => t,
                    TimeOrNow::Now => SystemTime::now(),
                };
                let mut times = fs::FileTimes::new();
                if let Some(t) = atime {
                    times = times.set_accessed(at(t));
                }
                if let Some(t) = mtime {
                    times = times.set_modified(at(t));
                }
                File::open(&path)?.set_times(times)?;
            }
            Self::attr(&state, ino)
        })();
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e.into()),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        const S_IFMT: u32 = 0o170000;
        const S_IFREG: u32 = 0o100000;
        if mode & S_IFMT != S_IFREG {
            return reply.error(Errno::EPERM);
        }
        let mut state = self.lock();
        let result = state.create(parent.0, name, mode & !umask).and_then(|ino| {
            state.release(ino)?;
            Self::attr(&state, ino)
        });
        match result {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e.into()),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.lock();
        match state
            .mkdir(parent.0, name, mode & !umask)
            .and_then(|ino| Self::attr(&state, ino))
        {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e.into()),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.lock().unlink(parent.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.into()),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.lock().rmdir(parent.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.into()),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            return reply.error(Errno::EINVAL);
        }
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        match self
            .lock()
            .rename(parent.0, name, newparent.0, newname, noreplace)
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.into()),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        const O_TRUNC: i32 = 0o1000;
        let mut state = self.lock();
        let result = (|| {
            state.open_file(ino.0)?;
            if flags.0 & O_TRUNC != 0 {
                state.truncate(ino.0, 0)?;
            }
            Ok::<_, io::Error>(())
        })();
        match result {
            // No FOPEN_KEEP_CACHE: the kernel drops its cached pages of the file at every open,
            // so a node restarted after a crash reads what survived.
            Ok(()) => reply.opened(FileHandle(ino.0), FopenFlags::empty()),
            Err(e) => reply.error(e.into()),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.lock().read(ino.0, offset, size as usize) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e.into()),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.lock().write(ino.0, offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e.into()),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        match self.lock().release(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.into()),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let file = self.lock().fsync(ino.0);
        // The backing file is synced too (outside the lock), so that a node on this filesystem
        // waits for its syncs about as long as on the disk underneath.
        let result = file.and_then(|f| {
            if datasync {
                f.sync_data()
            } else {
                f.sync_all()
            }
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.into()),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let state = self.lock();
        let entries = match state.entries(ino.0) {
            Ok(e) => e,
            Err(e) => return reply.error(e.into()),
        };
        let parent = match state.nodes.get(&ino.0).map(|n| &n.place) {
            Some(Place::Named(p, _)) => *p,
            _ => ino.0,
        };
        let all = [
            (OsString::from("."), ino.0, true),
            (OsString::from(".."), parent, true),
        ]
        .into_iter()
        .chain(entries);
        for (i, (name, c, dir)) in all.enumerate().skip(offset as usize) {
            let kind = if dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            if reply.add(INodeNo(c), i as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.lock().fsyncdir(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.into()),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(
            STATFS_BLOCKS,
            STATFS_BLOCKS,
            STATFS_BLOCKS,
            NODES_MAX as u64,
            NODES_MAX as u64,
            STATFS_BLOCK_SIZE,
            NAME_MAX as u32,
            STATFS_BLOCK_SIZE,
        );
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        match self.lock().node(ino.0) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e.into()),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = self.lock();
        match state
            .create(parent.0, name, mode & !umask)
            .and_then(|ino| Self::attr(&state, ino))
        {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(attr.ino.0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e.into()),
        }
    }
}
