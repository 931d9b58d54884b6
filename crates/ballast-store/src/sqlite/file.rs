//! The files a SQLite store opened, checked around every transaction: still at their paths, still the same
//! files, still writable.
//!
//! Why: SQLite writes through the descriptor it opened. Delete or replace the file while the gateway holds it and
//! every write still succeeds — into an inode nobody will open again — so calls are acknowledged, and after a
//! restart on the new (or empty) file a completed payment runs a second time. Make the file read-only and a
//! process that may write anyway (root) goes on writing against the operator's wish. So before each transaction
//! the path is looked up again (one `stat`, a microsecond next to a commit): the same device and inode, with a
//! write permission bit set — and so is the write-ahead log beside it (`-wal`), which holds the latest commits
//! until a checkpoint. Otherwise the operation fails as the store's unavailability — a claim fails closed,
//! nothing runs — and the store's health says why, until the file is back (moved back, made writable again) or
//! the gateway restarts on a file of its own. The check runs again after each commit, before anyone is
//! answered: a file moved between the check and the commit leaves nothing acknowledged.

use std::path::{Path, PathBuf};

use crate::StoreError;

/// Where the store's files are and which files they are.
#[derive(Debug)]
pub(super) struct Identity {
    database: File,
    /// The write-ahead log, when it existed at open (WAL mode keeps it while the database is open).
    wal: Option<File>,
}

/// One file: its path and which file it was.
#[derive(Debug)]
struct File {
    path: PathBuf,
    #[cfg(unix)]
    inode: (u64, u64),
}

impl Identity {
    /// The files at `path` (and `path-wal`) now (just opened).
    pub(super) fn of(path: &Path) -> Result<Identity, StoreError> {
        let database = File::of(path).map_err(|error| {
            StoreError::unavailable(format!(
                "cannot read the SQLite store's file {}: {error}",
                path.display()
            ))
        })?;
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        Ok(Identity {
            database,
            wal: File::of(Path::new(&wal)).ok(),
        })
    }

    /// Whether the files at the paths are still these, and writable; why not, when they are not.
    pub(super) fn verify(&self) -> Result<(), String> {
        self.database.verify("file")?;
        match &self.wal {
            Some(wal) => wal.verify("write-ahead log"),
            None => Ok(()),
        }
    }
}

impl File {
    fn of(path: &Path) -> std::io::Result<File> {
        let metadata = std::fs::metadata(path)?;
        Ok(File {
            path: path.to_owned(),
            #[cfg(unix)]
            inode: inode(&metadata),
        })
    }

    /// Whether the file at the path is still this one, and writable; why not, naming it as `what`.
    fn verify(&self, what: &str) -> Result<(), String> {
        let path = self.path.display();
        let metadata = match std::fs::metadata(&self.path) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "the SQLite store's {what} {path} was deleted or moved while the gateway held it: nothing is \
                     recorded (and no side effect runs) until it is back at that path, or the gateway restarts"
                ));
            }
            Err(error) => return Err(format!("cannot read the SQLite store's {what} {path}: {error}")),
        };
        #[cfg(unix)]
        if inode(&metadata) != self.inode {
            return Err(format!(
                "the SQLite store's {what} {path} was replaced by another file while the gateway held it: what the \
                 gateway recorded is in the file it opened, not this one; put that file back, or restart the \
                 gateway to use the new one"
            ));
        }
        if metadata.permissions().readonly() {
            return Err(format!(
                "the SQLite store's {what} {path} was made read-only: nothing is recorded (and no side effect runs) \
                 until it is writable again"
            ));
        }
        Ok(())
    }
}

#[cfg(unix)]
fn inode(metadata: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt as _;
    (metadata.dev(), metadata.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_replaced_or_read_only_file_is_told_and_a_restored_one_passes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ballast.db");
        std::fs::write(&path, b"x").unwrap();
        let identity = Identity::of(&path).unwrap();
        assert_eq!(identity.verify(), Ok(()));
        let aside = dir.path().join("aside.db");
        std::fs::rename(&path, &aside).unwrap();
        assert!(identity.verify().unwrap_err().contains("deleted or moved"));
        std::fs::rename(&aside, &path).unwrap();
        assert_eq!(identity.verify(), Ok(()), "moved back: the same file");
        std::fs::copy(&path, &aside).unwrap();
        std::fs::rename(&aside, &path).unwrap();
        assert!(identity.verify().unwrap_err().contains("replaced"));
        let identity = Identity::of(&path).unwrap();
        let mut permissions = std::fs::metadata(&path).unwrap().permissions();
        permissions.set_readonly(true);
        std::fs::set_permissions(&path, permissions.clone()).unwrap();
        assert!(identity.verify().unwrap_err().contains("read-only"));
        #[allow(clippy::permissions_set_readonly_false)]
        permissions.set_readonly(false);
        std::fs::set_permissions(&path, permissions).unwrap();
        assert_eq!(identity.verify(), Ok(()));
    }

    #[test]
    fn the_write_ahead_log_is_checked_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ballast.db");
        let wal = dir.path().join("ballast.db-wal");
        std::fs::write(&path, b"x").unwrap();
        std::fs::write(&wal, b"w").unwrap();
        let identity = Identity::of(&path).unwrap();
        assert_eq!(identity.verify(), Ok(()));
        std::fs::remove_file(&wal).unwrap();
        let why = identity.verify().unwrap_err();
        assert!(
            why.contains("write-ahead log") && why.contains("deleted"),
            "{why}"
        );
    }
}
