//! The pipeline a description gives: the Python side keeps its pipeline as
//! the engine's description (plain data) and hands it over as JSON, read
//! here in one call (`Description::from_json`: every value checked there,
//! an error naming its place), so that no step is spelled twice.

use infeed::pipeline::description::{Features, Output};
use infeed::pipeline::{Description, Listed, ParsedPipeline, PipelineError};
use infeed::spec::FeatureSpec;
use pyo3::prelude::*;

use crate::errors;

/// The description in `json`, read and checked.
pub fn description(py: Python<'_>, json: &str) -> PyResult<Description> {
    Description::from_json(json).map_err(|e| errors::to_py(py, e))
}

/// The pipeline `json` describes, resumed from `state`, on the files its
/// globs matched when the Python pipeline was made (`listed`: a glob not
/// there is listed here, a TFDS split read, without the GIL).
pub fn build(
    py: Python<'_>,
    json: &str,
    state: Option<&[u8]>,
    listed: Option<Listed>,
) -> PyResult<ParsedPipeline> {
    let d = description(py, json)?;
    if d.parse.is_none() {
        return Err(errors::spec(
            py,
            "the pipeline has no parse(spec) step: infeed needs a spec to make batches".into(),
        ));
    }
    if d.output == Output::Columns {
        return Err(errors::spec(
            py,
            "the description asks for parsed columns (output: columns): the Python package \
             delivers static-shape tensors"
                .into(),
        ));
    }
    let pipeline = py
        .detach(|| ParsedPipeline::from_description_listed(&d, &listed.unwrap_or_default()))
        .map_err(|e| errors::to_py(py, e))?;
    Ok(match state {
        Some(state) => pipeline.resume_from(state),
        None => pipeline,
    })
}

/// A spec as a description's features hold it (JSON: a list of features,
/// or the text form), for the random-access source.
pub(crate) fn feature_spec(py: Python<'_>, json: &str) -> PyResult<FeatureSpec> {
    let features: Features =
        serde_json::from_str(json).map_err(|e| errors::spec(py, format!("the spec: {e}")))?;
    features
        .spec()
        .map_err(|e| errors::to_py(py, PipelineError::from(e)))
}
