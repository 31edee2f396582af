//! The FUSE side: passthrough to the backing store, with every change recorded in the model.
//!
//! One mutex guards the whole state. The kernel's requests are served by one thread; the
//! control socket takes the same lock, so a crash happens between two requests, and every
//! request after it fails with EIO before touching the store.

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use serde_json::{Value, json};

use crate::model::{Id, Kind, Loc, Model, Namespace, ROOT, Rng, Spill};
use crate::ordered;
use crate::sys;

// Every change reaches the kernel through this daemon, so its caches cannot go stale.
const TTL: Duration = Duration::from_secs(1);

type Res<T> = Result<T, Errno>;

fn errno(e: io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

struct Handle {
    file: File,
    node: Id,
}

struct DirHandle {
    node: Id,
    entries: Vec<(Id, FileType, OsString)>,
}

pub struct State {
    pub ns: Namespace,
    /// O_PATH fds of every directory node (root included), valid wherever it is moved.
    dir_fds: HashMap<Id, OwnedFd>,
    /// This daemon's own directory inside --trash.
    trash_fd: OwnedFd,
    spill: Spill,
    files: HashMap<u64, Handle>,
    dirs: HashMap<u64, DirHandle>,
    next_fh: u64,
    frozen: bool,
    crashed: bool,
    /// What the kernel may have cached when the crash came: to be invalidated (outside the
    /// lock: invalidating dirty pages sends writes, which must be able to fail with EIO).
    pub stale_cache: (Vec<Id>, Vec<(Id, OsString)>),
    euid: u32,
    egid: u32,
}

fn kind_of(mode: u32) -> Kind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        _ => Kind::Other,
    }
}

fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

fn time(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs((-sec) as u64) + Duration::from_nanos(nsec as u64)
    }
}

fn attr(id: Id, st: &libc::stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(id),
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: time(st.st_ctime, st.st_ctime_nsec),
        kind: file_type(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => libc::timespec {
                tv_sec: d.as_secs() as i64,
                tv_nsec: d.subsec_nanos() as i64,
            },
            Err(e) => libc::timespec {
                tv_sec: -(e.duration().as_secs() as i64),
                tv_nsec: 0,
            },
        },
    }
}

fn trash_name(id: Id) -> CString {
    CString::new(format!("n{id}")).unwrap()
}

impl State {
    /// Walk the store as it is: all of it durable.
    pub fn load(root: OwnedFd, trash_fd: OwnedFd, spill: Spill) -> io::Result<State> {
        let mut st = State {
            ns: Namespace::new(),
            dir_fds: HashMap::new(),
            trash_fd,
            spill,
            files: HashMap::new(),
            dirs: HashMap::new(),
            next_fh: 1,
            frozen: false,
            crashed: false,
            stale_cache: (Vec::new(), Vec::new()),
            euid: unsafe { libc::geteuid() },
            egid: unsafe { libc::getegid() },
        };
        st.dir_fds.insert(ROOT, root);
        let mut stack = vec![ROOT];
        let mut seen: HashSet<(u64, u64)> = HashSet::new();
        while let Some(d) = stack.pop() {
            let entries = sys::list_dir(&st.dir_fds[&d])?;
            for (name, s) in entries {
                let kind = kind_of(s.st_mode);
                if kind == Kind::File && s.st_nlink > 1 && !seen.insert((s.st_dev, s.st_ino)) {
                    eprintln!(
                        "logfork-crashfs: warning: {:?} is a hard link to a file seen before; \
                         its names are tracked separately",
                        name
                    );
                }
                let id = st.ns.add_loaded(d, &name, kind, s.st_size as u64);
                if kind == Kind::Dir {
                    let fd = sys::open_dir_path(st.dir_fds[&d].as_raw_fd(), &sys::cstr(&name)?)?;
                    st.dir_fds.insert(id, fd);
                    stack.push(id);
                }
            }
        }
        Ok(st)
    }

    /// (dirfd, name) reaching a node's backing object.
    fn phys(&self, id: Id) -> Res<(RawFd, CString)> {
        if id == ROOT {
            return Ok((libc::AT_FDCWD, sys::proc_path(&self.dir_fds[&ROOT])));
        }
        match &self.ns.node(id).ok_or(Errno::ENOENT)?.loc {
            Loc::Store(p, name) => {
                let fd = self.dir_fds.get(p).ok_or(Errno::ENOENT)?;
                Ok((fd.as_raw_fd(), sys::cstr(name).map_err(errno)?))
            }
            Loc::Trash => Ok((self.trash_fd.as_raw_fd(), trash_name(id))),
            Loc::Gone => Err(Errno::ENOENT),
        }
    }

    fn dir_fd(&self, id: Id) -> Res<RawFd> {
        match self.ns.node(id) {
            Some(n) if n.kind == Kind::Dir => {
                Ok(self.dir_fds.get(&id).ok_or(Errno::ENOENT)?.as_raw_fd())
            }
            Some(_) => Err(Errno::ENOTDIR),
            None => Err(Errno::ENOENT),
        }
    }

    fn stat(&self, id: Id) -> Res<FileAttr> {
        let st = if let Some(fd) = self.dir_fds.get(&id) {
            sys::fstat(fd.as_raw_fd())
        } else {
            let (d, name) = self.phys(id)?;
            sys::fstatat(d, &name, libc::AT_SYMLINK_NOFOLLOW)
        };
        Ok(attr(id, &st.map_err(errno)?))
    }

    fn live(&self) -> Res<()> {
        if self.frozen { Err(Errno::EIO) } else { Ok(()) }
    }

    fn fh(&mut self) -> u64 {
        self.next_fh += 1;
        self.next_fh
    }

    /// Files created for another user belong to that user, as on a local filesystem.
    fn own(&self, req: &Request, dir: RawFd, name: &CString) {
        if (req.uid(), req.gid()) != (self.euid, self.egid) {
            let _ = sys::fchownat(dir, name, req.uid(), req.gid(), false);
        }
    }

    fn collect(&mut self) {
        if !self.ns.has_trash() {
            return;
        }
        for (id, kind) in self.ns.gc() {
            let name = trash_name(id);
            let r = if kind == Kind::Dir {
                sys::remove_tree(self.trash_fd.as_raw_fd(), &name)
            } else {
                sys::unlinkat(self.trash_fd.as_raw_fd(), &name, 0)
            };
            if let Err(e) = r {
                eprintln!("logfork-crashfs: could not delete trashed node {id}: {e}");
            }
            self.dir_fds.remove(&id);
        }
    }

    fn lookup(&mut self, parent: Id, name: &OsStr) -> Res<FileAttr> {
        self.dir_fd(parent)?;
        let id = self.ns.child(parent, name).ok_or(Errno::ENOENT)?;
        let a = self.stat(id)?;
        self.ns.node_mut(id).unwrap().lookups += 1;
        Ok(a)
    }

    fn handle_fd(&self, fh: u64, id: Id) -> Option<&File> {
        self.files
            .get(&fh)
            .filter(|h| h.node == id)
            .map(|h| &h.file)
    }

    fn getattr(&self, id: Id, fh: Option<u64>) -> Res<FileAttr> {
        if let Some(f) = fh.and_then(|fh| self.handle_fd(fh, id)) {
            return Ok(attr(id, &sys::fstat(f.as_raw_fd()).map_err(errno)?));
        }
        self.stat(id)
    }

    fn truncate(&mut self, id: Id, size: u64, fh: Option<u64>) -> Res<()> {
        let node = self.ns.node(id).ok_or(Errno::ENOENT)?;
        match node.kind {
            Kind::File => {}
            Kind::Dir => return Err(Errno::EISDIR),
            Kind::Other => return Err(Errno::EINVAL),
        }
        let owned;
        let file = match fh.and_then(|fh| self.files.get(&fh).filter(|h| h.node == id)) {
            Some(h) => &h.file,
            None => {
                let (d, name) = self.phys(id)?;
                owned = sys::open_file(d, &name).map_err(errno)?;
                &owned
            }
        };
        let clock = self.ns.tick();
        let log = self.ns.nodes.get_mut(&id).unwrap().file.as_mut().unwrap();
        log.truncate(clock, size, file, &mut self.spill)
            .map_err(errno)
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &mut self,
        id: Id,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        fh: Option<u64>,
    ) -> Res<FileAttr> {
        if let Some(size) = size {
            self.truncate(id, size, fh)?;
        }
        let follow = self.dir_fds.contains_key(&id);
        let (d, name) = if follow {
            // A directory: reach it through its own fd, wherever it is now.
            (libc::AT_FDCWD, sys::proc_path(&self.dir_fds[&id]))
        } else {
            self.phys(id)?
        };
        if let Some(mode) = mode {
            sys::fchmodat(d, &name, mode & 0o7777).map_err(errno)?;
        }
        if uid.is_some() || gid.is_some() {
            let (u, g) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
            sys::fchownat(d, &name, u, g, follow).map_err(errno)?;
        }
        if atime.is_some() || mtime.is_some() {
            let times = [timespec(atime), timespec(mtime)];
            sys::utimensat(d, &name, &times, follow).map_err(errno)?;
        }
        self.getattr(id, fh)
    }

    fn open(&mut self, id: Id, flags: i32) -> Res<u64> {
        let node = self.ns.node(id).ok_or(Errno::ENOENT)?;
        if node.kind != Kind::File {
            return Err(if node.kind == Kind::Dir {
                Errno::EISDIR
            } else {
                Errno::EPERM
            });
        }
        let (d, name) = self.phys(id)?;
        // Always read-write: saving a page's durable bytes before an overwrite needs to read.
        let file = sys::open_file(d, &name).map_err(errno)?;
        if flags & libc::O_TRUNC != 0 {
            let clock = self.ns.tick();
            let log = self.ns.nodes.get_mut(&id).unwrap().file.as_mut().unwrap();
            log.truncate(clock, 0, &file, &mut self.spill)
                .map_err(errno)?;
        }
        let fh = self.fh();
        self.files.insert(fh, Handle { file, node: id });
        self.ns.node_mut(id).unwrap().opens += 1;
        Ok(fh)
    }

    fn create(
        &mut self,
        req: &Request,
        parent: Id,
        name: &OsStr,
        mode: u32,
        open: bool,
    ) -> Res<(FileAttr, Option<u64>)> {
        let dfd = self.dir_fd(parent)?;
        if self.ns.child(parent, name).is_some() {
            return Err(Errno::EEXIST);
        }
        let cname = sys::cstr(name).map_err(errno)?;
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_NOFOLLOW;
        let fd = sys::openat(dfd, &cname, flags, mode & 0o7777).map_err(errno)?;
        self.own(req, dfd, &cname);
        let id = self.ns.create(parent, name, Kind::File);
        let file = File::from(fd);
        let a = attr(id, &sys::fstat(file.as_raw_fd()).map_err(errno)?);
        let node = self.ns.node_mut(id).unwrap();
        node.lookups += 1;
        if !open {
            return Ok((a, None));
        }
        node.opens += 1;
        let fh = self.fh();
        self.files.insert(fh, Handle { file, node: id });
        Ok((a, Some(fh)))
    }

    fn mkdir(&mut self, req: &Request, parent: Id, name: &OsStr, mode: u32) -> Res<FileAttr> {
        let dfd = self.dir_fd(parent)?;
        if self.ns.child(parent, name).is_some() {
            return Err(Errno::EEXIST);
        }
        let cname = sys::cstr(name).map_err(errno)?;
        sys::mkdirat(dfd, &cname, mode & 0o7777).map_err(errno)?;
        let fd = match sys::open_dir_path(dfd, &cname) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = sys::unlinkat(dfd, &cname, libc::AT_REMOVEDIR);
                return Err(errno(e));
            }
        };
        self.own(req, dfd, &cname);
        let id = self.ns.create(parent, name, Kind::Dir);
        self.dir_fds.insert(id, fd);
        let a = self.stat(id)?;
        self.ns.node_mut(id).unwrap().lookups += 1;
        Ok(a)
    }

    fn remove(&mut self, parent: Id, name: &OsStr, dir: bool) -> Res<()> {
        let dfd = self.dir_fd(parent)?;
        let id = self.ns.child(parent, name).ok_or(Errno::ENOENT)?;
        let node = self.ns.node(id).unwrap();
        match (dir, node.kind == Kind::Dir) {
            (true, false) => return Err(Errno::ENOTDIR),
            (false, true) => return Err(Errno::EISDIR),
            (true, true) if !node.entries.is_empty() => return Err(Errno::ENOTEMPTY),
            _ => {}
        }
        let cname = sys::cstr(name).map_err(errno)?;
        sys::renameat(dfd, &cname, self.trash_fd.as_raw_fd(), &trash_name(id), 0).map_err(errno)?;
        self.ns.remove(parent, name);
        self.collect();
        Ok(())
    }

    fn is_ancestor(&self, anc: Id, mut id: Id) -> bool {
        loop {
            if id == anc {
                return true;
            }
            match self.ns.node(id).map(|n| &n.loc) {
                Some(Loc::Store(p, _)) if id != ROOT => id = *p,
                _ => return false,
            }
        }
    }

    fn rename(&mut self, p1: Id, n1: &OsStr, p2: Id, n2: &OsStr, flags: u32) -> Res<()> {
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EINVAL); // RENAME_EXCHANGE, RENAME_WHITEOUT: not for Kafka
        }
        let (fd1, fd2) = (self.dir_fd(p1)?, self.dir_fd(p2)?);
        let src = self.ns.child(p1, n1).ok_or(Errno::ENOENT)?;
        let dst = self.ns.child(p2, n2);
        if dst == Some(src) {
            return Ok(());
        }
        if dst.is_some() && flags & libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EEXIST);
        }
        let src_dir = self.ns.node(src).unwrap().kind == Kind::Dir;
        if src_dir && self.is_ancestor(src, p2) {
            return Err(Errno::EINVAL);
        }
        if let Some(d) = dst {
            let dn = self.ns.node(d).unwrap();
            match (src_dir, dn.kind == Kind::Dir) {
                (true, false) => return Err(Errno::ENOTDIR),
                (false, true) => return Err(Errno::EISDIR),
                (true, true) if !dn.entries.is_empty() => return Err(Errno::ENOTEMPTY),
                _ => {}
            }
        }
        let (c1, c2) = (sys::cstr(n1).map_err(errno)?, sys::cstr(n2).map_err(errno)?);
        let tfd = self.trash_fd.as_raw_fd();
        // The replaced target goes to the trash first: a crash may have to bring it back.
        if let Some(d) = dst {
            sys::renameat(fd2, &c2, tfd, &trash_name(d), 0).map_err(errno)?;
        }
        if let Err(e) = sys::renameat(fd1, &c1, fd2, &c2, libc::RENAME_NOREPLACE) {
            if let Some(d) = dst {
                let _ = sys::renameat(tfd, &trash_name(d), fd2, &c2, 0);
            }
            return Err(errno(e));
        }
        self.ns.rename(p1, n1, p2, n2);
        if dst.is_some() {
            self.collect();
        }
        Ok(())
    }

    fn write(&mut self, fh: u64, off: u64, data: &[u8]) -> Res<u32> {
        let clock = self.ns.tick();
        let h = self.files.get(&fh).ok_or(Errno::EBADF)?;
        let node = self.ns.nodes.get_mut(&h.node).ok_or(Errno::EBADF)?;
        let log = node.file.as_mut().ok_or(Errno::EBADF)?;
        log.write(clock, off, data, &h.file, &mut self.spill)
            .map_err(errno)?;
        Ok(data.len() as u32)
    }

    fn read(&self, fh: u64, off: u64, size: u32) -> Res<Vec<u8>> {
        let h = self.files.get(&fh).ok_or(Errno::EBADF)?;
        let mut buf = vec![0u8; size as usize];
        let n = crate::model::PageIo::read_full(&h.file, &mut buf, off).map_err(errno)?;
        buf.truncate(n);
        Ok(buf)
    }

    fn fsync(&mut self, id: Id) -> Res<()> {
        self.ns.commit();
        let node = self.ns.nodes.get_mut(&id).ok_or(Errno::ENOENT)?;
        if let Some(log) = node.file.as_mut() {
            log.sync(&mut self.spill);
        }
        Ok(())
    }

    fn release(&mut self, fh: u64) {
        if let Some(h) = self.files.remove(&fh) {
            self.unopen(h.node);
        }
    }

    fn unopen(&mut self, id: Id) {
        let Some(n) = self.ns.node_mut(id) else {
            return;
        };
        n.opens = n.opens.saturating_sub(1);
        // The last close of a removed file may free it (not after a crash: nothing may move).
        if n.opens == 0 && n.loc == Loc::Trash && !self.frozen {
            self.collect();
        }
    }

    fn opendir(&mut self, id: Id) -> Res<u64> {
        self.dir_fd(id)?;
        let node = self.ns.node(id).unwrap();
        let parent = match &node.loc {
            Loc::Store(p, _) if id != ROOT => *p,
            _ => id,
        };
        let mut entries = vec![
            (id, FileType::Directory, OsString::from(".")),
            (parent, FileType::Directory, OsString::from("..")),
        ];
        for (name, &c) in &node.entries {
            let ft = match self.ns.node(c).map(|n| n.kind) {
                Some(Kind::Dir) => FileType::Directory,
                Some(Kind::File) => FileType::RegularFile,
                _ => match self.stat(c) {
                    Ok(a) => a.kind,
                    Err(_) => FileType::RegularFile,
                },
            };
            entries.push((c, ft, name.clone()));
        }
        let fh = self.fh();
        self.dirs.insert(fh, DirHandle { node: id, entries });
        self.ns.node_mut(id).unwrap().opens += 1;
        Ok(fh)
    }

    fn fallocate(&mut self, fh: u64, off: u64, len: u64, mode: i32) -> Res<()> {
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            return Err(Errno::EOPNOTSUPP); // punching or zeroing: a data change not modelled
        }
        let clock = self.ns.tick();
        let h = self.files.get(&fh).ok_or(Errno::EBADF)?;
        sys::fallocate(h.file.as_raw_fd(), mode, off, len).map_err(errno)?;
        if mode == 0
            && let Some(log) = self.ns.nodes.get_mut(&h.node).and_then(|n| n.file.as_mut())
        {
            log.grow(clock, off + len);
        }
        Ok(())
    }

    // ---- control operations ----

    fn files_in_tree(&self) -> Vec<(Id, String)> {
        let mut out: Vec<(Id, String)> = self
            .ns
            .nodes
            .iter()
            .filter(|(_, n)| n.kind == Kind::File && matches!(n.loc, Loc::Store(..)))
            .filter_map(|(&id, _)| Some((id, self.ns.path(id)?)))
            .collect();
        out.sort();
        out
    }

    fn pending_ops(&self, undone: bool) -> Vec<Value> {
        self.ns
            .ops
            .iter()
            .map(|op| {
                let mut v = json!({"op": op.kind.name(), "path": op.path});
                if let Some(to) = &op.to_path {
                    v["to"] = json!(to);
                }
                if undone {
                    v["undone"] = json!(true);
                }
                v
            })
            .collect()
    }

    pub fn status(&self) -> Value {
        let mut unsynced = serde_json::Map::new();
        if !self.crashed {
            for (id, path) in self.files_in_tree() {
                let log = self.ns.node(id).unwrap().file.as_ref().unwrap();
                if log.is_dirty() {
                    unsynced.insert(
                        path,
                        json!({
                            "pages": log.unsynced_pages(),
                            "bytes": log.bytes_written,
                            "size": log.size,
                            "durable_size": log.durable_size,
                        }),
                    );
                }
            }
        }
        json!({
            "ok": true,
            "crashed": self.crashed,
            "detached": self.frozen && !self.crashed,
            "unsynced": unsynced,
            "namespace_pending": if self.crashed { vec![] } else { self.pending_ops(false) },
        })
    }

    /// Every later request fails with EIO; what the kernel may have cached is noted for
    /// invalidation (`stale_cache`).
    fn freeze(&mut self) {
        self.frozen = true;
        for (&id, node) in &self.ns.nodes {
            self.stale_cache.0.push(id);
            for name in node.entries.keys() {
                self.stale_cache.1.push((id, name.clone()));
            }
        }
    }

    /// The disk goes away while the machine runs on (a failed drive, a pulled cable): every
    /// request fails with EIO until `reattach`. Unlike a crash nothing is rolled back: the
    /// store keeps whatever reached the daemon, as a drive keeps what it had written.
    pub fn detach(&mut self) -> Value {
        if self.frozen {
            let why = if self.crashed {
                "crashed"
            } else {
                "already detached"
            };
            return json!({"ok": false, "error": why});
        }
        self.freeze();
        json!({"ok": true})
    }

    /// The detached disk is back: requests reach the store again.
    pub fn reattach(&mut self) -> Value {
        if self.crashed || !self.frozen {
            let why = if self.crashed {
                "crashed"
            } else {
                "not detached"
            };
            return json!({"ok": false, "error": why});
        }
        self.frozen = false;
        json!({"ok": true})
    }

    pub fn sync_all(&mut self) -> Value {
        if self.crashed {
            return json!({"ok": false, "error": "crashed: nothing left to sync"});
        }
        for node in self.ns.nodes.values_mut() {
            if let Some(log) = node.file.as_mut() {
                log.sync(&mut self.spill);
            }
        }
        self.ns.sync_all();
        self.collect();
        json!({"ok": true})
    }

    /// Freeze, then rewrite the store to what survives a power loss under `model`.
    pub fn crash(&mut self, model: Model, seed: u64) -> Value {
        if self.crashed {
            return json!({"ok": false, "error": "already crashed"});
        }
        self.freeze();
        self.crashed = true;
        let mut errors: Vec<String> = Vec::new();
        let visible = self.files_in_tree();
        // `ordered`: the journal's last commit makes every change up to it durable first.
        let cut = (model == Model::Ordered).then(|| {
            let files = self.ns.nodes.values().filter_map(|n| n.file.as_ref());
            let cut = ordered::cut(&self.ns, files, &mut Rng::new(seed, 0));
            self.ns.commit_through(cut);
            cut
        });
        let survivors = self.ns.durable_tree();
        // Where a node is found after the crash: its durable entries up to the root.
        let path_after = |id: Id| -> Option<String> {
            let (mut d, name) = survivors.get(&id)?.clone();
            let mut parts = vec![name.to_string_lossy().into_owned()];
            while d != ROOT {
                let (p, n) = survivors.get(&d)?;
                parts.push(n.to_string_lossy().into_owned());
                d = *p;
            }
            parts.reverse();
            Some(parts.join("/"))
        };

        // 1. Data: every surviving file back to its durable bytes (plus what the model keeps).
        let mut outcomes = HashMap::new();
        let mut ids: Vec<Id> = survivors.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let Some(node) = self.ns.node(id) else {
                continue;
            };
            if node.kind != Kind::File {
                continue;
            }
            let res = (|| -> Result<_, String> {
                let (d, name) = self.phys(id).map_err(|e| format!("{e:?}"))?;
                let file = sys::open_file(d, &name).map_err(|e| e.to_string())?;
                let size = crate::model::PageIo::size(&file).map_err(|e| e.to_string())?;
                let log = self.ns.nodes.get_mut(&id).unwrap().file.as_mut().unwrap();
                let mut rng = Rng::new(seed, id);
                match cut {
                    Some(cut) => {
                        let (kept, shape) = ordered::keep(log, size, cut, &mut rng);
                        log.crash_to(&kept, shape, &file, &mut self.spill)
                    }
                    None => {
                        let kept = log.choose_kept(model, size, &mut rng);
                        log.crash(&kept, &file, &mut self.spill)
                    }
                }
                .map_err(|e| e.to_string())
            })();
            match res {
                Ok(out) => {
                    outcomes.insert(id, out);
                }
                Err(e) => errors.push(format!("data of node {id}: {e}")),
            }
        }
        let mut files = Vec::new();
        for (id, path) in &visible {
            let log = self.ns.node(*id).unwrap().file.as_ref().unwrap();
            let entry = match outcomes.get(id) {
                Some(out) => {
                    let after = path_after(*id);
                    if out.dropped.is_empty()
                        && out.size_before == out.size_after
                        && after.as_deref() == Some(path.as_str())
                    {
                        continue;
                    }
                    json!({
                        "path": path, "dropped": out.dropped, "size_before": out.size_before,
                        "size_after": out.size_after, "survives": true, "path_after": after,
                    })
                }
                None => {
                    let size = log.size;
                    let dropped: Vec<(u64, u64)> = if size > 0 { vec![(0, size)] } else { vec![] };
                    json!({
                        "path": path, "dropped": dropped, "size_before": size,
                        "size_after": 0, "survives": false, "path_after": null,
                    })
                }
            };
            files.push(entry);
        }
        let namespace = self.pending_ops(true);

        // 2. Namespace: move everything out of place into a staging directory, then each
        // survivor to its durable place. Parents are reached by fd, so the order is free.
        if let Err(e) = self.rebuild(&survivors) {
            errors.push(format!("namespace: {e}"));
        }
        let mut reply = json!({
            "ok": errors.is_empty(),
            "model": model.name(),
            "seed": seed,
            "files": files,
            "namespace": namespace,
        });
        if !errors.is_empty() {
            reply["error"] = json!(errors.join("; "));
        }
        reply
    }

    fn rebuild(&mut self, survivors: &HashMap<Id, (Id, OsString)>) -> io::Result<()> {
        let tfd = self.trash_fd.as_raw_fd();
        let stage_name = CString::new("stage").unwrap();
        sys::remove_tree(tfd, &stage_name)?;
        sys::mkdirat(tfd, &stage_name, 0o700)?;
        let stage = sys::open_dir_path(tfd, &stage_name)?;
        let sfd = stage.as_raw_fd();
        let sname = |id: Id| CString::new(format!("s{id}")).unwrap();
        let mut ids: Vec<Id> = self
            .ns
            .nodes
            .keys()
            .copied()
            .filter(|&i| i != ROOT)
            .collect();
        ids.sort_unstable();
        let mut moved = Vec::new();
        for id in ids {
            let node = self.ns.node(id).unwrap();
            let here = match &node.loc {
                Loc::Store(p, n) => Some((*p, n.clone())),
                Loc::Trash => None,
                Loc::Gone => continue,
            };
            if here.is_some() && here.as_ref() == survivors.get(&id) {
                continue;
            }
            let (d, name) = self
                .phys(id)
                .map_err(|e| io::Error::from_raw_os_error(e.code()))?;
            sys::renameat(d, &name, sfd, &sname(id), 0)?;
            moved.push(id);
        }
        for id in moved {
            let node = self.ns.node_mut(id).unwrap();
            node.loc = Loc::Gone;
            if let Some((p, n)) = survivors.get(&id) {
                let pfd = self
                    .dir_fds
                    .get(p)
                    .ok_or_else(|| io::Error::other("lost parent"))?;
                sys::renameat(sfd, &sname(id), pfd.as_raw_fd(), &sys::cstr(n)?, 0)?;
                self.ns.node_mut(id).unwrap().loc = Loc::Store(*p, n.clone());
            }
        }
        drop(stage);
        sys::remove_tree(tfd, &stage_name)
    }
}

pub struct CrashFs {
    pub state: Arc<Mutex<State>>,
}

impl CrashFs {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

macro_rules! live {
    ($st:ident, $reply:ident) => {
        if $st.live().is_err() {
            $reply.error(Errno::EIO);
            return;
        }
    };
}

impl Filesystem for CrashFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // 1 MiB writes (the kernel caps it at its max_pages); no writeback cache, on purpose:
        // every write must reach the daemon in order, and mmap must stay coherent.
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut st = self.lock();
        live!(st, reply);
        match st.lookup(parent.0, name) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let mut st = self.lock();
        st.ns.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let st = self.lock();
        live!(st, reply);
        match st.getattr(ino.0, fh.map(|f| f.0)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
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
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut st = self.lock();
        live!(st, reply);
        match st.setattr(ino.0, mode, uid, gid, size, atime, mtime, fh.map(|f| f.0)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let st = self.lock();
        live!(st, reply);
        match st
            .phys(ino.0)
            .and_then(|(d, n)| sys::readlinkat(d, &n).map_err(errno))
        {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        live!(st, reply);
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(Errno::EPERM);
        }
        match st.create(req, parent.0, name, mode & !umask, false) {
            Ok((a, _)) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        live!(st, reply);
        match st.mkdir(req, parent.0, name, mode & !umask) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.lock();
        live!(st, reply);
        match st.remove(parent.0, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.lock();
        live!(st, reply);
        match st.remove(parent.0, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
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
        let mut st = self.lock();
        live!(st, reply);
        match st.rename(parent.0, name, newparent.0, newname, flags.bits()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut st = self.lock();
        live!(st, reply);
        match st.open(ino.0, flags.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let st = self.lock();
        live!(st, reply);
        match st.read(fh.0, offset, size) {
            Ok(buf) => reply.data(&buf),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut st = self.lock();
        live!(st, reply);
        match st.write(fh.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
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
        let st = self.lock();
        live!(st, reply);
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Still honoured after a crash: closing our fd changes nothing in the store.
        self.lock().release(fh.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        let mut st = self.lock();
        live!(st, reply);
        match st.fsync(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut st = self.lock();
        live!(st, reply);
        match st.opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let st = self.lock();
        live!(st, reply);
        let Some(h) = st.dirs.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, (id, ft, name)) in h.entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*id), i as u64 + 1, *ft, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        if let Some(h) = st.dirs.remove(&fh.0) {
            st.unopen(h.node);
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _ds: bool,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        live!(st, reply);
        st.ns.fsyncdir(ino.0);
        st.collect();
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let st = self.lock();
        live!(st, reply);
        match sys::fstatvfs(st.dir_fds[&ROOT].as_raw_fd()) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOTSUP);
    }

    fn getxattr(&self, _req: &Request, _ino: INodeNo, _n: &OsStr, _s: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOTSUP);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOTSUP);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::ENOTSUP);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let st = self.lock();
        live!(st, reply);
        reply.ok(); // default_permissions: the kernel has checked already
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut st = self.lock();
        live!(st, reply);
        let _ = flags; // a new file: O_TRUNC is moot, O_APPEND comes with each write's offset
        match st.create(req, parent.0, name, mode & !umask, true) {
            Ok((a, Some(fh))) => {
                reply.created(&TTL, &a, Generation(0), FileHandle(fh), FopenFlags::empty())
            }
            Ok((_, None)) => reply.error(Errno::EIO),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        live!(st, reply);
        match st.fallocate(fh.0, offset, length, mode) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
