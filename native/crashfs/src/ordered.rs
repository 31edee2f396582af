//! The `ordered` model: what ext4 in its default `data=ordered` mode keeps, as ALICE's
//! abstract persistence model of it has it (Pillai et al., "All File Systems Are Not Created
//! Equal", OSDI 2014), where `unsynced`, `torn` and `reorder` keep only what POSIX promises.
//!
//! - Metadata (creates, renames, unlinks, mkdirs, rmdirs and size changes) reaches the disk
//!   through one journal, as an ordered prefix: the journal's last commit before the power
//!   went, at any moment after the last fsync (jbd2 commits on a timer, 5 s by default).
//! - An fsync or fsyncdir of anything commits the whole running journal: every metadata
//!   change made before it is durable, whichever file or directory it touched.
//! - A file's appended data reaches the disk before the size change that exposes it (delayed
//!   allocation writes pages back in offset order and raises the on-disk size only over what
//!   it wrote): a surviving append is a prefix of the file's pages written before the
//!   commit, never garbage. Pages overwritten inside the file may reach the disk or not,
//!   each on its own, as `reorder` has it.
//! - A file renamed over another has the data written before the rename on disk when the
//!   rename commits (`auto_da_alloc`, on by default: ext4's answer to replace-by-rename
//!   without fsync, the pattern of every checkpoint file).
//!
//! Limits: a commit falls between any two changes, where jbd2 batches them (a superset of
//! ext4's states); a file created and removed in one directory between fsyncs is not brought
//! back (the daemon forgets it at once); data written after the commit point is not kept.

use std::collections::HashSet;

use crate::model::{FileLog, Namespace, PAGE, Rng, Survivor};

/// The clock of the journal's last commit: the last fsync's, or a seeded later change's.
pub fn cut<'a>(ns: &Namespace, files: impl Iterator<Item = &'a FileLog>, rng: &mut Rng) -> u64 {
    let mut later: Vec<u64> = ns.ops.iter().map(|o| o.seq).collect();
    for f in files {
        later.extend(f.stamps.values().copied());
        later.extend(f.resizes.iter().map(|r| r.0));
    }
    later.retain(|&s| s > ns.committed);
    later.sort_unstable();
    later.dedup();
    match rng.below(later.len() as u64 + 1) as usize {
        0 => ns.committed,
        k => later[k - 1],
    }
}

/// The pages of one file that survive a commit at `cut`, and the size it is left at.
pub fn keep(log: &FileLog, size: u64, cut: u64, rng: &mut Rng) -> (HashSet<u64>, Survivor) {
    let resized: Vec<(u64, u64)> = log.resizes.iter().copied().filter(|r| r.0 <= cut).collect();
    let last = resized.last().copied();
    let shape = Survivor {
        size: last.map_or(log.durable_size, |r| r.1),
        zero_from: resized.iter().map(|r| r.1).min().unwrap_or(u64::MAX),
    };
    let mut pages: Vec<u64> = log
        .candidates(size)
        .into_iter()
        .filter(|p| log.stamps.get(p).is_some_and(|&s| s <= cut))
        .collect();
    pages.sort_unstable();
    // auto_da_alloc: what was written before a committed rename over another file is kept.
    let forced = |p: &u64| {
        log.renamed_over
            .is_some_and(|at| at <= cut && log.stamps[p] < at)
    };
    let mut kept = HashSet::new();
    let mut growth = Vec::new();
    for p in pages {
        if (p + 1) * PAGE <= shape.size {
            if rng.next() & 1 == 1 || forced(&p) {
                kept.insert(p);
            }
            continue;
        }
        // Past the committed size: only a run of pages from it, each written after the last
        // committed truncation where that truncation cut it.
        let next = growth.last().map_or(shape.size / PAGE, |q: &u64| q + 1);
        let cut_by_resize = last.is_some_and(|(at, to)| p * PAGE >= to && log.stamps[&p] < at);
        if p != next || cut_by_resize {
            break;
        }
        growth.push(p);
    }
    let least = growth.iter().take_while(|p| forced(p)).count();
    let k = least + rng.below((growth.len() - least) as u64 + 1) as usize;
    kept.extend(&growth[..k]);
    (kept, shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::{Mem, spill};
    use crate::model::{Kind, ROOT};
    use std::ffi::OsStr;

    fn os(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn any_fsync_commits_every_earlier_namespace_change() {
        let mut seen = HashSet::new();
        for seed in 0..20 {
            let mut ns = Namespace::new();
            let marker = ns.add_loaded(ROOT, os(".kafka_cleanshutdown"), Kind::File, 0);
            let d = ns.create(ROOT, os("t-0"), Kind::Dir);
            ns.remove(ROOT, os(".kafka_cleanshutdown"));
            ns.commit(); // a segment's fsync, in another directory
            let late = ns.create(d, os("late"), Kind::File);
            let c = cut(&ns, std::iter::empty(), &mut Rng::new(seed, 0));
            ns.commit_through(c);
            let tree = ns.durable_tree();
            assert!(
                !tree.contains_key(&marker),
                "seed {seed}: the unlink was committed"
            );
            assert!(
                tree.contains_key(&d),
                "seed {seed}: the mkdir was committed"
            );
            assert_eq!(tree.contains_key(&late), c == ns.clock, "seed {seed}");
            seen.insert(c == ns.clock);
        }
        assert_eq!(
            seen.len(),
            2,
            "the later create sometimes committed, sometimes not"
        );
    }

    #[test]
    fn a_file_renamed_over_another_keeps_what_was_written_before() {
        for seed in 0..20 {
            let mut sp = spill();
            let mut ns = Namespace::new();
            ns.add_loaded(ROOT, os("cp"), Kind::File, 0);
            let tmp = ns.create(ROOT, os("cp.tmp"), Kind::File);
            let io = Mem(std::cell::RefCell::new(Vec::new()));
            let clock = ns.tick();
            let log = ns.node_mut(tmp).unwrap().file.as_mut().unwrap();
            log.write(clock, 0, &[3u8; 5000], &io, &mut sp).unwrap();
            ns.rename(ROOT, os("cp.tmp"), ROOT, os("cp")).unwrap();
            let mut rng = Rng::new(seed, 4);
            let c = cut(&ns, std::iter::empty(), &mut rng);
            let log = ns.node(tmp).unwrap().file.as_ref().unwrap();
            let (kept, _) = keep(log, 5000, c, &mut rng);
            if c == ns.clock {
                assert_eq!(
                    kept,
                    HashSet::from([0, 1]),
                    "seed {seed}: the rename committed"
                );
            }
        }
    }

    #[test]
    fn namespace_changes_survive_as_a_prefix() {
        let mut seen = HashSet::new();
        for seed in 0..40 {
            let mut ns = Namespace::new();
            let ids: Vec<_> = (0..5)
                .map(|i| ns.create(ROOT, os(&format!("f{i}")), Kind::File))
                .collect();
            let c = cut(&ns, std::iter::empty(), &mut Rng::new(seed, 0));
            ns.commit_through(c);
            let tree = ns.durable_tree();
            let n = ids.iter().take_while(|i| tree.contains_key(i)).count();
            assert!(
                ids[n..].iter().all(|i| !tree.contains_key(i)),
                "seed {seed}"
            );
            seen.insert(n);
        }
        assert!(seen.len() >= 4, "prefixes of varied length: {seen:?}");
    }

    #[test]
    fn appends_survive_as_a_prefix_with_their_data() {
        let mut seen = HashSet::new();
        for seed in 0..40 {
            let mut sp = spill();
            let io = Mem(std::cell::RefCell::new(vec![1u8; 100]));
            let mut log = FileLog::durable(100);
            for i in 0..4u64 {
                let off = 100 + i * PAGE;
                log.write(i + 1, off, &[i as u8 + 2; PAGE as usize], &io, &mut sp)
                    .unwrap();
            }
            let size = 100 + 4 * PAGE;
            let mut rng = Rng::new(seed, 5);
            let (kept, shape) = keep(&log, size, 3, &mut rng);
            assert_eq!(shape.size, 100);
            // Pages 0..=2 were written by clock 3; page 3's second half and page 4 after it.
            assert!(kept.iter().all(|&p| p <= 2));
            let n = kept.len() as u64;
            assert!(
                (0..n).all(|p| kept.contains(&p)),
                "a run from the old end: {kept:?}"
            );
            let out = log.crash_to(&kept, shape, &io, &mut sp).unwrap();
            let v = io.0.borrow();
            assert_eq!(v.len() as u64, if n == 0 { 100 } else { n * PAGE });
            assert!(v[..100].iter().all(|&b| b == 1));
            for (i, &b) in v.iter().enumerate().skip(100) {
                assert_eq!(
                    b,
                    ((i as u64 - 100) / PAGE) as u8 + 2,
                    "seed {seed} byte {i}"
                );
            }
            assert_eq!(out.size_after, v.len() as u64);
            seen.insert(n);
        }
        assert!(seen.len() >= 3, "{seen:?}");
    }

    #[test]
    fn a_committed_truncation_survives_and_an_uncommitted_one_is_undone() {
        for (cut_at, want) in [(1u64, 3000usize), (0, 9000)] {
            let mut sp = spill();
            let durable: Vec<u8> = (0..9000u32).map(|i| (i % 7 + 1) as u8).collect();
            let io = Mem(std::cell::RefCell::new(durable.clone()));
            let mut log = FileLog::durable(9000);
            log.truncate(1, 3000, &io, &mut sp).unwrap();
            let (kept, shape) = keep(&log, 3000, cut_at, &mut Rng::new(1, 1));
            assert!(kept.is_empty());
            log.crash_to(&kept, shape, &io, &mut sp).unwrap();
            assert_eq!(*io.0.borrow(), durable[..want]);
        }
    }

    #[test]
    fn growth_after_a_committed_truncation_reads_what_was_written_after_it() {
        let mut sp = spill();
        let io = Mem(std::cell::RefCell::new(vec![5u8; 3 * PAGE as usize]));
        let mut log = FileLog::durable(3 * PAGE);
        log.truncate(1, PAGE, &io, &mut sp).unwrap();
        log.write(2, PAGE, &[8u8; PAGE as usize], &io, &mut sp)
            .unwrap();
        for seed in 0..20 {
            let (kept, shape) = keep(&log, 2 * PAGE, 2, &mut Rng::new(seed, 2));
            assert_eq!(
                shape,
                Survivor {
                    size: PAGE,
                    zero_from: PAGE
                }
            );
            assert!(kept.is_empty() || kept == HashSet::from([1]));
        }
        let (kept, shape) = (
            HashSet::from([1]),
            Survivor {
                size: PAGE,
                zero_from: PAGE,
            },
        );
        log.crash_to(&kept, shape, &io, &mut sp).unwrap();
        let v = io.0.borrow();
        assert_eq!(v.len() as u64, 2 * PAGE);
        assert!(v[..PAGE as usize].iter().all(|&b| b == 5));
        assert!(v[PAGE as usize..].iter().all(|&b| b == 8));
    }
}
