//! `receipt_for(state, answering, at_ms)` of ledger_stream.domain.outputs, in Rust: reads the
//! KeyState's fields from the Python object, derives the receipt id (SHA-256 of the facts,
//! as domain.ids does) and builds the Python Receipt. The conversion both ways is in the
//! figure, as it would be in a compiled core that keeps Python domain objects.
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use sha2::{Digest, Sha256};

/// The enums and the Receipt class, looked up once (`bind`).
#[pyclass(frozen)]
struct Slice {
    receipt: Py<PyAny>,
    phase_expired: Py<PyAny>,
    phase: Py<PyAny>,
    phase_receipt: Py<PyDict>,
    rejected: Py<PyAny>,
    reason_none: Py<PyAny>,
}

fn receipt_id(key: &str, answering: &str, attempt: i64, status: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"receipt\x1f");
    hasher.update(key.as_bytes());
    hasher.update(b"\x1f");
    hasher.update(answering.as_bytes());
    hasher.update(b"\x1f");
    hasher.update(attempt.to_string().as_bytes());
    hasher.update(b"\x1f");
    hasher.update(status.as_bytes());
    let mut text = hex::encode(hasher.finalize());
    text.truncate(32);
    text
}

#[pymethods]
impl Slice {
    #[new]
    fn new(receipt: Py<PyAny>, phase: Py<PyAny>, phase_receipt: Py<PyDict>,
           rejected: Py<PyAny>, reason_none: Py<PyAny>, py: Python<'_>) -> PyResult<Self> {
        let phase_expired = phase.bind(py).getattr("EXPIRED")?.unbind();
        Ok(Slice { receipt, phase_expired, phase, phase_receipt, rejected, reason_none })
    }

    /// domain.outputs.key_status
    fn key_status<'py>(&self, py: Python<'py>, state: &Bound<'py, PyAny>)
        -> PyResult<Bound<'py, PyAny>> {
        let phase = state.getattr("phase")?;
        let table = self.phase_receipt.bind(py);
        if phase.is(self.phase_expired.bind(py)) {
            let sealed = state.getattr("sealed_outcome")?;
            if sealed.is_truthy()? {
                let sealed_phase = self.phase.bind(py).call1((sealed,))?;
                return Ok(table.get_item(sealed_phase)?.unwrap());
            }
        }
        Ok(match table.get_item(phase)? {
            Some(status) => status,
            None => self.rejected.bind(py).clone(),
        })
    }

    /// domain.outputs.receipt_for with its defaults (no status, reason, detail or hash).
    fn receipt_for<'py>(&self, py: Python<'py>, state: &Bound<'py, PyAny>, answering: &str,
                        at_ms: i64) -> PyResult<Bound<'py, PyAny>> {
        let status = self.key_status(py, state)?;
        let key_obj = state.getattr("key")?;
        let key = key_obj.downcast::<PyString>()?.to_str()?;
        let attempt: i64 = state.getattr("attempt")?.extract()?;
        let status_value = status.getattr("value")?;
        let id = receipt_id(key, answering, attempt, status_value.downcast::<PyString>()?.to_str()?);
        let kwargs = PyDict::new(py);
        kwargs.set_item("receipt_id", id)?;
        kwargs.set_item("key", &key_obj)?;
        kwargs.set_item("intent_event_id", answering)?;
        kwargs.set_item("status", &status)?;
        kwargs.set_item("reason", self.reason_none.bind(py))?;
        kwargs.set_item("args_hash", state.getattr("args_hash")?)?;
        kwargs.set_item("attempts", attempt)?;
        kwargs.set_item("at_ms", at_ms)?;
        kwargs.set_item("external_id", state.getattr("external_id")?)?;
        kwargs.set_item("detail", "")?;
        kwargs.set_item("key_status", &status)?;
        kwargs.set_item("effect_intent_id", state.getattr("intent_event_id")?)?;
        self.receipt.bind(py).call((), Some(&kwargs))
    }
}

#[pymodule]
fn receipt_slice(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Slice>()?;
    Ok(())
}
