//! One queue batch, end to end: decode, dead-letter, dedup, partition, write.
//!
//! The consumer Worker's contract with this module: call [`ingest`] with every
//! message of the batch; put every [`LakeFile`] under its key (a retried put
//! rewrites identical bytes); send every [`DeadLetter`] to the dead-letter
//! queue with its reason; only then ack every message but the [`Newer`]
//! ones, which it retries (a newer writer's events wait for an ingest that
//! reads them: the queue keeps them, and past its retries hands them on as
//! an undelivered batch's). If anything fails, retry the whole batch: the
//! output of a retry is the same files under the same keys, so a partial
//! earlier attempt leaves nothing a reader miscounts.

use ledger_events::{decode, DecodeError, Event};

use crate::dedup::{dedup, Conflict, Duplicate, Row};
use crate::key::{file_digest, object_key, FileLayer, Partition};
use crate::parquet_io::write_file;
use crate::{INGEST_BATCH_MESSAGES_MAX, MESSAGE_BYTES_MAX, PARQUET_FILE_ROWS_MAX};

/// One raw queue message.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    /// The queue's message id: what the dead-letter item and duplicates name.
    pub id: &'a str,
    pub body: &'a [u8],
}

/// Why a message cannot become a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Larger than [`MESSAGE_BYTES_MAX`]; not parsed at all.
    TooLarge { bytes: usize },
    /// Not a valid event of a known schema version (the exact decode error).
    Decode(DecodeError),
    /// Valid, but its `seq` does not fit the lake's Int64 column.
    SeqOutOfRange { event_id: String, seq: u64 },
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::TooLarge { bytes } => {
                write!(
                    f,
                    "message of {bytes} bytes exceeds MESSAGE_BYTES_MAX = {MESSAGE_BYTES_MAX}"
                )
            }
            Rejection::Decode(e) => write!(f, "{e}"),
            Rejection::SeqOutOfRange { event_id, seq } => {
                write!(
                    f,
                    "event {event_id}: seq {seq} exceeds the lake's Int64 seq column"
                )
            }
        }
    }
}

/// A message that goes to the dead-letter queue instead of the lake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub message_id: String,
    pub rejection: Rejection,
}

impl DeadLetter {
    /// The reason as sent with the dead letter.
    pub fn reason(&self) -> String {
        self.rejection.to_string()
    }

    /// The dead-letter queue's item for this letter, whose message had
    /// `body`: JSON text with `message_id`, `reason`, `body_bytes`,
    /// `body_sha256`, and the body itself, `body` (its text) when it is
    /// UTF-8 or else `body_hex`, unless it is longer than
    /// [`MESSAGE_BYTES_MAX`] (the reason then says so, the digest names
    /// it, and `body_prefix` holds its first [`BODY_PREFIX_BYTES`] as text). So an item stays far below a queue message's 128 KB
    /// whatever the body: a message near that size, embedded and escaped,
    /// was too large to send, which failed the whole batch at every retry.
    pub fn queue_item(&self, body: &[u8]) -> String {
        let mut item = self.named(body);
        if body.len() <= MESSAGE_BYTES_MAX {
            match std::str::from_utf8(body) {
                Ok(text) => item["body"] = text.into(),
                Err(_) => item["body_hex"] = ledger_events::event::hex(body).into(),
            }
        } else {
            // Its first bytes, as text (a character cut at the end, or bytes
            // not UTF-8, replaced): what the message was, an event padded
            // past the limit showing its event id (rev-s57-ingest 4).
            let head = &body[..BODY_PREFIX_BYTES];
            item["body_prefix"] = String::from_utf8_lossy(head).into_owned().into();
        }
        item.to_string()
    }

    /// [`DeadLetter::queue_item`] without the body: what the consumer logs
    /// of each dead letter (logs outlive the queue's retention).
    pub fn log_item(&self, body: &[u8]) -> String {
        self.named(body).to_string()
    }

    fn named(&self, body: &[u8]) -> serde_json::Value {
        use sha2::{Digest, Sha256};
        serde_json::json!({
            "message_id": self.message_id,
            "reason": self.reason(),
            "body_bytes": body.len(),
            "body_sha256": ledger_events::event::hex(&Sha256::digest(body)),
        })
    }
}

/// A message whose event a newer writer wrote (a schema version this build
/// does not know, every known one older): neither a row nor a dead letter.
/// It is retried until an ingest that reads it is deployed (the edge went
/// out first); the queue's retries, then the undelivered and held queues,
/// keep it as it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Newer {
    pub message_id: String,
    /// Its schema version.
    pub v: u16,
}

impl std::fmt::Display for Newer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "message {} is an event of schema version {}, newer than this ingest reads (known: {:?}): \
             retried, not acked and not dead-lettered\nHelp: deploy the ingest Worker of the edge's \
             version; the queues retry the message for about eight hours, then keep it as sent in \
             ledger-events-held (its retention) for an operator to send to ledger-events again \
             (docs/LAKE.md, \"Undelivered batches\")",
            self.message_id,
            self.v,
            ledger_events::event::SCHEMA_VERSIONS_KNOWN
        )
    }
}

/// How much of a body too large to embed a dead letter's item still holds
/// (`body_prefix`): a whole v1 event (under 2 KiB), escaped at most six
/// times, keeps the item far below a queue message's 128 KB.
pub const BODY_PREFIX_BYTES: usize = 4_096;

/// One object to put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LakeFile {
    pub key: String,
    pub partition: Partition,
    pub layer: FileLayer,
    pub rows: usize,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestOutput {
    /// In key order.
    pub files: Vec<LakeFile>,
    pub dead_letters: Vec<DeadLetter>,
    /// Extra copies of an event within the batch (source = message id).
    pub duplicates: Vec<Duplicate>,
    /// Same event id, different content, within the batch. Their rows are in
    /// `files` with `conflict = true`; the consumer should also log these.
    pub conflicts: Vec<Conflict>,
    /// Events of a newer schema version: to retry, not to ack ([`Newer`]).
    pub newer: Vec<Newer>,
}

impl IngestOutput {
    pub fn rows(&self) -> usize {
        self.files.iter().map(|f| f.rows).sum()
    }

    /// The log line for the batch's events of a newer schema version
    /// (`None`: there are none): one line a batch, not one a message, since
    /// each is retried for about eight hours and a whole deployment's worth
    /// may be (rev-s57-diff 6). The first is said in full, with its help;
    /// the next [`NEWER_IDS_LOGGED`] are named by message id.
    pub fn newer_line(&self) -> Option<String> {
        let (first, rest) = self.newer.split_first()?;
        if rest.is_empty() {
            return Some(first.to_string());
        }
        let named: Vec<String> = rest
            .iter()
            .take(NEWER_IDS_LOGGED)
            .map(|n| format!("{} (v {})", n.message_id, n.v))
            .collect();
        let unnamed = rest.len() - named.len();
        let more = if unnamed > 0 {
            format!(" and {unnamed} more")
        } else {
            String::new()
        };
        let (said, help) = match first.to_string().split_once("\nHelp:") {
            Some((said, help)) => (said.to_owned(), format!("\nHelp:{help}")),
            None => (first.to_string(), String::new()),
        };
        Some(format!(
            "{} messages of this batch are events of a newer schema version; {said}; so are {}{more}{help}",
            self.newer.len(),
            named.join(", ")
        ))
    }
}

/// How many message ids past the first [`IngestOutput::newer_line`] names.
pub const NEWER_IDS_LOGGED: usize = 20;

/// A batch the core refuses as a whole. Nothing should be acked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IngestError {
    TooManyMessages {
        messages: usize,
    },
    /// Arrow/Parquet refused to encode rows: a bug, reported with the partition.
    Encode {
        partition: Partition,
        why: String,
    },
}

impl std::fmt::Display for IngestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IngestError::TooManyMessages { messages } => write!(
                f,
                "batch of {messages} messages exceeds INGEST_BATCH_MESSAGES_MAX = {INGEST_BATCH_MESSAGES_MAX}\n\
                 Help: lower the consumer's max_batch_size"
            ),
            IngestError::Encode { partition, why } => {
                write!(f, "cannot encode partition {}: {why}", partition.prefix())
            }
        }
    }
}

impl std::error::Error for IngestError {}

/// A batch's messages decoded ([`decode_batch`]).
#[derive(Debug, Default)]
pub struct Decoded {
    /// `(message id, event)` of each message that is an event.
    pub events: Vec<(String, Event)>,
    pub dead: Vec<DeadLetter>,
    pub newer: Vec<Newer>,
}

/// Decodes every message; each yields an event, a dead letter, or (a newer
/// writer's event) a message to retry.
pub fn decode_batch(messages: &[Message<'_>]) -> Decoded {
    let mut events = Vec::with_capacity(messages.len());
    let mut dead = Vec::new();
    let mut newer = Vec::new();
    for m in messages {
        let rejected = |rejection| DeadLetter {
            message_id: m.id.to_owned(),
            rejection,
        };
        if m.body.len() > MESSAGE_BYTES_MAX {
            // A newer writer's event may be larger than this build's bound: it is
            // that writer's to read (rev-s57-diff 5).
            match ledger_events::newer_version_of(m.body) {
                Some(v) => newer.push(Newer {
                    message_id: m.id.to_owned(),
                    v,
                }),
                None => dead.push(rejected(Rejection::TooLarge {
                    bytes: m.body.len(),
                })),
            }
            continue;
        }
        match decode(m.body) {
            Ok(ev) if i64::try_from(ev.seq).is_err() => {
                dead.push(rejected(Rejection::SeqOutOfRange {
                    event_id: ev.event_id.clone(),
                    seq: ev.seq,
                }))
            }
            Ok(ev) => events.push((m.id.to_owned(), ev)),
            Err(e) => match e.newer_version() {
                Some(v) => newer.push(Newer {
                    message_id: m.id.to_owned(),
                    v,
                }),
                None => dead.push(rejected(Rejection::Decode(e))),
            },
        }
    }
    Decoded {
        events,
        dead,
        newer,
    }
}

/// Cuts sorted, deduplicated rows into files: one run per partition, each
/// run cut every [`PARQUET_FILE_ROWS_MAX`] rows, each file keyed by its digest.
pub fn build_files(rows: Vec<Row>, layer: FileLayer) -> Result<Vec<LakeFile>, IngestError> {
    build_files_sized(rows, layer, PARQUET_FILE_ROWS_MAX)
}

/// [`build_files`] with a smaller file bound (tests exercise the cut with it).
pub fn build_files_sized(
    rows: Vec<Row>,
    layer: FileLayer,
    file_rows_max: usize,
) -> Result<Vec<LakeFile>, IngestError> {
    assert!(file_rows_max > 0 && file_rows_max <= PARQUET_FILE_ROWS_MAX);
    let mut by_partition: std::collections::BTreeMap<Partition, Vec<Row>> = Default::default();
    for row in rows {
        by_partition
            .entry(Partition::of(&row))
            .or_default()
            .push(row);
    }
    let mut files = Vec::new();
    for (partition, rows) in by_partition {
        // Rows keep the order of `dedup`, which is the lake order.
        for chunk in rows.chunks(file_rows_max) {
            let bytes = write_file(chunk).map_err(|why| IngestError::Encode {
                partition: partition.clone(),
                why,
            })?;
            let digest = file_digest(&partition, chunk);
            files.push(LakeFile {
                key: object_key(&partition, layer, &digest),
                partition: partition.clone(),
                layer,
                rows: chunk.len(),
                bytes,
            });
        }
    }
    files.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(files)
}

/// The whole ingest of one queue batch. Pure: same messages (in any order,
/// any number of times) → same output.
pub fn ingest(messages: &[Message<'_>]) -> Result<IngestOutput, IngestError> {
    if messages.len() > INGEST_BATCH_MESSAGES_MAX {
        return Err(IngestError::TooManyMessages {
            messages: messages.len(),
        });
    }
    let Decoded {
        events,
        dead: dead_letters,
        newer,
    } = decode_batch(messages);
    let deduped = dedup(events.into_iter().map(|(id, event)| {
        (
            id,
            Row {
                event,
                conflict: false,
            },
        )
    }));
    let files = build_files(deduped.rows, FileLayer::Ingest)?;
    Ok(IngestOutput {
        files,
        dead_letters,
        duplicates: deduped.duplicates,
        conflicts: deduped.conflicts,
        newer,
    })
}
