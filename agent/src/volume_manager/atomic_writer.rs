//! The kubelet's atomic writer (`pkg/volume/util/atomic_writer.go`): a volume's files
//! are written into a fresh hidden directory `..2006_01_02_15_04_05.N`, the `..data`
//! link is swapped to it with one `rename`, and each top-level name of the payload is
//! a link `name -> ..data/name`. A reader thus sees the old files or the new ones, never
//! a mix; a payload equal to what is there writes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

/// One file of a volume's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// What the file holds.
    pub content: Vec<u8>,
    /// Its permission bits (`defaultMode`, or the item's `mode`).
    pub mode: u32,
}

/// A volume's files by path relative to the volume (already checked to stay inside it).
pub type Payload = BTreeMap<PathBuf, File>;

const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// Writes `payload` into `dir` (created when missing) as the kubelet does.
pub fn write(dir: &Path, payload: &Payload) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let old_ts = std::fs::read_link(dir.join(DATA)).ok();
    if let Some(old) = &old_ts
        && unchanged(&dir.join(old), payload)
    {
        return Ok(());
    }
    let ts_name = timestamped_name();
    let ts_dir = dir.join(&ts_name);
    std::fs::create_dir(&ts_dir)?;
    std::fs::set_permissions(&ts_dir, std::fs::Permissions::from_mode(0o755))?;
    for (path, file) in payload {
        let full = ts_dir.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&full, &file.content)?;
        // Set after writing, so the umask does not narrow the mode.
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(file.mode))?;
    }
    let tmp = dir.join(DATA_TMP);
    let _ = std::fs::remove_file(&tmp);
    symlink(&ts_name, &tmp)?;
    std::fs::rename(&tmp, dir.join(DATA))?;

    let wanted: BTreeSet<OsString> = payload
        .keys()
        .filter_map(|p| p.components().next())
        .map(|c| c.as_os_str().to_owned())
        .collect();
    for name in &wanted {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(Path::new(DATA).join(name), &link)?;
        }
    }
    // Links of names the payload no longer has, and the previous timestamped directory.
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("..") || wanted.contains(&name) {
            continue;
        }
        if entry.file_type()?.is_symlink() {
            std::fs::remove_file(entry.path())?;
        }
    }
    if let Some(old) = old_ts
        && old != Path::new(&ts_name)
    {
        std::fs::remove_dir_all(dir.join(old))?;
    }
    Ok(())
}

/// Whether the directory `ts_dir` holds exactly `payload`, with its modes.
fn unchanged(ts_dir: &Path, payload: &Payload) -> bool {
    let mut found = BTreeSet::new();
    if !collect(ts_dir, Path::new(""), &mut found) || found.len() != payload.len() {
        return false;
    }
    payload.iter().all(|(path, file)| {
        let full = ts_dir.join(path);
        let mode_ok = std::fs::metadata(&full)
            .map(|m| m.permissions().mode() & 0o7777 == file.mode)
            .unwrap_or(false);
        mode_ok && std::fs::read(&full).is_ok_and(|c| c == file.content)
    })
}

/// The regular files under `dir`, relative to the volume; false when unreadable.
fn collect(dir: &Path, rel: &Path, out: &mut BTreeSet<PathBuf>) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        let rel = rel.join(entry.file_name());
        match entry.file_type() {
            Ok(t) if t.is_dir() => {
                if !collect(&entry.path(), &rel, out) {
                    return false;
                }
            }
            Ok(_) => {
                out.insert(rel);
            }
            Err(_) => return false,
        }
    }
    true
}

/// `..2006_01_02_15_04_05.` in UTC, then a number that makes it unique (Go's
/// `os.MkdirTemp` pattern suffix).
fn timestamped_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    let unique = now.subsec_nanos() ^ SEQ.fetch_add(1, Ordering::Relaxed).rotate_left(20);
    format!(
        "..{y:04}_{mo:02}_{d:02}_{:02}_{:02}_{:02}.{unique}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(entries: &[(&str, &str, u32)]) -> Payload {
        entries
            .iter()
            .map(|(p, c, m)| {
                (
                    PathBuf::from(p),
                    File {
                        content: c.as_bytes().to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_513), (2026, 3, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn files_are_links_through_data_with_their_modes_and_updates_swap() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        write(&dir, &payload(&[("a", "1", 0o644), ("sub/b", "2", 0o400)])).unwrap();
        let ts = std::fs::read_link(dir.join(DATA)).unwrap();
        assert!(ts.to_string_lossy().starts_with("..20"), "{ts:?}");
        assert_eq!(
            std::fs::read_link(dir.join("a")).unwrap(),
            Path::new("..data/a")
        );
        assert_eq!(
            std::fs::read_link(dir.join("sub")).unwrap(),
            Path::new("..data/sub")
        );
        assert_eq!(std::fs::read_to_string(dir.join("sub/b")).unwrap(), "2");
        let mode = |p: &str| std::fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("a"), mode("sub/b")), (0o644, 0o400));

        // The same payload writes nothing.
        write(&dir, &payload(&[("a", "1", 0o644), ("sub/b", "2", 0o400)])).unwrap();
        assert_eq!(std::fs::read_link(dir.join(DATA)).unwrap(), ts);

        // A new payload: new directory, old one and stale links gone.
        write(&dir, &payload(&[("a", "3", 0o644), ("c", "4", 0o600)])).unwrap();
        let ts2 = std::fs::read_link(dir.join(DATA)).unwrap();
        assert_ne!(ts2, ts);
        assert!(!dir.join(&ts).exists());
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "3");
        assert_eq!(mode("c"), 0o600);
    }
}
