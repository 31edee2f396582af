//! Durability bookkeeping, free of FUSE and of the mount: what a power loss would keep.
//!
//! Writes go straight through to the backing file (so reads see them, as a page cache would);
//! what is kept here is how to get back to the durable state: per file the durable size and,
//! for every page overwritten since the last fsync, its durable bytes (an undo log spilled to a
//! file in the trash), plus the pages written since the last fsync in first-write order; per
//! directory the durable entry set and the namespace operations not yet made durable.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

pub const PAGE: u64 = 4096;
pub type Id = u64;
pub const ROOT: Id = 1;

/// Byte access to one backing file; `File` in the daemon, memory in the unit tests.
pub trait PageIo {
    /// Read up to `buf.len()` bytes at `off`; fewer only at end of file.
    fn read_full(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
    fn write_all(&self, buf: &[u8], off: u64) -> io::Result<()>;
    fn resize(&self, len: u64) -> io::Result<()>;
    fn size(&self) -> io::Result<u64>;
    /// The data extents overlapping [lo, hi): holes read as zeros and need no undo copy.
    fn data_extents(&self, lo: u64, hi: u64) -> io::Result<Vec<(u64, u64)>> {
        Ok(vec![(lo, hi)])
    }
}

impl PageIo for File {
    fn read_full(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
    fn write_all(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.write_all_at(buf, off)
    }
    fn resize(&self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn data_extents(&self, lo: u64, hi: u64) -> io::Result<Vec<(u64, u64)>> {
        // SEEK_DATA/SEEK_HOLE move the fd's offset, which nothing here uses (pread/pwrite only).
        let fd = self.as_raw_fd();
        let mut out = Vec::new();
        let mut pos = lo;
        while pos < hi {
            let data = unsafe { libc::lseek(fd, pos as i64, libc::SEEK_DATA) };
            if data < 0 {
                let err = io::Error::last_os_error();
                return match err.raw_os_error() {
                    Some(libc::ENXIO) => Ok(out), // no data after pos
                    _ => Ok(vec![(lo, hi)]),      // no hole support: assume data
                };
            }
            let data = data as u64;
            if data >= hi {
                break;
            }
            let hole = unsafe { libc::lseek(fd, data as i64, libc::SEEK_HOLE) };
            let hole = if hole < 0 { hi } else { (hole as u64).min(hi) };
            out.push((data, hole));
            pos = hole;
        }
        Ok(out)
    }
}

/// Fixed 4 KiB slots in one file: durable page copies live here, not in memory, so that a
/// truncation of a large fsynced segment costs disk, not RAM. Freed slots are reused.
pub struct Spill {
    file: File,
    free: Vec<u64>,
    next: u64,
}

impl Spill {
    pub fn new(file: File) -> Self {
        Spill {
            file,
            free: Vec::new(),
            next: 0,
        }
    }
    fn put(&mut self, data: &[u8]) -> io::Result<u64> {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        });
        self.file.write_all_at(data, slot * PAGE)?;
        Ok(slot)
    }
    fn get(&self, slot: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, slot * PAGE)
    }
    fn release(&mut self, slot: u64) {
        self.free.push(slot);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Undo {
    Zero,
    Slot(u64),
}

/// One regular file's data durability.
#[derive(Debug, Default)]
pub struct FileLog {
    pub durable_size: u64,
    /// The size the broker sees now.
    pub size: u64,
    /// Durable bytes of every page below `durable_size` changed since the last sync.
    undo: HashMap<u64, Undo>,
    /// Pages written since the last sync, in first-write order (the `torn` model's order).
    order: Vec<u64>,
    written: HashSet<u64>,
    pub bytes_written: u64,
    /// Per page written since the last sync, the clock at its last write; and every size
    /// change since then, in order (clock, new size): what the `ordered` model needs to
    /// place data against the journal's commits.
    pub(crate) stamps: HashMap<u64, u64>,
    pub(crate) resizes: Vec<(u64, u64)>,
    /// The clock of its last rename over another file since the last sync: ext4 writes such
    /// a file's data out before that rename commits (`auto_da_alloc`).
    pub(crate) renamed_over: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    Unsynced,
    Torn,
    Reorder,
    Ordered,
}

impl Model {
    pub fn parse(s: &str) -> Option<Model> {
        match s {
            "unsynced" => Some(Model::Unsynced),
            "torn" => Some(Model::Torn),
            "reorder" => Some(Model::Reorder),
            "ordered" => Some(Model::Ordered),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Model::Unsynced => "unsynced",
            Model::Torn => "torn",
            Model::Reorder => "reorder",
            Model::Ordered => "ordered",
        }
    }
}

/// splitmix64: tiny, seedable, and stable across builds (a crate's RNG may change its stream).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, salt: u64) -> Self {
        let mut r = Rng(seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next();
        r
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashOutcome {
    /// Byte ranges [from, to) of what the broker last saw that are no longer there.
    pub dropped: Vec<(u64, u64)>,
    pub size_before: u64,
    pub size_after: u64,
}

fn merge(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in ranges {
        if a >= b {
            continue;
        }
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

impl FileLog {
    /// A file that is durable as it stands (found at mount).
    pub fn durable(size: u64) -> Self {
        FileLog {
            durable_size: size,
            size,
            ..Default::default()
        }
    }

    pub fn is_dirty(&self) -> bool {
        self.durable_size != self.size || !self.written.is_empty() || !self.undo.is_empty()
    }

    /// Pages whose content may differ from the durable state.
    pub fn unsynced_pages(&self) -> usize {
        self.written.len()
            + self
                .undo
                .keys()
                .filter(|p| !self.written.contains(p))
                .count()
    }

    fn durable_len(&self, page: u64) -> usize {
        let start = page * PAGE;
        if start >= self.durable_size {
            0
        } else {
            (self.durable_size - start).min(PAGE) as usize
        }
    }

    /// Copy page `page`'s durable bytes aside, once, before its first change since the sync.
    fn save(&mut self, page: u64, io: &dyn PageIo, spill: &mut Spill) -> io::Result<()> {
        let len = self.durable_len(page);
        if len == 0 || self.undo.contains_key(&page) {
            return Ok(());
        }
        // Untouched since the sync, so the backing bytes are the durable ones; past the
        // current size (cut by a truncation that found a hole there) they are zeros.
        let mut buf = vec![0u8; len];
        io.read_full(&mut buf, page * PAGE)?;
        let undo = if buf.iter().all(|&b| b == 0) {
            Undo::Zero
        } else {
            Undo::Slot(spill.put(&buf)?)
        };
        self.undo.insert(page, undo);
        Ok(())
    }

    pub fn write(
        &mut self,
        clock: u64,
        off: u64,
        data: &[u8],
        io: &dyn PageIo,
        spill: &mut Spill,
    ) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = off + data.len() as u64;
        for page in off / PAGE..=(end - 1) / PAGE {
            self.save(page, io, spill)?;
            if self.written.insert(page) {
                self.order.push(page);
            }
            self.stamps.insert(page, clock);
        }
        io.write_all(data, off)?;
        self.size = self.size.max(end);
        self.bytes_written += data.len() as u64;
        Ok(())
    }

    /// ftruncate/setattr(size): a data change, durable only on the file's next fsync.
    pub fn truncate(
        &mut self,
        clock: u64,
        new: u64,
        io: &dyn PageIo,
        spill: &mut Spill,
    ) -> io::Result<()> {
        let hi = self.size.min(self.durable_size);
        if new < hi {
            // Only pages holding data need a copy; a hole reads back as zeros anyway.
            for (a, b) in io.data_extents(new, hi)? {
                for page in a / PAGE..b.div_ceil(PAGE) {
                    self.save(page, io, spill)?;
                }
            }
            // The page the new end falls in loses its tail even where that tail is a hole's
            // neighbour: save it regardless of what the extents said.
            self.save(new / PAGE, io, spill)?;
        }
        io.resize(new)?;
        self.size = new;
        self.resizes.push((clock, new));
        Ok(())
    }

    /// The file grew without a write (fallocate): the new range reads as zeros.
    pub fn grow(&mut self, clock: u64, new: u64) {
        if new > self.size {
            self.size = new;
            self.resizes.push((clock, new));
        }
    }

    pub fn sync(&mut self, spill: &mut Spill) {
        for (_, u) in self.undo.drain() {
            if let Undo::Slot(s) = u {
                spill.release(s);
            }
        }
        self.order.clear();
        self.written.clear();
        self.stamps.clear();
        self.resizes.clear();
        self.renamed_over = None;
        self.bytes_written = 0;
        self.durable_size = self.size;
    }

    /// Written pages still inside the file, in first-write order: what a model may keep.
    pub fn candidates(&self, size: u64) -> Vec<u64> {
        self.order
            .iter()
            .copied()
            .filter(|p| p * PAGE < size)
            .collect()
    }

    pub fn choose_kept(&self, model: Model, size: u64, rng: &mut Rng) -> HashSet<u64> {
        let cands = self.candidates(size);
        match model {
            Model::Unsynced => HashSet::new(),
            Model::Torn => {
                let k = rng.below(cands.len() as u64 + 1) as usize;
                cands[..k].iter().copied().collect()
            }
            Model::Reorder => cands.into_iter().filter(|_| rng.next() & 1 == 1).collect(),
            Model::Ordered => unreachable!("ordered keeps pages against a commit: ordered::keep"),
        }
    }

    fn durable_page(&self, page: u64, spill: &Spill) -> io::Result<Vec<u8>> {
        let len = self.durable_len(page);
        let mut buf = vec![0u8; len];
        if let Some(Undo::Slot(s)) = self.undo.get(&page) {
            spill.get(*s, &mut buf)?;
        }
        Ok(buf)
    }

    /// Rewrite the backing file to what survives: the durable content, plus the `kept` pages
    /// as last written; the size grows past the durable size only as far as kept pages need.
    pub fn crash(
        &mut self,
        kept: &HashSet<u64>,
        io: &dyn PageIo,
        spill: &mut Spill,
    ) -> io::Result<CrashOutcome> {
        let shape = Survivor {
            size: self.durable_size,
            zero_from: u64::MAX,
        };
        self.crash_to(kept, shape, io, spill)
    }

    /// As `crash`, where a size change survived: the file is at least `shape.size` long, and
    /// its durable bytes at or past `shape.zero_from` were cut by a surviving truncation (what
    /// is not kept there reads as zeros).
    pub fn crash_to(
        &mut self,
        kept: &HashSet<u64>,
        shape: Survivor,
        io: &dyn PageIo,
        spill: &mut Spill,
    ) -> io::Result<CrashOutcome> {
        let cur = io.size()?;
        let mut fin = shape.size;
        for &p in kept {
            fin = fin.max(((p + 1) * PAGE).min(cur));
        }
        let affected: BTreeSet<u64> = self
            .written
            .iter()
            .chain(self.undo.keys())
            .copied()
            .collect();
        let mut dropped = Vec::new();
        if fin < cur {
            dropped.push((fin, cur));
        }
        for &p in &affected {
            let start = p * PAGE;
            if start >= fin {
                continue; // cut off below; counted in [fin, cur)
            }
            let before_len = if start < cur {
                (cur - start).min(PAGE) as usize
            } else {
                0
            };
            let mut before = vec![0u8; before_len];
            let got = io.read_full(&mut before, start)?;
            before.truncate(got);
            let after_len = (fin - start).min(PAGE) as usize;
            let mut after = vec![0u8; after_len];
            let mut durable = self.durable_page(p, spill)?;
            durable.truncate(shape.zero_from.saturating_sub(start).min(PAGE) as usize);
            if kept.contains(&p) {
                let n = before.len().min(after_len);
                after[..n].copy_from_slice(&before[..n]);
                // Past the current end the page keeps its durable bytes (an undone shrink).
                let m = after_len.min(durable.len());
                if m > n {
                    after[n..m].copy_from_slice(&durable[n..m]);
                }
            } else {
                let n = durable.len().min(after_len);
                after[..n].copy_from_slice(&durable[..n]);
            }
            let mut i = 0;
            while i < before.len() {
                if after.get(i) == Some(&before[i]) {
                    i += 1;
                    continue;
                }
                let j0 = i;
                while i < before.len() && after.get(i) != Some(&before[i]) {
                    i += 1;
                }
                dropped.push((start + j0 as u64, start + i as u64));
            }
            if after[..] != before[..] {
                io.write_all(&after, start)?;
            }
        }
        io.resize(fin)?;
        self.size = fin;
        self.sync(spill);
        Ok(CrashOutcome {
            dropped: merge(dropped),
            size_before: cur,
            size_after: fin,
        })
    }
}

/// The size a crash leaves a file at before kept pages extend it, and where a surviving
/// truncation cut its durable bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Survivor {
    pub size: u64,
    pub zero_from: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Other,
}

/// Where a node's backing object is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loc {
    /// Under the store: (parent directory, name).
    Store(Id, OsString),
    /// In the trash as `n<id>`: removed, but a crash may bring it back.
    Trash,
    /// Deleted for good.
    Gone,
}

#[derive(Debug)]
pub struct Node {
    pub kind: Kind,
    pub loc: Loc,
    /// Directories: the entries now, and as of the last time each change was made durable.
    pub entries: BTreeMap<OsString, Id>,
    pub base: BTreeMap<OsString, Id>,
    pub base_loc: Option<(Id, OsString)>,
    pub file: Option<FileLog>,
    pub lookups: u64,
    pub opens: u32,
}

impl Node {
    fn new(kind: Kind, loc: Loc) -> Self {
        Node {
            kind,
            loc,
            entries: BTreeMap::new(),
            base: BTreeMap::new(),
            base_loc: None,
            file: if kind == Kind::File {
                Some(FileLog::default())
            } else {
                None
            },
            lookups: 0,
            opens: 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Create,
    Mkdir,
    Unlink,
    Rmdir,
    Rename,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Create => "create",
            OpKind::Mkdir => "mkdir",
            OpKind::Unlink => "unlink",
            OpKind::Rmdir => "rmdir",
            OpKind::Rename => "rename",
        }
    }
}

/// A namespace change not yet durable.
#[derive(Clone, Debug)]
pub struct NsOp {
    pub kind: OpKind,
    pub node: Id,
    pub from: Option<(Id, OsString)>,
    pub to: Option<(Id, OsString)>,
    pub replaced: Option<Id>,
    pub path: String,
    pub to_path: Option<String>,
    /// Directories it touched that have not been fsynced since.
    unsynced: Vec<Id>,
    /// The namespace's clock when it was made.
    pub seq: u64,
}

impl NsOp {
    fn dirs(&self) -> impl Iterator<Item = Id> + '_ {
        self.from.iter().chain(self.to.iter()).map(|(d, _)| *d)
    }
    fn nodes(&self) -> impl Iterator<Item = Id> + '_ {
        std::iter::once(self.node).chain(self.replaced)
    }
}

/// The tree as the broker sees it (`entries`, `loc`) and as a crash would leave it (`base`,
/// `base_loc`), and the log of changes in between.
///
/// An operation becomes durable once every directory it touched has been fsynced after it,
/// and every earlier pending operation on the same node is durable: renaming a file out of a
/// directory that was never fsynced cannot make it durable elsewhere (it would otherwise be
/// found twice after a crash). Durable operations are folded into `base`.
#[derive(Debug)]
pub struct Namespace {
    pub nodes: HashMap<Id, Node>,
    pub ops: Vec<NsOp>,
    next: Id,
    trash: usize,
    /// One clock for every change in the store, namespace and data, and its reading at the
    /// last fsync of anything: a journaling filesystem commits its whole journal then.
    pub clock: u64,
    pub committed: u64,
}

impl Default for Namespace {
    fn default() -> Self {
        Self::new()
    }
}

fn join(dir: &str, name: &OsStr) -> String {
    let name = name.to_string_lossy();
    if dir.is_empty() {
        name.into_owned()
    } else {
        format!("{dir}/{name}")
    }
}

impl Namespace {
    pub fn new() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node::new(Kind::Dir, Loc::Store(0, OsString::new())));
        Namespace {
            nodes,
            ops: Vec::new(),
            next: ROOT + 1,
            trash: 0,
            clock: 0,
            committed: 0,
        }
    }

    pub fn node(&self, id: Id) -> Option<&Node> {
        self.nodes.get(&id)
    }

    pub fn node_mut(&mut self, id: Id) -> Option<&mut Node> {
        self.nodes.get_mut(&id)
    }

    pub fn child(&self, dir: Id, name: &OsStr) -> Option<Id> {
        self.nodes.get(&dir)?.entries.get(name).copied()
    }

    /// Path relative to the store root as the broker sees it; None when not in the tree.
    pub fn path(&self, id: Id) -> Option<String> {
        if id == ROOT {
            return Some(String::new());
        }
        match &self.nodes.get(&id)?.loc {
            Loc::Store(p, name) => Some(join(&self.path(*p)?, name)),
            _ => None,
        }
    }

    fn entry_path(&self, dir: Id, name: &OsStr) -> String {
        join(&self.path(dir).unwrap_or_else(|| "?".into()), name)
    }

    /// An entry present at mount: durable as it stands.
    pub fn add_loaded(&mut self, dir: Id, name: &OsStr, kind: Kind, size: u64) -> Id {
        let id = self.alloc(kind, Loc::Store(dir, name.to_owned()));
        let n = self.nodes.get_mut(&id).unwrap();
        n.base_loc = Some((dir, name.to_owned()));
        if let Some(f) = n.file.as_mut() {
            *f = FileLog::durable(size);
        }
        let d = self.nodes.get_mut(&dir).unwrap();
        d.entries.insert(name.to_owned(), id);
        d.base.insert(name.to_owned(), id);
        id
    }

    fn alloc(&mut self, kind: Kind, loc: Loc) -> Id {
        let id = self.next;
        self.next += 1;
        self.nodes.insert(id, Node::new(kind, loc));
        id
    }

    fn push(&mut self, mut op: NsOp) {
        let mut dirs: Vec<Id> = op.dirs().collect();
        dirs.dedup();
        op.unsynced = dirs;
        op.seq = self.tick();
        self.ops.push(op);
    }

    /// The next reading of the store's clock.
    pub fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// An fsync or fsyncdir of anything: the `ordered` model's journal commit.
    pub fn commit(&mut self) {
        self.committed = self.tick();
    }

    /// Make durable, in the order they were made, the pending operations made up to `cut`
    /// (a journal that committed then); the rest stay pending, for a crash to undo.
    pub fn commit_through(&mut self, cut: u64) {
        let ops = std::mem::take(&mut self.ops);
        let (done, pending): (Vec<NsOp>, Vec<NsOp>) = ops.into_iter().partition(|o| o.seq <= cut);
        for op in &done {
            self.apply(op);
        }
        self.ops = pending;
    }

    /// create or mkdir, after the backing object exists.
    pub fn create(&mut self, dir: Id, name: &OsStr, kind: Kind) -> Id {
        let path = self.entry_path(dir, name);
        let id = self.alloc(kind, Loc::Store(dir, name.to_owned()));
        self.nodes
            .get_mut(&dir)
            .unwrap()
            .entries
            .insert(name.to_owned(), id);
        let kind = if kind == Kind::Dir {
            OpKind::Mkdir
        } else {
            OpKind::Create
        };
        self.push(NsOp {
            kind,
            node: id,
            from: None,
            to: Some((dir, name.to_owned())),
            replaced: None,
            path,
            to_path: None,
            unsynced: Vec::new(),
            seq: 0,
        });
        id
    }

    /// unlink or rmdir, after the backing object moved to the trash.
    pub fn remove(&mut self, dir: Id, name: &OsStr) -> Option<Id> {
        let path = self.entry_path(dir, name);
        let id = self.nodes.get_mut(&dir)?.entries.remove(name)?;
        let node = self.nodes.get_mut(&id).unwrap();
        node.loc = Loc::Trash;
        self.trash += 1;
        let kind = if node.kind == Kind::Dir {
            OpKind::Rmdir
        } else {
            OpKind::Unlink
        };
        self.push(NsOp {
            kind,
            node: id,
            from: Some((dir, name.to_owned())),
            to: None,
            replaced: None,
            path,
            to_path: None,
            unsynced: Vec::new(),
            seq: 0,
        });
        Some(id)
    }

    /// rename, after the backing rename (and the replaced target's move to the trash).
    /// Returns (moved, replaced).
    pub fn rename(&mut self, d1: Id, n1: &OsStr, d2: Id, n2: &OsStr) -> Option<(Id, Option<Id>)> {
        let path = self.entry_path(d1, n1);
        let to_path = self.entry_path(d2, n2);
        let id = self.nodes.get_mut(&d1)?.entries.remove(n1)?;
        let replaced = self.nodes.get_mut(&d2)?.entries.insert(n2.to_owned(), id);
        if let Some(r) = replaced {
            self.nodes.get_mut(&r).unwrap().loc = Loc::Trash;
            self.trash += 1;
        }
        self.nodes.get_mut(&id).unwrap().loc = Loc::Store(d2, n2.to_owned());
        self.push(NsOp {
            kind: OpKind::Rename,
            node: id,
            from: Some((d1, n1.to_owned())),
            to: Some((d2, n2.to_owned())),
            replaced,
            path,
            to_path: Some(to_path),
            unsynced: Vec::new(),
            seq: 0,
        });
        let at = self.clock;
        if let (Some(_), Some(f)) = (replaced, self.nodes.get_mut(&id).unwrap().file.as_mut()) {
            f.renamed_over = Some(at);
        }
        Some((id, replaced))
    }

    pub fn fsyncdir(&mut self, dir: Id) {
        self.commit();
        for op in &mut self.ops {
            op.unsynced.retain(|d| *d != dir);
        }
        self.fold();
    }

    pub fn sync_all(&mut self) {
        self.commit();
        for op in &mut self.ops {
            op.unsynced.clear();
        }
        self.fold();
    }

    fn fold(&mut self) {
        let ops = std::mem::take(&mut self.ops);
        let mut blocked: HashSet<Id> = HashSet::new();
        let mut pending = Vec::new();
        for op in ops {
            if op.unsynced.is_empty() && op.nodes().all(|n| !blocked.contains(&n)) {
                self.apply(&op);
            } else {
                blocked.extend(op.nodes());
                pending.push(op);
            }
        }
        self.ops = pending;
    }

    fn unbase(&mut self, id: Id) {
        let Some((d, name)) = self.nodes.get_mut(&id).and_then(|n| n.base_loc.take()) else {
            return;
        };
        if let Some(dir) = self.nodes.get_mut(&d)
            && dir.base.get(&name) == Some(&id)
        {
            dir.base.remove(&name);
        }
    }

    fn set_base(&mut self, dir: Id, name: &OsStr, id: Id) {
        self.unbase(id);
        let prev = match self.nodes.get_mut(&dir) {
            Some(d) => d.base.insert(name.to_owned(), id),
            None => return,
        };
        if let Some(p) = prev.filter(|p| *p != id)
            && let Some(n) = self.nodes.get_mut(&p)
        {
            n.base_loc = None;
        }
        if let Some(n) = self.nodes.get_mut(&id) {
            n.base_loc = Some((dir, name.to_owned()));
        }
    }

    fn apply(&mut self, op: &NsOp) {
        match op.kind {
            OpKind::Create | OpKind::Mkdir | OpKind::Rename => {
                let (d, name) = op.to.clone().unwrap();
                if let Some(r) = op.replaced {
                    self.unbase(r);
                }
                self.set_base(d, &name, op.node);
            }
            OpKind::Unlink | OpKind::Rmdir => self.unbase(op.node),
        }
    }

    /// Where each node would be found after a crash now: the durable entries from the root.
    pub fn durable_tree(&self) -> HashMap<Id, (Id, OsString)> {
        let mut out = HashMap::new();
        let mut stack = vec![ROOT];
        while let Some(d) = stack.pop() {
            let Some(dir) = self.nodes.get(&d) else {
                continue;
            };
            for (name, &c) in &dir.base {
                if c == ROOT || out.contains_key(&c) {
                    continue;
                }
                out.insert(c, (d, name.clone()));
                if self.nodes.get(&c).is_some_and(|n| n.kind == Kind::Dir) {
                    stack.push(c);
                }
            }
        }
        out
    }

    pub fn has_trash(&self) -> bool {
        self.trash > 0
    }

    /// Nodes a crash or a later fsyncdir may still need: the tree, what is open, what a
    /// pending operation could make durable, and whatever is durably inside those.
    fn mark(&self) -> HashSet<Id> {
        let mut stack: Vec<Id> = vec![ROOT];
        for (&id, n) in &self.nodes {
            if matches!(n.loc, Loc::Store(..)) || n.opens > 0 {
                stack.push(id);
            }
        }
        stack.extend(self.ops.iter().map(|op| op.node));
        let mut marked = HashSet::new();
        while let Some(id) = stack.pop() {
            if !marked.insert(id) {
                continue;
            }
            if let Some(n) = self.nodes.get(&id) {
                stack.extend(n.base.values().copied());
            }
        }
        marked
    }

    /// A never-durable node whose whole pending history is create..remove in one directory,
    /// replacing nothing: any fsync of that directory folds all of it at once, to no effect,
    /// so drop it now rather than keep the file in the trash until then.
    fn cancel_dead_chains(&mut self) {
        let mut chains: HashMap<Id, Vec<usize>> = HashMap::new();
        let mut replaced: HashSet<Id> = HashSet::new();
        for (i, op) in self.ops.iter().enumerate() {
            chains.entry(op.node).or_default().push(i);
            replaced.extend(op.replaced);
        }
        let mut drop: HashSet<usize> = HashSet::new();
        for (id, idx) in chains {
            let Some(n) = self.nodes.get(&id) else {
                continue;
            };
            if matches!(n.loc, Loc::Store(..)) || n.base_loc.is_some() || replaced.contains(&id) {
                continue;
            }
            let first = &self.ops[idx[0]];
            if !matches!(first.kind, OpKind::Create | OpKind::Mkdir) {
                continue;
            }
            let dir = first.to.as_ref().unwrap().0;
            let solo = idx.iter().all(|&i| {
                let op = &self.ops[i];
                op.replaced.is_none() && op.dirs().all(|d| d == dir)
            });
            if solo {
                drop.extend(idx);
            }
        }
        if !drop.is_empty() {
            let mut i = 0;
            self.ops.retain(|_| {
                i += 1;
                !drop.contains(&(i - 1))
            });
        }
    }

    /// Forget what no crash can bring back. Returns the trashed nodes whose backing objects
    /// must now be deleted (their `loc` becomes Gone).
    pub fn gc(&mut self) -> Vec<(Id, Kind)> {
        let marked = loop {
            self.cancel_dead_chains();
            let marked = self.mark();
            let before = self.ops.len();
            // An operation in a directory nothing can reach or fsync again can never fold.
            self.ops.retain(|op| op.dirs().all(|d| marked.contains(&d)));
            if self.ops.len() == before {
                break marked;
            }
        };
        let mut delete = Vec::new();
        let mut forget = Vec::new();
        for (&id, n) in &mut self.nodes {
            if marked.contains(&id) {
                continue;
            }
            if n.loc == Loc::Trash && n.opens == 0 {
                n.loc = Loc::Gone;
                self.trash -= 1;
                delete.push((id, n.kind));
            }
            if n.loc == Loc::Gone && n.lookups == 0 && n.opens == 0 {
                forget.push(id);
            }
        }
        for id in forget {
            self.nodes.remove(&id);
        }
        delete
    }

    /// The kernel dropped its last reference to a node nothing else needs.
    pub fn forget(&mut self, id: Id, n: u64) {
        if let Some(node) = self.nodes.get_mut(&id) {
            node.lookups = node.lookups.saturating_sub(n);
            if node.loc == Loc::Gone && node.lookups == 0 && node.opens == 0 {
                self.nodes.remove(&id);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::RefCell;

    pub(crate) struct Mem(pub(crate) RefCell<Vec<u8>>);

    impl PageIo for Mem {
        fn read_full(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
            let v = self.0.borrow();
            let off = off as usize;
            if off >= v.len() {
                return Ok(0);
            }
            let n = buf.len().min(v.len() - off);
            buf[..n].copy_from_slice(&v[off..off + n]);
            Ok(n)
        }
        fn write_all(&self, buf: &[u8], off: u64) -> io::Result<()> {
            let mut v = self.0.borrow_mut();
            let end = off as usize + buf.len();
            if v.len() < end {
                v.resize(end, 0);
            }
            v[off as usize..end].copy_from_slice(buf);
            Ok(())
        }
        fn resize(&self, len: u64) -> io::Result<()> {
            self.0.borrow_mut().resize(len as usize, 0);
            Ok(())
        }
        fn size(&self) -> io::Result<u64> {
            Ok(self.0.borrow().len() as u64)
        }
    }

    pub(crate) fn spill() -> Spill {
        let path = std::env::temp_dir().join(format!(
            "crashfs-spill-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        Spill::new(f)
    }

    fn synced(content: &[u8]) -> (Mem, FileLog) {
        (
            Mem(RefCell::new(content.to_vec())),
            FileLog::durable(content.len() as u64),
        )
    }

    #[test]
    fn unsynced_append_and_overwrite_are_undone() {
        let mut sp = spill();
        let durable: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let (io, mut log) = synced(&durable);
        log.write(0, 5000, &[7u8; 3000], &io, &mut sp).unwrap();
        log.write(0, 10, &[9u8; 5], &io, &mut sp).unwrap();
        assert_eq!(io.0.borrow()[10], 9);
        let out = log.crash(&HashSet::new(), &io, &mut sp).unwrap();
        assert_eq!(*io.0.borrow(), durable);
        assert_eq!(out.dropped, vec![(10, 15), (5000, 8000)]);
        assert_eq!((out.size_before, out.size_after), (8000, 5000));
    }

    #[test]
    fn fsync_makes_writes_durable() {
        let mut sp = spill();
        let (io, mut log) = synced(b"");
        log.write(0, 0, b"hello", &io, &mut sp).unwrap();
        log.sync(&mut sp);
        log.write(0, 5, b" world", &io, &mut sp).unwrap();
        let out = log.crash(&HashSet::new(), &io, &mut sp).unwrap();
        assert_eq!(&*io.0.borrow(), b"hello");
        assert_eq!(out.dropped, vec![(5, 11)]);
    }

    #[test]
    fn truncation_is_undone_with_its_bytes() {
        let mut sp = spill();
        let durable: Vec<u8> = (0..20000u32).map(|i| (i % 13 + 1) as u8).collect();
        let (io, mut log) = synced(&durable);
        log.truncate(0, 100, &io, &mut sp).unwrap();
        log.write(0, 100, b"xyz", &io, &mut sp).unwrap();
        log.truncate(0, 50, &io, &mut sp).unwrap();
        log.truncate(0, 9000, &io, &mut sp).unwrap();
        let out = log.crash(&HashSet::new(), &io, &mut sp).unwrap();
        assert_eq!(*io.0.borrow(), durable);
        assert_eq!((out.size_before, out.size_after), (9000, 20000));
        // [50, 9000) was zeros after the re-extension; the durable bytes there are not.
        assert_eq!(out.dropped, vec![(50, 9000)]);
    }

    #[test]
    fn torn_keeps_a_prefix_in_write_order() {
        for seed in 0..50 {
            let mut sp = spill();
            let (io, mut log) = synced(&[1u8; 8192]);
            let order = [3u64, 0, 5, 1];
            for &p in &order {
                log.write(0, p * PAGE, &[p as u8 + 10; PAGE as usize], &io, &mut sp)
                    .unwrap();
            }
            let size = io.size().unwrap();
            let kept = log.choose_kept(Model::Torn, size, &mut Rng::new(seed, 7));
            let k = kept.len();
            assert!(order[..k].iter().all(|p| kept.contains(p)));
            log.crash(&kept, &io, &mut sp).unwrap();
            let v = io.0.borrow();
            let max_kept = order[..k].iter().max().map(|p| (p + 1) * PAGE).unwrap_or(0);
            assert_eq!(v.len() as u64, max_kept.max(8192));
            for page in 0..v.len() as u64 / PAGE {
                let got = &v[(page * PAGE) as usize..((page + 1) * PAGE) as usize];
                let want = if kept.contains(&page) {
                    page as u8 + 10
                } else if page < 2 {
                    1
                } else {
                    0
                };
                assert!(got.iter().all(|&b| b == want), "seed {seed} page {page}");
            }
        }
    }

    #[test]
    fn reorder_pages_are_all_old_or_all_new() {
        let mut seen = HashSet::new();
        for seed in 0..64 {
            let mut sp = spill();
            let (io, mut log) = synced(&[1u8; 4 * PAGE as usize]);
            for p in 0..4u64 {
                log.write(0, p * PAGE, &[2u8; PAGE as usize], &io, &mut sp)
                    .unwrap();
            }
            let kept = log.choose_kept(Model::Reorder, 4 * PAGE, &mut Rng::new(seed, 3));
            let mut ks: Vec<_> = kept.iter().copied().collect();
            ks.sort();
            seen.insert(ks);
            log.crash(&kept, &io, &mut sp).unwrap();
            let v = io.0.borrow();
            for p in 0..4u64 {
                let page = &v[(p * PAGE) as usize..((p + 1) * PAGE) as usize];
                let want = if kept.contains(&p) { 2 } else { 1 };
                assert!(page.iter().all(|&b| b == want));
            }
        }
        assert!(
            seen.len() > 8,
            "reorder should pick varied subsets: {seen:?}"
        );
    }

    #[test]
    fn same_seed_same_choice() {
        let mut sp = spill();
        let (io, mut log) = synced(b"");
        for p in 0..32u64 {
            log.write(0, p * PAGE, &[1; 10], &io, &mut sp).unwrap();
        }
        let size = io.size().unwrap();
        let a = log.choose_kept(Model::Reorder, size, &mut Rng::new(42, 9));
        let b = log.choose_kept(Model::Reorder, size, &mut Rng::new(42, 9));
        assert_eq!(a, b);
    }

    fn os(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn namespace_changes_need_the_directory_fsync() {
        let mut ns = Namespace::new();
        let d = ns.add_loaded(ROOT, os("d"), Kind::Dir, 0);
        let old = ns.add_loaded(d, os("cp"), Kind::File, 10);
        let gone = ns.add_loaded(d, os("gone"), Kind::File, 10);
        let f1 = ns.create(d, os("f1"), Kind::File);
        ns.fsyncdir(d);
        let f2 = ns.create(d, os("f2"), Kind::File);
        let tmp = ns.create(d, os("cp.tmp"), Kind::File);
        let (_, replaced) = ns.rename(d, os("cp.tmp"), d, os("cp")).unwrap();
        assert_eq!(replaced, Some(old));
        ns.remove(d, os("gone"));
        let tree = ns.durable_tree();
        assert_eq!(tree.get(&f1), Some(&(d, os("f1").to_owned())));
        assert_eq!(tree.get(&old), Some(&(d, os("cp").to_owned())));
        assert_eq!(tree.get(&gone), Some(&(d, os("gone").to_owned())));
        assert!(!tree.contains_key(&f2) && !tree.contains_key(&tmp));
        let kinds: Vec<_> = ns.ops.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            vec![
                OpKind::Create,
                OpKind::Create,
                OpKind::Rename,
                OpKind::Unlink
            ]
        );
        assert_eq!(ns.ops[2].path, "d/cp.tmp");
        ns.fsyncdir(d);
        let tree = ns.durable_tree();
        assert_eq!(tree.get(&tmp), Some(&(d, os("cp").to_owned())));
        assert!(!tree.contains_key(&old) && !tree.contains_key(&gone));
        assert!(ns.ops.is_empty());
        let deleted: HashSet<Id> = ns.gc().into_iter().map(|(id, _)| id).collect();
        assert_eq!(deleted, [old, gone].into_iter().collect());
    }

    #[test]
    fn cross_directory_rename_needs_both_directories() {
        let mut ns = Namespace::new();
        let a = ns.add_loaded(ROOT, os("a"), Kind::Dir, 0);
        let b = ns.add_loaded(ROOT, os("b"), Kind::Dir, 0);
        let f = ns.add_loaded(a, os("f"), Kind::File, 0);
        ns.rename(a, os("f"), b, os("g")).unwrap();
        ns.fsyncdir(b);
        assert_eq!(ns.durable_tree().get(&f), Some(&(a, os("f").to_owned())));
        // A later move of the same file cannot become durable before this one.
        ns.rename(b, os("g"), ROOT, os("h")).unwrap();
        ns.fsyncdir(b);
        ns.fsyncdir(ROOT);
        assert_eq!(ns.durable_tree().get(&f), Some(&(a, os("f").to_owned())));
        ns.fsyncdir(a);
        assert_eq!(ns.durable_tree().get(&f), Some(&(ROOT, os("h").to_owned())));
        assert!(ns.ops.is_empty());
    }

    #[test]
    fn uncommitted_directory_hides_its_durable_children() {
        let mut ns = Namespace::new();
        let d = ns.create(ROOT, os("d"), Kind::Dir);
        let f = ns.create(d, os("f"), Kind::File);
        ns.fsyncdir(d);
        assert!(!ns.durable_tree().contains_key(&f));
        ns.fsyncdir(ROOT);
        assert!(ns.durable_tree().contains_key(&f));
    }

    #[test]
    fn create_then_unlink_leaves_nothing_to_keep() {
        let mut ns = Namespace::new();
        let f = ns.create(ROOT, os("seg.log"), Kind::File);
        ns.rename(ROOT, os("seg.log"), ROOT, os("seg.log.deleted"))
            .unwrap();
        ns.remove(ROOT, os("seg.log.deleted"));
        assert_eq!(ns.gc(), vec![(f, Kind::File)]);
        assert!(ns.ops.is_empty());
        assert!(!ns.has_trash());
    }

    #[test]
    fn unlinked_durable_file_is_kept_until_the_unlink_is_durable() {
        let mut ns = Namespace::new();
        let f = ns.add_loaded(ROOT, os("x"), Kind::File, 3);
        ns.remove(ROOT, os("x"));
        assert!(ns.gc().is_empty());
        assert!(ns.durable_tree().contains_key(&f));
        ns.fsyncdir(ROOT);
        assert_eq!(ns.gc(), vec![(f, Kind::File)]);
    }
}
