//! logfork-crashfs: a FUSE passthrough over a broker's log directory whose writes survive a
//! simulated power loss only as far as fsync made them durable (the LazyFS model, "When
//! Amnesia Strikes", VLDB 2024; our own implementation).
//!
//!   logfork-crashfs --store DIR --mountpoint DIR --trash DIR --control SOCKET [--seed N]
//!
//! Runs in the foreground until unmounted (or SIGTERM/SIGINT, which unmount). The control
//! socket speaks one JSON object per line: {"op":"status"}, {"op":"sync_all"},
//! {"op":"crash","model":"unsynced"|"torn"|"reorder"|"ordered","seed":N}.

mod fs;
mod model;
mod ordered;
mod sys;

use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use fuser::{Config, INodeNo, MountOption, Notifier, Session, SessionACL};
use serde_json::{Value, json};

use crate::fs::{CrashFs, State};
use crate::model::{Model, Spill};

const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

struct Args {
    store: PathBuf,
    mountpoint: PathBuf,
    trash: PathBuf,
    control: PathBuf,
    seed: u64,
}

fn usage() -> String {
    "usage: logfork-crashfs --store DIR --mountpoint DIR --trash DIR --control SOCKET [--seed N]"
        .into()
}

fn parse_args() -> Result<Args, String> {
    let (mut store, mut mountpoint, mut trash, mut control, mut seed) = (None, None, None, None, 0);
    let mut it = std::env::args_os().skip(1);
    while let Some(flag) = it.next() {
        let flag = flag.to_string_lossy().into_owned();
        if flag == "-h" || flag == "--help" {
            return Err(usage());
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{}", usage()))?;
        match flag.as_str() {
            "--store" => store = Some(PathBuf::from(value)),
            "--mountpoint" => mountpoint = Some(PathBuf::from(value)),
            "--trash" => trash = Some(PathBuf::from(value)),
            "--control" => control = Some(PathBuf::from(value)),
            "--seed" => {
                seed = value
                    .to_string_lossy()
                    .parse()
                    .map_err(|_| "--seed needs an integer")?
            }
            _ => return Err(format!("unknown argument {flag}\n{}", usage())),
        }
    }
    let need = |v: Option<PathBuf>, name: &str| {
        v.ok_or_else(|| format!("{name} is required\n{}", usage()))
    };
    Ok(Args {
        store: need(store, "--store")?,
        mountpoint: need(mountpoint, "--mountpoint")?,
        trash: need(trash, "--trash")?,
        control: need(control, "--control")?,
        seed,
    })
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("path with NUL")
}

static MOUNTED: OnceLock<(CString, PathBuf)> = OnceLock::new();

/// Unmount our mount; as non-root, through fusermount3 (lazily, as a busy mount must go too).
fn unmount(mountpoint: &CString) {
    match sys::unmount(mountpoint) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            let path = std::ffi::OsStr::from_bytes(mountpoint.as_bytes());
            let _ = std::process::Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(path)
                .status();
        }
        Err(e) => eprintln!("logfork-crashfs: unmount: {e}"),
    }
}

fn handle(state: &Mutex<State>, notifier: &Notifier, line: &str, default_seed: u64) -> Value {
    let req: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return json!({"ok": false, "error": format!("bad request: {e}")}),
    };
    let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
    match req["op"].as_str() {
        Some("status") => lock().status(),
        Some("sync_all") => lock().sync_all(),
        Some("crash") => {
            let Some(model) = req["model"].as_str().and_then(Model::parse) else {
                return json!({"ok": false, "error": "model must be unsynced, torn, reorder or ordered"});
            };
            let seed = req["seed"].as_u64().unwrap_or(default_seed);
            frozen(notifier, || {
                let mut st = lock();
                let reply = st.crash(model, seed);
                (reply, std::mem::take(&mut st.stale_cache))
            })
        }
        Some("detach") => frozen(notifier, || {
            let mut st = lock();
            let reply = st.detach();
            (reply, std::mem::take(&mut st.stale_cache))
        }),
        Some("reattach") => lock().reattach(),
        other => json!({"ok": false, "error": format!("unknown op {other:?}")}),
    }
}

type StaleCache = (Vec<u64>, Vec<(u64, std::ffi::OsString)>);

/// Runs a request that freezes the store, then drops what the kernel cached of it (outside
/// the lock). Frozen means frozen for cached pages, attributes and names too, so that every
/// later access reaches the daemon and fails with EIO. (Errors only say the kernel had
/// nothing cached.)
fn frozen(notifier: &Notifier, freeze: impl FnOnce() -> (Value, StaleCache)) -> Value {
    let (reply, (inodes, entries)) = freeze();
    for (dir, name) in entries {
        let _ = notifier.inval_entry(INodeNo(dir), &name);
    }
    for ino in inodes {
        let _ = notifier.inval_inode(INodeNo(ino), 0, 0);
    }
    reply
}

fn serve(conn: UnixStream, state: Arc<Mutex<State>>, notifier: Arc<Notifier>, seed: u64) {
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        let mut reply = handle(&state, &notifier, &line, seed).to_string();
        reply.push('\n');
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn block_signals() -> libc::sigset_t {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        // Before any thread exists, so that every thread inherits the mask and only the
        // signal thread below ever sees them.
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn setup(args: &Args) -> Result<(State, std::os::fd::OwnedFd, CString), String> {
    let canon = |p: &Path, what: &str| {
        std::fs::canonicalize(p).map_err(|e| format!("{what} {}: {e}", p.display()))
    };
    let store = canon(&args.store, "--store")?;
    std::fs::create_dir_all(&args.trash).map_err(|e| format!("--trash: {e}"))?;
    let trash = canon(&args.trash, "--trash")?;
    if trash.starts_with(&store) || store.starts_with(&trash) {
        return Err(format!(
            "--trash {} and --store {} must not contain one another",
            trash.display(),
            store.display()
        ));
    }
    let at = libc::AT_FDCWD;
    let root = sys::open_dir_path(at, &cpath(&store)).map_err(|e| format!("--store: {e}"))?;
    if sys::fstatfs_type(root.as_raw_fd()).map_err(|e| e.to_string())? == FUSE_SUPER_MAGIC {
        return Err(format!(
            "--store {} is itself a FUSE mount (a crashfs left mounted?); unmount it first",
            store.display()
        ));
    }
    let tparent = sys::open_dir_path(at, &cpath(&trash)).map_err(|e| format!("--trash: {e}"))?;
    let dev = |fd: &std::os::fd::OwnedFd| sys::fstat(fd.as_raw_fd()).map(|s| s.st_dev);
    if dev(&root).map_err(|e| e.to_string())? != dev(&tparent).map_err(|e| e.to_string())? {
        return Err("--trash must be on the same filesystem as --store".into());
    }
    let instance = CString::new(format!("crashfs-{}", std::process::id())).unwrap();
    let tfd = tparent.as_raw_fd();
    let mk = || -> std::io::Result<_> {
        sys::remove_tree(tfd, &instance)?;
        sys::mkdirat(tfd, &instance, 0o700)?;
        let trash_fd = sys::open_dir_path(tfd, &instance)?;
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR;
        let undo = sys::openat(
            trash_fd.as_raw_fd(),
            &CString::new("undo").unwrap(),
            flags,
            0o600,
        )?;
        Ok((trash_fd, undo))
    };
    let (trash_fd, undo) = mk().map_err(|e| format!("--trash: {e}"))?;
    let state = State::load(root, trash_fd, Spill::new(std::fs::File::from(undo)))
        .map_err(|e| format!("reading the store: {e}"))?;
    Ok((state, tparent, instance))
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let sigset = block_signals();
    // Modes given by the kernel are final (it applied the caller's umask already).
    unsafe { libc::umask(0) };
    let mountpoint = std::fs::canonicalize(&args.mountpoint)
        .map_err(|e| format!("--mountpoint {}: {e}", args.mountpoint.display()))?;
    let (state, trash_parent, instance) = setup(&args)?;
    let cleanup_trash = || {
        if let Err(e) = sys::remove_tree(trash_parent.as_raw_fd(), &instance) {
            eprintln!("logfork-crashfs: cleaning the trash: {e}");
        }
    };
    if let Ok(md) = std::fs::symlink_metadata(&args.control)
        && md.file_type().is_socket()
    {
        let _ = std::fs::remove_file(&args.control);
    }
    let listener = match UnixListener::bind(&args.control) {
        Ok(l) => l,
        Err(e) => {
            cleanup_trash();
            return Err(format!("--control {}: {e}", args.control.display()));
        }
    };
    // Only root may crash the filesystem (umask is 0 here, so the socket came out 0777).
    let _ = std::fs::set_permissions(&args.control, std::fs::Permissions::from_mode(0o600));
    let state = Arc::new(Mutex::new(state));

    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("logfork-crashfs".into()),
        MountOption::CUSTOM("subtype=logfork-crashfs".into()),
        MountOption::DefaultPermissions,
    ];
    // allow_other: brokers in containers reach the store through a bind mount.
    config.acl = SessionACL::All;
    let fs = CrashFs {
        state: state.clone(),
    };
    let session = match Session::new(fs, &mountpoint, &config) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&args.control);
            cleanup_trash();
            return Err(format!("mounting on {}: {e}", mountpoint.display()));
        }
    };
    let notifier = Arc::new(session.notifier());
    let mp = cpath(&mountpoint);
    let _ = MOUNTED.set((mp.clone(), args.control.clone()));
    // A bug must not leave a dead mount behind: detach it, then go.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("logfork-crashfs: fatal: {info}");
        if let Some((mp, control)) = MOUNTED.get() {
            unsafe { libc::umount2(mp.as_ptr(), libc::MNT_DETACH) };
            let _ = std::fs::remove_file(control);
        }
        std::process::exit(101);
    }));

    {
        let mp = mp.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                loop {
                    let mut sig = 0;
                    if unsafe { libc::sigwait(&sigset, &mut sig) } == 0 {
                        unmount(&mp);
                    }
                }
            })
            .map_err(|e| e.to_string())?;
    }
    {
        let (state, seed) = (state.clone(), args.seed);
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let (state, notifier) = (state.clone(), notifier.clone());
                    let _ = std::thread::Builder::new()
                        .name("control-conn".into())
                        .spawn(move || serve(conn, state, notifier, seed));
                }
            })
            .map_err(|e| e.to_string())?;
    }

    let res = session.run();
    if res.is_err() {
        unmount(&mp);
    }
    let _ = std::fs::remove_file(&args.control);
    cleanup_trash();
    res.map_err(|e| format!("serving the mount: {e}"))
}

fn main() {
    match run() {
        Ok(()) => {}
        Err(e) => {
            eprintln!("logfork-crashfs: {e}");
            std::process::exit(1);
        }
    }
}
