//! The event log's storage against its quota (issue #26 item 3): one
//! wording and shape for `/metrics`, `/api/status`, `fleetweft status`
//! and the dashboard banner. On etcd, a database that reaches its
//! `--quota-backend-bytes` raises etcd's NOSPACE alarm and every write is
//! refused: the controller stops. The warning comes well before.

use serde::{Deserialize, Serialize};

/// The share of the quota at which every surface warns, in percent.
pub const WARN_PERCENT: u64 = 80;

/// The `/metrics` gauge of the storage's database size.
pub const METRIC_BYTES: &str = "fleetweft_storage_bytes";

/// The `/metrics` gauge of the storage's quota (only when there is one).
pub const METRIC_QUOTA: &str = "fleetweft_storage_quota_bytes";

/// What the core last measured of its storage (`LogStorage::space`, with
/// the configured quota where the engine does not report one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageUse {
    /// The database's size in bytes.
    pub bytes: u64,
    /// Its quota in bytes; `None` where there is none (sled).
    pub quota_bytes: Option<u64>,
}

/// `/api/status`'s `storage`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, utoipa::ToSchema)]
pub struct StorageDto {
    /// The database's size in bytes.
    pub bytes: u64,
    /// Its quota in bytes, if it has one.
    pub quota_bytes: Option<u64>,
    /// `bytes` as a whole percentage of `quota_bytes` (rounded down).
    pub used_percent: Option<u64>,
    /// The warning at [`WARN_PERCENT`] and over ([`sentence`]).
    pub warning: Option<String>,
}

/// `bytes` as a whole percentage of `quota` (rounded down; a quota of 0
/// counts as full).
pub fn used_percent(bytes: u64, quota: u64) -> u64 {
    if quota == 0 {
        return 100;
    }
    u64::try_from(u128::from(bytes) * 100 / u128::from(quota)).unwrap_or(u64::MAX)
}

/// Whether `bytes` of `quota` is worth a warning.
pub fn over_threshold(bytes: u64, quota: u64) -> bool {
    used_percent(bytes, quota) >= WARN_PERCENT
}

/// The warning, once for every surface.
pub fn sentence(bytes: u64, quota: u64) -> String {
    format!(
        "STORAGE NEARLY FULL: the event log's database takes {} of its {} quota ({}%); at 100% \
         etcd refuses every write and the controller stops. Archive older history \
         ([log] archive_dir, fleetweft log archive), then defragment (etcdctl defrag) or \
         raise --quota-backend-bytes (docs/operations.md, \"etcd that never fills up\")",
        mib(bytes),
        mib(quota),
        used_percent(bytes, quota)
    )
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// The status's view of `storage`, `None` when it was not measured.
pub fn dto(storage: Option<StorageUse>) -> Option<StorageDto> {
    let s = storage?;
    let used_percent = s.quota_bytes.map(|q| used_percent(s.bytes, q));
    let warning = s
        .quota_bytes
        .filter(|q| over_threshold(s.bytes, *q))
        .map(|q| sentence(s.bytes, q));
    Some(StorageDto {
        bytes: s.bytes,
        quota_bytes: s.quota_bytes,
        used_percent,
        warning,
    })
}

/// The `/metrics` lines: the size, and the quota where there is one.
pub fn metrics(storage: Option<StorageUse>) -> String {
    let Some(s) = storage else {
        return String::new();
    };
    let mut m = format!(
        "# HELP {METRIC_BYTES} Size of the event log's database (etcd: dbSize of the member asked; sled: its files).\n# TYPE {METRIC_BYTES} gauge\n{METRIC_BYTES} {}\n",
        s.bytes
    );
    if let Some(quota) = s.quota_bytes {
        m.push_str(&format!(
            "# HELP {METRIC_QUOTA} The database's quota (etcd's --quota-backend-bytes, as configured in [storage] quota_backend_bytes); writes are refused at it.\n# TYPE {METRIC_QUOTA} gauge\n{METRIC_QUOTA} {quota}\n"
        ));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_starts_at_eighty_percent() {
        let quota: u64 = 2_000_000_000;
        let at = |percent: u64| quota / 100 * percent;
        assert!(!over_threshold(at(79), quota));
        assert!(over_threshold(quota * 4 / 5, quota), "exactly 80%");
        assert!(!over_threshold(quota * 4 / 5 - 1, quota), "just under 80%");
        assert!(over_threshold(quota, quota));
        assert!(over_threshold(quota * 3, quota));
        assert!(over_threshold(1, 0), "a quota of 0 is full");
        assert_eq!(used_percent(u64::MAX, 1), u64::MAX, "no overflow");
        let below = dto(Some(StorageUse {
            bytes: quota * 79 / 100,
            quota_bytes: Some(quota),
        }))
        .expect("measured");
        assert_eq!((below.used_percent, below.warning), (Some(79), None));
        let over = dto(Some(StorageUse {
            bytes: quota * 81 / 100,
            quota_bytes: Some(quota),
        }))
        .expect("measured");
        assert_eq!(over.used_percent, Some(81));
        let warning = over.warning.expect("a warning at 81%");
        assert!(warning.starts_with("STORAGE NEARLY FULL"), "{warning}");
        assert!(warning.contains("(81%)"), "{warning}");
        let sled = dto(Some(StorageUse {
            bytes: u64::MAX,
            quota_bytes: None,
        }))
        .expect("measured");
        assert_eq!((sled.used_percent, sled.warning), (None, None));
        assert_eq!(dto(None), None);
    }

    #[test]
    fn the_gauges_name_the_quota_only_when_there_is_one() {
        let etcd = metrics(Some(StorageUse {
            bytes: 5,
            quota_bytes: Some(9),
        }));
        assert!(etcd.contains("\nfleetweft_storage_bytes 5\n"), "{etcd}");
        assert!(
            etcd.contains("\nfleetweft_storage_quota_bytes 9\n"),
            "{etcd}"
        );
        let sled = metrics(Some(StorageUse {
            bytes: 5,
            quota_bytes: None,
        }));
        assert!(!sled.contains(METRIC_QUOTA), "{sled}");
        assert_eq!(metrics(None), "");
    }
}
