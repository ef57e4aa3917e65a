//! The CPU budget (`cpu_affinity`): the cores a pipeline's threads may run
//! on. Each thread the pipeline starts (the record threads, the streams
//! thread, the workers) pins itself first; the threads those start (shard
//! readers, prefilters, the global shuffle's loader) inherit the mask from
//! them, as Linux threads do, and so do those the caller starts while the
//! pipeline opens its streams (the first shard readers), which it does
//! pinned ([`CpuAffinity::while_pinned`]). So a training step's own threads keep the other
//! cores, whatever the pipeline's load.

use std::sync::Arc;

use crate::pipeline::error::SettingError;

/// A set of cores, or none (run anywhere the process may).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpuAffinity(Option<Arc<[usize]>>);

impl CpuAffinity {
    /// The cores given, sorted, each once.
    pub fn of(cores: impl IntoIterator<Item = usize>) -> Self {
        let mut cores: Vec<usize> = cores.into_iter().collect();
        cores.sort_unstable();
        cores.dedup();
        CpuAffinity(Some(cores.into()))
    }

    pub fn cores(&self) -> Option<&[usize]> {
        self.0.as_deref()
    }

    /// Refuses an empty set and cores the process may not run on (or that
    /// this platform cannot pin to), naming the ones it may.
    pub fn check(&self) -> Result<(), SettingError> {
        let Some(cores) = self.cores() else {
            return Ok(());
        };
        let allowed = allowed_cores();
        let ok = !cores.is_empty()
            && allowed
                .as_ref()
                .is_some_and(|a| cores.iter().all(|c| a.contains(c)));
        if ok {
            return Ok(());
        }
        Err(SettingError {
            setting: "cpu_affinity",
            value: format!("{cores:?}"),
            limit: match allowed {
                Some(a) => format!("a non-empty set of the cores this process may run on: {a:?}"),
                None => "not supported on this platform (Linux only)".into(),
            },
        })
    }

    /// Runs `f` with the calling thread pinned to the cores, then gives the
    /// thread its own mask back: the threads `f` starts (the shard readers
    /// a pipeline opens before its record thread runs) keep the budget.
    pub fn while_pinned<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.cores().is_none() {
            return f();
        }
        let before = allowed_cores();
        self.apply();
        let out = f();
        if let Some(before) = before
            && let Err(e) = pin(&before)
        {
            tracing::warn!(error = %e, "cpu_affinity: could not give the caller its cores back");
        }
        out
    }

    /// Pins the calling thread to the cores (nothing when none are set). A
    /// failure (a core taken away since the check) leaves the thread where
    /// it was, with a warning: a budget is not worth a stopped pipeline.
    pub fn apply(&self) {
        let Some(cores) = self.cores() else {
            return;
        };
        if let Err(e) = pin(cores) {
            tracing::warn!(?cores, error = %e, "cpu_affinity: could not pin a pipeline thread");
        }
    }
}

#[cfg(target_os = "linux")]
fn pin(cores: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET stays within it
    // (cores were checked below CPU_SETSIZE by `allowed_cores`).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores {
            if c >= libc::CPU_SETSIZE as usize {
                return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
            }
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn pin(_cores: &[usize]) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// The cores the calling thread may run on now (`None`: unknown).
#[cfg(target_os = "linux")]
pub(crate) fn allowed_cores() -> Option<Vec<usize>> {
    // SAFETY: `set` is a plain bit set the call fills; CPU_ISSET reads
    // within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some(
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect(),
        )
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn allowed_cores() -> Option<Vec<usize>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_are_sorted_once() {
        assert_eq!(CpuAffinity::of([3, 1, 3, 0]).cores(), Some(&[0, 1, 3][..]));
        assert_eq!(CpuAffinity::default().cores(), None);
    }

    #[test]
    fn refuses_cores_the_process_may_not_use() {
        let allowed = allowed_cores().unwrap();
        assert!(CpuAffinity::of([allowed[0]]).check().is_ok());
        let e = CpuAffinity::of([100_000]).check().unwrap_err();
        assert_eq!(e.setting, "cpu_affinity");
        assert_eq!(e.value, "[100000]");
        assert_eq!(
            e.limit,
            format!("a non-empty set of the cores this process may run on: {allowed:?}")
        );
        let e = CpuAffinity::of([]).check().unwrap_err();
        assert_eq!(e.value, "[]");
    }

    #[test]
    fn while_pinned_gives_the_caller_its_cores_back() {
        let allowed = allowed_cores().unwrap();
        let first = allowed[0];
        let (inside, started, after) = std::thread::spawn(move || {
            let (inside, started) = CpuAffinity::of([first]).while_pinned(|| {
                let child = std::thread::spawn(allowed_cores);
                (allowed_cores(), child.join().unwrap())
            });
            (inside, started, allowed_cores())
        })
        .join()
        .unwrap();
        assert_eq!(inside, Some(vec![first]));
        assert_eq!(started, Some(vec![first]));
        assert_eq!(after, Some(allowed));
    }

    #[test]
    fn a_pinned_thread_runs_on_its_cores_only() {
        let first = allowed_cores().unwrap()[0];
        let seen = std::thread::spawn(move || {
            CpuAffinity::of([first]).apply();
            allowed_cores()
        })
        .join()
        .unwrap();
        assert_eq!(seen, Some(vec![first]));
    }
}
