//! Where a batch's rows came from: each record's file and byte offset, and
//! which records each row holds (one per row; a packed row lists its
//! sequences, a sequence cut over rows is in each). Kept with every
//! assembled batch: a position per record and, when packed, a (row,
//! record) pair per piece, so cheap enough to leave on; shared by
//! reference, so the iterator keeping the last batch's copies nothing.

use std::collections::HashMap;
use std::sync::Arc;

/// The records of a batch's rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Provenance {
    files: Arc<Vec<String>>,
    /// Per record of the group: (index in `files`, byte offset).
    records: Arc<[(u32, u64)]>,
    /// Packed: (row, record) of each piece, in placement order; `None`:
    /// row `r` holds record `r`.
    pieces: Option<Arc<[(u32, u32)]>>,
}

/// One record's place: its file and the byte offset of its frame.
pub type RecordPosition<'a> = (&'a str, u64);

impl Provenance {
    /// Rows packed from pieces: (row, record index) of each.
    pub(crate) fn packed(pieces: Vec<(u32, u32)>) -> Self {
        Provenance {
            pieces: Some(pieces.into()),
            ..Provenance::default()
        }
    }

    /// Names the group's records: `records[i]` is record `i`'s (file
    /// index in `files`, offset).
    pub(crate) fn locate(&mut self, files: Arc<Vec<String>>, records: Vec<(u32, u64)>) {
        self.files = files;
        self.records = records.into();
    }

    /// Leaves out records `left_out` (sorted group indexes) of rows that
    /// hold one record each: the rows after them moved up (a step on the
    /// workers left them out: images that do not decode, under the skip
    /// policy).
    pub(crate) fn leave_out(&mut self, left_out: &[usize]) {
        if left_out.is_empty() || self.pieces.is_some() {
            return;
        }
        self.records = (self.records.iter().enumerate())
            .filter(|(i, _)| left_out.binary_search(i).is_err())
            .map(|(_, &r)| r)
            .collect();
    }

    /// True when rows were packed: a row may hold several records.
    pub fn is_packed(&self) -> bool {
        self.pieces.is_some()
    }

    /// The records of each of `rows` rows: none for a padding row.
    pub fn rows(&self, rows: usize) -> Vec<Vec<RecordPosition<'_>>> {
        let at = |record: u32| {
            let (file, offset) = *self.records.get(record as usize)?;
            Some((self.files.get(file as usize)?.as_str(), offset))
        };
        let mut out = vec![Vec::new(); rows];
        match &self.pieces {
            None => {
                for (row, out) in out.iter_mut().enumerate() {
                    out.extend(at(row as u32));
                }
            }
            Some(pieces) => {
                for &(row, record) in pieces.iter() {
                    let (Some(out), Some(position)) = (out.get_mut(row as usize), at(record))
                    else {
                        continue;
                    };
                    // A record's pieces in one row are one sequence there.
                    if out.last() != Some(&position) {
                        out.push(position);
                    }
                }
            }
        }
        out
    }

    /// As plain data, naming only the files its records are in: those
    /// files, each record's (file, offset), and for packed rows each
    /// piece's (row, record). [`from_parts`](Self::from_parts) rebuilds
    /// it, where another process lists its rows (`infeed.ray`'s actors
    /// send a batch's provenance so, and its trainer lists the rows only
    /// when asked).
    pub fn to_parts(&self) -> ProvenanceParts {
        let mut used: Vec<u32> = Vec::new();
        let mut index: HashMap<u32, u32> = HashMap::new();
        let records = self
            .records
            .iter()
            .map(|&(file, offset)| {
                let at = *index.entry(file).or_insert_with(|| {
                    used.push(file);
                    used.len() as u32 - 1
                });
                (at, offset)
            })
            .collect();
        let files = used
            .iter()
            .map(|&f| self.files.get(f as usize).cloned().unwrap_or_default())
            .collect();
        ProvenanceParts {
            files,
            records,
            pieces: self.pieces.as_ref().map(|p| p.to_vec()),
        }
    }

    /// The provenance [`to_parts`](Self::to_parts) gave.
    pub fn from_parts(parts: ProvenanceParts) -> Self {
        Provenance {
            files: Arc::new(parts.files),
            records: parts.records.into(),
            pieces: parts.pieces.map(Into::into),
        }
    }
}

/// A [`Provenance`] as plain data ([`Provenance::to_parts`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProvenanceParts {
    pub files: Vec<String>,
    pub records: Vec<(u32, u64)>,
    pub pieces: Option<Vec<(u32, u32)>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Arc<Vec<String>> {
        Arc::new(vec!["a.tfrecord".into(), "b.tfrecord".into()])
    }

    #[test]
    fn rows_name_their_records() {
        let mut p = Provenance::default();
        p.locate(files(), vec![(0, 0), (1, 40), (0, 90)]);
        assert_eq!(
            p.rows(4),
            [
                vec![("a.tfrecord", 0)],
                vec![("b.tfrecord", 40)],
                vec![("a.tfrecord", 90)],
                vec![]
            ]
        );
        #[cfg(feature = "images")]
        {
            let mut q = p.clone();
            q.leave_out(&[1]);
            assert_eq!(
                q.rows(2),
                [vec![("a.tfrecord", 0)], vec![("a.tfrecord", 90)]]
            );
        }
        let mut packed = Provenance::packed(vec![(0, 0), (0, 1), (1, 1), (1, 2)]);
        packed.locate(files(), vec![(0, 0), (1, 40), (0, 90)]);
        assert_eq!(
            packed.rows(3),
            [
                vec![("a.tfrecord", 0), ("b.tfrecord", 40)],
                vec![("b.tfrecord", 40), ("a.tfrecord", 90)],
                vec![]
            ]
        );
    }

    #[test]
    fn parts_name_only_the_files_used_and_rebuild_the_same_rows() {
        let many = Arc::new((0..50).map(|i| format!("{i}.tfrecord")).collect());
        let mut p = Provenance::packed(vec![(0, 0), (0, 1), (1, 2)]);
        p.locate(many, vec![(40, 7), (3, 9), (40, 11)]);
        let parts = p.to_parts();
        assert_eq!(parts.files, ["40.tfrecord", "3.tfrecord"]);
        assert_eq!(parts.records, [(0, 7), (1, 9), (0, 11)]);
        assert_eq!(Provenance::from_parts(parts).rows(3), p.rows(3));
    }
}
