//! The types of file systems, as busybox's `stat -f -c %T` names them.

use std::path::Path;

use super::files::FsError;

/// What busybox's `stat -f -c %T` prints for the container's root (an
/// overlay file system, which busybox's table does not name).
pub(super) const OVERLAY_TYPE: &str = "UNKNOWN";

/// The `f_type` of the file system at a host path.
pub(super) fn statfs_magic(path: &Path) -> Result<i64, FsError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| FsError::NotFound)?;
    // SAFETY: statfs(2) writes into a zeroed struct we own, from a valid C string.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c_path.as_ptr(), &mut buf) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    #[allow(clippy::useless_conversion)]
    Ok(i64::from(buf.f_type))
}

/// busybox 1.35's names of file system types (coreutils/stat.c `human_fstype`).
pub(super) fn busybox_fs_name(magic: i64) -> &'static str {
    match magic {
        0xADFF => "affs",
        0x1CD1 => "devpts",
        0x137D => "ext",
        0xEF51 => "ext2",
        0xEF53 => "ext2/ext3",
        0x3153_464A => "jfs",
        0x5846_5342 => "xfs",
        0x9660 | 0x4000 | 0x4004 => "isofs",
        0x137F => "minix",
        0x4D44 => "msdos",
        0x6969 => "nfs",
        0x9FA0 => "proc",
        0x517B => "smb",
        0x5346_544E => "ntfs",
        0x0102_1994 => "tmpfs",
        0x5265_4973 => "reiserfs",
        0x28CD_3D45 => "cramfs",
        0x7275 => "romfs",
        0x8584_58F6 => "ramfs",
        0x7371_7368 => "squashfs",
        0x6265_6572 => "sysfs",
        _ => OVERLAY_TYPE,
    }
}
