//! Thin wrappers over the *at() syscalls. Every backing operation goes through a directory fd
//! opened before the mount, so the store can be mounted over and still be reached underneath.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

pub fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn openat(dir: RawFd, name: &CString, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let fd = check(unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC, mode) })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An O_PATH handle on a directory: enough for *at() calls, survives renames of the directory.
pub fn open_dir_path(dir: RawFd, name: &CString) -> io::Result<OwnedFd> {
    openat(
        dir,
        name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
}

pub fn open_file(dir: RawFd, name: &CString) -> io::Result<File> {
    Ok(File::from(openat(
        dir,
        name,
        libc::O_RDWR | libc::O_NOFOLLOW,
        0,
    )?))
}

pub fn fstatat(dir: RawFd, name: &CString, flags: i32) -> io::Result<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, flags) })?;
    Ok(st)
}

pub fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

pub fn renameat(od: RawFd, on: &CString, nd: RawFd, nn: &CString, flags: u32) -> io::Result<()> {
    check(unsafe { libc::renameat2(od, on.as_ptr(), nd, nn.as_ptr(), flags) })?;
    Ok(())
}

pub fn unlinkat(dir: RawFd, name: &CString, flags: i32) -> io::Result<()> {
    check(unsafe { libc::unlinkat(dir, name.as_ptr(), flags) })?;
    Ok(())
}

pub fn mkdirat(dir: RawFd, name: &CString, mode: u32) -> io::Result<()> {
    check(unsafe { libc::mkdirat(dir, name.as_ptr(), mode) })?;
    Ok(())
}

pub fn fchmodat(dir: RawFd, name: &CString, mode: u32) -> io::Result<()> {
    check(unsafe { libc::fchmodat(dir, name.as_ptr(), mode, 0) })?;
    Ok(())
}

/// `follow`: true only for /proc/self/fd paths, whose magic link is the object itself.
fn nofollow(follow: bool) -> i32 {
    if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW }
}

pub fn fchownat(dir: RawFd, name: &CString, uid: u32, gid: u32, follow: bool) -> io::Result<()> {
    let flags = nofollow(follow);
    check(unsafe { libc::fchownat(dir, name.as_ptr(), uid, gid, flags) })?;
    Ok(())
}

pub fn utimensat(
    dir: RawFd,
    name: &CString,
    times: &[libc::timespec; 2],
    follow: bool,
) -> io::Result<()> {
    let flags = nofollow(follow);
    check(unsafe { libc::utimensat(dir, name.as_ptr(), times.as_ptr(), flags) })?;
    Ok(())
}

pub fn readlinkat(dir: RawFd, name: &CString) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

pub fn fallocate(fd: RawFd, mode: i32, off: u64, len: u64) -> io::Result<()> {
    check(unsafe { libc::fallocate(fd, mode, off as i64, len as i64) })?;
    Ok(())
}

pub fn fstatvfs(fd: RawFd) -> io::Result<libc::statvfs> {
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatvfs(fd, &mut st) })?;
    Ok(st)
}

pub fn fstatfs_type(fd: RawFd) -> io::Result<i64> {
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatfs(fd, &mut st) })?;
    Ok(st.f_type as i64)
}

/// The path that reopens an fd's own object (never the mount stacked on its path).
pub fn proc_path(fd: &impl AsRawFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap()
}

/// Entries of a directory held by an O_PATH fd, sorted by name so that node numbering, and
/// with it every seeded choice, is the same on every run over the same store.
pub fn list_dir(fd: &OwnedFd) -> io::Result<Vec<(std::ffi::OsString, libc::stat)>> {
    let path = proc_path(fd);
    let path = std::path::Path::new(OsStr::from_bytes(path.as_bytes()));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let name = entry?.file_name();
        let st = fstatat(fd.as_raw_fd(), &cstr(&name)?, libc::AT_SYMLINK_NOFOLLOW)?;
        out.push((name, st));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// rm -rf of `name` under `dir`, without following symlinks or leaving the filesystem.
pub fn remove_tree(dir: RawFd, name: &CString) -> io::Result<()> {
    let st = match fstatat(dir, name, libc::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(e),
    };
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        let sub = open_dir_path(dir, name)?;
        for (child, _) in list_dir(&sub)? {
            remove_tree(sub.as_raw_fd(), &cstr(&child)?)?;
        }
        unlinkat(dir, name, libc::AT_REMOVEDIR)
    } else {
        unlinkat(dir, name, 0)
    }
}

/// umount2 as root; a busy mount (a process still inside) is detached instead.
pub fn unmount(path: &CString) -> io::Result<()> {
    if unsafe { libc::umount2(path.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EBUSY) {
        check(unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) })?;
        return Ok(());
    }
    Err(err)
}
