//! The fingerprint that ties a state to its pipeline: the CRC32C of a
//! canonical encoding of a stream's steps, in the order its records pass
//! them, each by its name and the settings that decide which records, in
//! which order, make up each batch.
//!
//! Nothing here knows a step. Each writes its own entry, named by itself
//! (its `identity`, beside its `next`, `save` and `restore`); no step
//! writes another's, and there is no table of tags to take a number from.
//! A step at the setting that changes nothing (a shuffle of 0, no skip)
//! writes no entry, so a new step changes no other pipeline's fingerprint
//! and every state saved without it still restores. Since entries keep
//! their order, two pipelines with the same steps in another order differ.
//!
//! Encoding: the fingerprint version (one byte), then per step its name and
//! its body, each a u64 length (little-endian) then the bytes. In a body,
//! integers are little-endian u64, booleans one byte, strings and lists
//! length-prefixed, options a 0/1 byte then the value.

/// Bumped when the encoding changes, with the state format (which refuses
/// every state taken before by its format number). Version 1 was a table
/// of numbered fields, in tag order.
const FINGERPRINT_VERSION: u8 = 2;

/// The steps that decide a stream's sequence, in order; its
/// [`fingerprint`](Self::fingerprint) is stored in every state of the
/// stream.
#[derive(Debug)]
pub(crate) struct Identity {
    bytes: Vec<u8>,
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            bytes: vec![FINGERPRINT_VERSION],
        }
    }
}

impl Identity {
    /// The entry of step `name`, after those written before it: its body is
    /// what the returned writer writes.
    pub fn step(&mut self, name: &str) -> StepWriter<'_> {
        put_len(&mut self.bytes, name.len());
        self.bytes.extend_from_slice(name.as_bytes());
        let body_at = self.bytes.len();
        put_len(&mut self.bytes, 0);
        StepWriter {
            out: &mut self.bytes,
            body_at,
        }
    }

    /// The canonical bytes the fingerprint is the CRC32C of.
    #[cfg(test)]
    pub fn encode(&self) -> &[u8] {
        &self.bytes
    }

    /// The fingerprint stored in every state of this stream.
    pub fn fingerprint(&self) -> u32 {
        crc32c::crc32c(&self.bytes)
    }
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(&(len as u64).to_le_bytes());
}

/// Writes one step's body; its length is set when the writer is dropped.
pub(crate) struct StepWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Where the body's length goes (the body follows it).
    body_at: usize,
}

impl Drop for StepWriter<'_> {
    fn drop(&mut self) {
        let len = (self.out.len() - self.body_at - 8) as u64;
        self.out[self.body_at..self.body_at + 8].copy_from_slice(&len.to_le_bytes());
    }
}

impl StepWriter<'_> {
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.out.push(u8::from(v));
        self
    }
    pub fn opt(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            None => self.bool(false),
            Some(v) => self.bool(true).u64(v),
        }
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.out.extend_from_slice(s.as_bytes());
        self
    }
    pub fn list(&mut self, v: &[usize]) -> &mut Self {
        self.u64(v.len() as u64);
        for &x in v {
            self.u64(x as u64);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(v: u64) -> [u8; 8] {
        v.to_le_bytes()
    }

    #[test]
    fn steps_are_encoded_in_order_by_name_and_body() {
        let mut id = Identity::default();
        id.step("skip_take").u64(7).opt(None);
        id.step("map");
        assert_eq!(
            id.encode(),
            [
                &[2u8][..],
                &le(9),
                b"skip_take",
                &le(9),
                &le(7),
                &[0],
                &le(3),
                b"map",
                &le(0),
            ]
            .concat()
        );
    }

    #[test]
    fn the_same_steps_in_another_order_differ() {
        let (mut a, mut b) = (Identity::default(), Identity::default());
        a.step("shuffle").u64(10);
        a.step("skip_take").u64(5);
        b.step("skip_take").u64(5);
        b.step("shuffle").u64(10);
        assert_ne!(a.fingerprint(), b.fingerprint());
    }

    #[test]
    fn a_body_cannot_pass_for_the_next_step() {
        // Without the bodies' lengths, a body holding the string "y" would
        // read as an empty body then a step named "y".
        let (mut a, mut b) = (Identity::default(), Identity::default());
        a.step("x").str("y");
        b.step("x");
        b.step("y");
        assert_ne!(a.encode(), b.encode());
    }
}
