//! A state as a tree of parts. Every op saves its own part — a key unique in
//! its chain, the version of the part's encoding and its bytes — and takes
//! it back on a restore, checking it; the tree around the parts (streams,
//! and later a mixture's sources) never changes when an op is added.
//!
//! On the wire every node is a [`NodeProto`]: key, version, body, children.

use std::collections::BTreeMap;
use std::fmt;

use crate::pipeline::error::StateError;

/// One op's part of a state, as the op defines it.
pub(crate) trait OpPart: Sized {
    /// The op's name in the state; unique in a chain.
    const KEY: &'static str;
    /// Bumped when the meaning of the part's encoding changes.
    const VERSION: u32;
    fn encode_body(&self) -> Vec<u8>;
    fn decode_body(body: &[u8]) -> Result<Self, StateError>;
}

/// A saved part, whatever its op (encoded only when a state is asked for:
/// a part is saved after every batch).
pub(crate) trait Part: fmt::Debug + Send + Sync {
    fn key(&self) -> &'static str;
    fn version(&self) -> u32;
    fn encode(&self) -> Vec<u8>;
}

impl<P: OpPart + fmt::Debug + Send + Sync> Part for P {
    fn key(&self) -> &'static str {
        P::KEY
    }
    fn version(&self) -> u32 {
        P::VERSION
    }
    fn encode(&self) -> Vec<u8> {
        self.encode_body()
    }
}

/// Implements [`OpPart`] for a prost message: its body is the message.
macro_rules! prost_part {
    ($part:ty, $key:literal, $version:literal) => {
        impl $crate::pipeline::checkpoint::OpPart for $part {
            const KEY: &'static str = $key;
            const VERSION: u32 = $version;
            fn encode_body(&self) -> Vec<u8> {
                prost::Message::encode_to_vec(self)
            }
            fn decode_body(body: &[u8]) -> Result<Self, $crate::pipeline::error::StateError> {
                <Self as prost::Message>::decode(body).map_err(|e| {
                    $crate::pipeline::error::StateError::Part {
                        part: $key.into(),
                        reason: format!("it does not decode: {e}"),
                    }
                })
            }
        }
    };
}
pub(crate) use prost_part;

/// What a chain of ops saved, one part per op, and the parts of the chains
/// it is made of (a mixture's sources), each under its own key.
#[derive(Debug, Default)]
pub(crate) struct SavedParts {
    parts: Vec<Box<dyn Part>>,
    children: Vec<(String, SavedParts)>,
}

/// The version of a node that only groups the parts of a chain.
const GROUP_VERSION: u32 = 1;

impl SavedParts {
    pub fn push(&mut self, part: impl Part + 'static) {
        self.parts.push(Box::new(part));
    }

    /// Adds the parts of an inner chain under `key`.
    pub fn push_child(&mut self, key: String, parts: SavedParts) {
        self.children.push((key, parts));
    }

    /// The parts as nodes of the state's tree.
    pub fn nodes(&self) -> Vec<NodeProto> {
        let parts = self.parts.iter().map(|p| NodeProto {
            key: p.key().to_owned(),
            version: p.version(),
            body: p.encode(),
            children: Vec::new(),
        });
        let children = self.children.iter().map(|(key, parts)| NodeProto {
            key: key.clone(),
            version: GROUP_VERSION,
            body: Vec::new(),
            children: parts.nodes(),
        });
        parts.chain(children).collect()
    }
}

/// A node of the state's tree.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct NodeProto {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(uint32, tag = "2")]
    pub version: u32,
    #[prost(bytes = "vec", tag = "3")]
    pub body: Vec<u8>,
    #[prost(message, repeated, tag = "4")]
    pub children: Vec<NodeProto>,
}

/// The parts of one chain as read back from a state, for its ops to take.
#[derive(Debug)]
pub(crate) struct RawParts {
    /// Where the parts are, for errors (`stream/3`).
    at: String,
    parts: BTreeMap<String, NodeProto>,
}

impl RawParts {
    /// The parts under node `at`; a key given twice is refused.
    pub fn new(at: String, nodes: Vec<NodeProto>) -> Result<Self, StateError> {
        let mut parts = BTreeMap::new();
        for node in nodes {
            let key = node.key.clone();
            if parts.insert(key.clone(), node).is_some() {
                return Err(StateError::Part {
                    part: format!("{at}/{key}"),
                    reason: "it appears twice".into(),
                });
            }
        }
        Ok(RawParts { at, parts })
    }

    /// Takes op `P`'s part: present, of the version this build writes, and
    /// decodable (its fields are checked by the op).
    pub fn take<P: OpPart>(&mut self) -> Result<P, StateError> {
        let part = format!("{}/{}", self.at, P::KEY);
        let Some(NodeProto { version, body, .. }) = self.parts.remove(P::KEY) else {
            return Err(StateError::Part {
                part,
                reason: "the state has no such part: it was taken from a pipeline without \
                         this op"
                    .into(),
            });
        };
        if version != P::VERSION {
            return Err(StateError::Part {
                part,
                reason: format!(
                    "it is version {version} of the part; this build reads version {}",
                    P::VERSION
                ),
            });
        }
        P::decode_body(&body).map_err(|e| match e {
            StateError::Part { reason, .. } => StateError::Part { part, reason },
            other => other,
        })
    }

    /// The parts of the inner chain saved under `key`, if the state has it.
    pub fn take_child(&mut self, key: &str) -> Result<Option<RawParts>, StateError> {
        let Some(node) = self.parts.remove(key) else {
            return Ok(None);
        };
        let at = format!("{}/{key}", self.at);
        if node.version != GROUP_VERSION {
            return Err(StateError::Part {
                part: at,
                reason: format!(
                    "it is version {} of a group of parts; this build reads version \
                     {GROUP_VERSION}",
                    node.version
                ),
            });
        }
        RawParts::new(at, node.children).map(Some)
    }

    /// No parts, under node `at`.
    pub fn empty(at: String) -> Self {
        RawParts {
            at,
            parts: BTreeMap::new(),
        }
    }

    /// Where the parts are (`stream/3`).
    pub fn at(&self) -> &str {
        &self.at
    }

    /// Drops the part or group under `key` (a mixture's removed source).
    pub fn drop_key(&mut self, key: &str) {
        self.parts.remove(key);
    }

    /// Every part must have been taken: one left over belongs to an op this
    /// pipeline does not have.
    pub fn finish(self) -> Result<(), StateError> {
        match self.parts.keys().next() {
            None => Ok(()),
            Some(key) => Err(StateError::Part {
                part: format!("{}/{key}", self.at),
                reason: "this pipeline has no such op".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Counter {
        #[prost(uint64, tag = "1")]
        n: u64,
    }
    prost_part!(Counter, "counter", 2);

    fn node(key: &str, version: u32, body: Vec<u8>) -> NodeProto {
        NodeProto {
            key: key.into(),
            version,
            body,
            children: Vec::new(),
        }
    }

    #[test]
    fn a_part_round_trips_and_every_mismatch_is_named() {
        let mut saved = SavedParts::default();
        saved.push(Counter { n: 7 });
        let mut raw = RawParts::new("stream/1".into(), saved.nodes()).unwrap();
        assert_eq!(raw.take::<Counter>().unwrap(), Counter { n: 7 });
        raw.finish().unwrap();

        let body = Counter { n: 7 }.encode_body();
        let err = RawParts::new("s".into(), vec![node("counter", 3, body.clone())])
            .unwrap()
            .take::<Counter>()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "its part s/counter is wrong: it is version 3 of the part; this build reads \
             version 2"
        );
        let err = RawParts::new("s".into(), vec![])
            .unwrap()
            .take::<Counter>()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("s/counter is wrong: the state has no such part")
        );
        let err = RawParts::new("s".into(), vec![node("other", 1, vec![])])
            .unwrap()
            .finish()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("s/other is wrong: this pipeline has no such op")
        );
        let err = RawParts::new(
            "s".into(),
            vec![node("counter", 2, body.clone()), node("counter", 2, body)],
        )
        .unwrap_err();
        assert!(err.to_string().contains("appears twice"));
        let err = RawParts::new("s".into(), vec![node("counter", 2, vec![0xff])])
            .unwrap()
            .take::<Counter>()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("s/counter is wrong: it does not decode")
        );
    }
}
