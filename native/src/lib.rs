//! The hot loop of logfork's segment scan, `checkers.records.iter_batch_rows`, in Rust.
//!
//! `walk_rows` and `walk_batches` do exactly what the Python loop's fast path does: from
//! `start`, for each complete, well-formed v2 batch (magic 2, length >= 49, the entry fits
//! before `end`, lastOffsetDelta >= 0, baseOffset above the last offset so far, CRC-32C of
//! entry bytes 21.. equal to the stored CRC) they make the row the Python loop makes. They
//! stop at `end`, after `limit` batches, or at the first entry the fast path declines, and
//! return `(items, position, last offset)`: Python's `_slow_entry` then handles that entry
//! as it always has, and calls back here for the rest.
//!
//! The CRCs are checked without the GIL, on big calls half of them on a second thread while
//! the objects are made; the header pass and the objects hold the GIL.

use std::ptr;

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

const LOG_OVERHEAD: usize = 12; // offset:int64 + length:int32
const V2_HEADER_SIZE: usize = 61;
const V2_MIN_LENGTH: i32 = 49; // the header less the 12-byte prefix
const V2_CRC_START: usize = 21; // CRC-32C covers the attributes to the end of the entry
const FIELDS: usize = 17; // checkers.records.BATCH_FIELDS
const ATTR_COMPRESSION: i16 = 0x07;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

/// The header of a batch that passed every fast-path check.
#[derive(Clone, Copy)]
struct Header {
    position: usize,
    size: usize,
    base: i64,
    last_offset_delta: i32,
    leader_epoch: i32,
    crc: u32,
    attributes: i16,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    record_count: i32,
}

/// CRC-32C, as a v2 batch stores it.
fn crc32c(data: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32
}

fn be<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b[at..at + N].try_into().expect("slice of N bytes")
}

/// Headers from `pos` while the fast path accepts them, every check but the CRC; returns
/// (stop position, last offset). The CRCs are checked afterwards (`first_bad_crc`), so that
/// they can run beside the object making; the walk then stops at the first of either.
///
/// `last` is an i128 because Python's is unbounded: baseOffset + lastOffsetDelta may pass
/// i64::MAX, and a later base must still compare against it as Python compares.
fn header_pass(
    data: &[u8],
    mut pos: usize,
    end: usize,
    mut last: i128,
    limit: usize,
    out: &mut Vec<Header>,
) -> (usize, i128) {
    while out.len() < limit && end - pos >= V2_HEADER_SIZE {
        let h = &data[pos..pos + V2_HEADER_SIZE];
        let length = i32::from_be_bytes(be(h, 8));
        if h[16] != 2 || length < V2_MIN_LENGTH {
            break;
        }
        let next = pos + LOG_OVERHEAD + length as usize;
        let base = i64::from_be_bytes(be(h, 0));
        let last_offset_delta = i32::from_be_bytes(be(h, 23));
        if next > end || last_offset_delta < 0 || i128::from(base) <= last {
            break;
        }
        last = i128::from(base) + i128::from(last_offset_delta);
        out.push(Header {
            position: pos,
            size: next - pos,
            base,
            last_offset_delta,
            leader_epoch: i32::from_be_bytes(be(h, 12)),
            crc: u32::from_be_bytes(be(h, 17)),
            attributes: i16::from_be_bytes(be(h, 21)),
            max_timestamp: i64::from_be_bytes(be(h, 35)),
            producer_id: i64::from_be_bytes(be(h, 43)),
            producer_epoch: i16::from_be_bytes(be(h, 51)),
            base_sequence: i32::from_be_bytes(be(h, 53)),
            record_count: i32::from_be_bytes(be(h, 57)),
        });
        pos = next;
    }
    (pos, last)
}

/// The index of the first header whose stored CRC does not match its bytes.
fn first_bad_crc(data: &[u8], headers: &[Header]) -> Option<usize> {
    headers
        .iter()
        .position(|h| crc32c(&data[h.position + V2_CRC_START..h.position + h.size]) != h.crc)
}

/// A contiguous byte view of any buffer-protocol object, released on drop (GIL held).
struct Buffer {
    view: ffi::Py_buffer,
}

impl Buffer {
    fn get(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let mut view = std::mem::MaybeUninit::<ffi::Py_buffer>::uninit();
        // PyBUF_SIMPLE: plain contiguous bytes, whatever the item format.
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), view.as_mut_ptr(), ffi::PyBUF_SIMPLE) }
            != 0
        {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(Buffer {
            view: unsafe { view.assume_init() },
        })
    }

    fn bytes(&self) -> &[u8] {
        if self.view.len == 0 {
            return &[];
        }
        // The exporter keeps the memory valid and unmoved until PyBuffer_Release. Like
        // hashlib, the walk reads it without the GIL: a thread writing into the same
        // bytearray meanwhile would race with it (segments are read-only maps or bytes).
        unsafe { std::slice::from_raw_parts(self.view.buf as *const u8, self.view.len as usize) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        unsafe { ffi::PyBuffer_Release(&mut self.view) }
    }
}

/// From this many bytes of batches in one call, half of their CRCs are checked on a second
/// thread while this one makes the objects: on 16 KB batches the CRCs are most of the scan
/// and the objects the rest. A call of one-record batches (about 75 KB per 1024) stays on
/// one thread, where starting another would cost more than it saves.
const PARALLEL_BYTES: usize = 4 << 20;

/// Drops the objects made so far (GIL held).
unsafe fn drop_all(objects: &[*mut ffi::PyObject]) {
    for &obj in objects {
        ffi::Py_DECREF(obj);
    }
}

/// One object per header, made by `make`; on an error the ones made are dropped.
fn make_all(
    headers: &[Header],
    make: &mut impl FnMut(&Header) -> PyResult<*mut ffi::PyObject>,
) -> PyResult<Vec<*mut ffi::PyObject>> {
    let mut objects = Vec::with_capacity(headers.len());
    for h in headers {
        match make(h) {
            Ok(obj) => objects.push(obj),
            Err(e) => {
                unsafe { drop_all(&objects) };
                return Err(e);
            }
        }
    }
    Ok(objects)
}

/// One object per batch the fast path takes from `start`, in a list, with the position
/// where the walk stopped and the last offset of the last batch taken (`last` itself when
/// none is); what `walk_rows` and `walk_batches` share. `wrap` makes the object from the
/// row's 17 new references, which it steals, or returns NULL (a Python error set) and
/// leaves them to be dropped here. The CRCs are checked without the GIL.
#[allow(clippy::too_many_arguments)]
fn walk_objects<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: usize,
    end: usize,
    last: &Bound<'py, PyAny>,
    segment: &Bound<'py, PyString>,
    names: &Bound<'py, PyTuple>,
    limit: usize,
    wrap: impl Fn(&[*mut ffi::PyObject; FIELDS]) -> *mut ffi::PyObject,
) -> PyResult<(Bound<'py, PyList>, usize, i128)> {
    let buffer = Buffer::get(buf)?;
    let data = buffer.bytes();
    let names = compression_names(names)?;
    let last = last_offset(last)?;
    let mut make = |h: &Header| unsafe {
        let values = row_values(py, h, segment.as_ptr(), &names)?;
        let obj = wrap(&values);
        if obj.is_null() {
            for v in values {
                ffi::Py_DECREF(v);
            }
            return Err(PyErr::fetch(py));
        }
        Ok(obj)
    };
    if start > end || end > data.len() {
        return Err(PyValueError::new_err(format!(
            "need 0 <= start <= end <= {}, got start {start}, end {end}",
            data.len()
        )));
    }
    let mut headers = Vec::with_capacity(limit.min(4096));
    let (stop, stop_last) = header_pass(data, start, end, last, limit, &mut headers);
    let (bad, mut objects) = if headers.is_empty() {
        (None, Vec::new())
    } else if stop - start >= PARALLEL_BYTES {
        let halfway = start + (stop - start) / 2;
        let (early, late) = headers.split_at(headers.partition_point(|h| h.position < halfway));
        std::thread::scope(|s| {
            let checker = s.spawn(|| first_bad_crc(data, early));
            let objects = make_all(&headers, &mut make);
            let late_bad = py.detach(|| first_bad_crc(data, late));
            let early_bad = checker.join().expect("a CRC check cannot panic");
            let bad = early_bad.or(late_bad.map(|i| i + early.len()));
            objects.map(|objects| (bad, objects))
        })?
    } else {
        let bad = py.detach(|| first_bad_crc(data, &headers));
        let taken = &headers[..bad.unwrap_or(headers.len())];
        (bad, make_all(taken, &mut make)?)
    };
    let (pos, last) = match bad {
        None => (stop, stop_last),
        Some(0) => (start, last),
        Some(i) => {
            let h = &headers[i - 1];
            (
                headers[i].position,
                i128::from(h.base) + i128::from(h.last_offset_delta),
            )
        }
    };
    if let Some(i) = bad {
        unsafe { drop_all(&objects[i.min(objects.len())..]) };
        objects.truncate(i);
    }
    unsafe {
        let list = ffi::PyList_New(objects.len() as isize);
        if list.is_null() {
            drop_all(&objects);
            return Err(PyErr::fetch(py));
        }
        for (i, obj) in objects.into_iter().enumerate() {
            ffi::PyList_SET_ITEM(list, i as isize, obj);
        }
        Ok((
            Bound::from_owned_ptr(py, list).cast_into_unchecked(),
            pos,
            last,
        ))
    }
}

/// `last` as an i128: a Python int beyond it compares with every i64 base as the end of
/// i128's range on its side does. Only a walk that took no batch returns it as it is, and
/// the caller then keeps its own.
fn last_offset(last: &Bound<'_, PyAny>) -> PyResult<i128> {
    match last.extract::<i128>() {
        Err(e) if e.is_instance_of::<PyOverflowError>(last.py()) => {
            Ok(if last.lt(0)? { i128::MIN } else { i128::MAX })
        }
        other => other,
    }
}

/// The eight compression names, borrowed from the caller's tuple (it outlives the call).
fn compression_names(names: &Bound<'_, PyTuple>) -> PyResult<[*mut ffi::PyObject; 8]> {
    if names.len() != 8 {
        return Err(PyValueError::new_err("names must hold 8 compression names"));
    }
    let mut out = [ptr::null_mut(); 8];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = names.get_item(i)?.as_ptr();
    }
    Ok(out)
}

/// New references to the row's 17 values, in BATCH_FIELDS order.
unsafe fn row_values(
    py: Python<'_>,
    h: &Header,
    segment: *mut ffi::PyObject,
    names: &[*mut ffi::PyObject; 8],
) -> PyResult<[*mut ffi::PyObject; FIELDS]> {
    fn share(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
        unsafe { ffi::Py_INCREF(obj) };
        obj
    }
    let boolean = |v: bool| share(if v { ffi::Py_True() } else { ffi::Py_False() });
    let long = |v: i64| unsafe { ffi::PyLong_FromLongLong(v) };
    let last = match h.base.checked_add(i64::from(h.last_offset_delta)) {
        Some(v) => long(v),
        None => (i128::from(h.base) + i128::from(h.last_offset_delta))
            .into_pyobject(py)?
            .into_ptr(),
    };
    let values = [
        long(h.base),
        last,
        long(i64::from(h.leader_epoch)),
        long(i64::from(h.crc)),
        boolean(true),
        long(h.size as i64),
        long(2),
        long(i64::from(h.record_count)),
        share(names[(h.attributes & ATTR_COMPRESSION) as usize]),
        boolean(h.attributes & ATTR_CONTROL != 0),
        boolean(h.attributes & ATTR_TRANSACTIONAL != 0),
        long(h.producer_id),
        long(i64::from(h.producer_epoch)),
        long(i64::from(h.base_sequence)),
        long(h.max_timestamp),
        share(segment),
        long(h.position as i64),
    ];
    if values.iter().any(|v| v.is_null()) {
        for v in values {
            ffi::Py_XDECREF(v);
        }
        return Err(PyErr::fetch(py));
    }
    Ok(values)
}

/// Rows as `iter_batch_rows` yields them, one tuple per batch.
///
/// Returns `(rows, position, last)`: `position` is where the walk stopped (`end`, the
/// entry the fast path declines, or the entry after the `limit`-th batch) and `last` the
/// last offset of the last row (meaningless when there is no row).
#[pyfunction]
#[pyo3(signature = (buf, start, end, last, segment, names, limit))]
#[allow(clippy::too_many_arguments)]
fn walk_rows<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: usize,
    end: usize,
    last: &Bound<'py, PyAny>,
    segment: &Bound<'py, PyString>,
    names: &Bound<'py, PyTuple>,
    limit: usize,
) -> PyResult<(Bound<'py, PyList>, usize, i128)> {
    walk_objects(
        py,
        buf,
        start,
        end,
        last,
        segment,
        names,
        limit,
        |values| unsafe {
            let row = ffi::PyTuple_New(FIELDS as isize);
            if !row.is_null() {
                for (j, &v) in values.iter().enumerate() {
                    ffi::PyTuple_SET_ITEM(row, j as isize, v);
                }
            }
            row
        },
    )
}

/// Where each of a slotted class's fields lives in its instances.
///
/// Only plain object slots of `cls` itself are accepted (what `__slots__` makes: member
/// descriptors of type `Py_T_OBJECT_EX`, writable), so that storing a new reference at the
/// slot's offset in a fresh instance is exactly what the descriptor's own setter does.
fn slot_offsets(cls: &Bound<'_, PyType>, fields: &Bound<'_, PyTuple>) -> PyResult<[isize; FIELDS]> {
    if fields.len() != FIELDS {
        return Err(PyValueError::new_err(format!(
            "fields must name {FIELDS} slots"
        )));
    }
    let mut offsets = [0isize; FIELDS];
    for (i, name) in fields.iter().enumerate() {
        let descr = cls.getattr(name.cast::<PyString>()?)?;
        unsafe {
            let p = descr.as_ptr();
            if ffi::Py_TYPE(p) != ptr::addr_of_mut!(ffi::PyMemberDescr_Type) {
                return Err(PyTypeError::new_err(format!("{name} is not a slot")));
            }
            let d = p as *mut ffi::PyMemberDescrObject;
            let member = &*(*d).d_member;
            if (*d).d_common.d_type != cls.as_type_ptr()
                || member.type_code != ffi::Py_T_OBJECT_EX
                || member.flags & ffi::Py_READONLY != 0
            {
                return Err(PyTypeError::new_err(format!("{name} is not a plain slot")));
            }
            offsets[i] = member.offset;
        }
    }
    Ok(offsets)
}

/// Instances of `cls` (`checkers.records.Batch`), fields set from the rows `walk_rows`
/// would make, without a tuple or an `__init__` call per batch. `fields` names the slots in
/// BATCH_FIELDS order. Returns `(batches, position, last)` as `walk_rows` does.
#[pyfunction]
#[pyo3(signature = (buf, start, end, last, segment, names, cls, fields, limit))]
#[allow(clippy::too_many_arguments)]
fn walk_batches<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: usize,
    end: usize,
    last: &Bound<'py, PyAny>,
    segment: &Bound<'py, PyString>,
    names: &Bound<'py, PyTuple>,
    cls: &Bound<'py, PyType>,
    fields: &Bound<'py, PyTuple>,
    limit: usize,
) -> PyResult<(Bound<'py, PyList>, usize, i128)> {
    let offsets = slot_offsets(cls, fields)?;
    let tp = cls.as_type_ptr();
    let (alloc, gc) = unsafe {
        (
            (*tp).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc),
            ffi::PyType_IS_GC(tp) != 0,
        )
    };
    walk_objects(
        py,
        buf,
        start,
        end,
        last,
        segment,
        names,
        limit,
        |values| unsafe {
            let obj = alloc(tp, 0); // zeroed: every slot starts NULL
            if obj.is_null() {
                return obj;
            }
            for (offset, &v) in offsets.iter().zip(values) {
                *((obj as *mut u8).offset(*offset) as *mut *mut ffi::PyObject) = v;
            }
            if gc {
                // Ints, bools and strs cannot make a cycle: left tracked, millions of
                // batches would make each later collection walk all of them.
                ffi::PyObject_GC_UnTrack(obj as *mut std::os::raw::c_void);
            }
            obj
        },
    )
}

/// CRC-32C of a buffer, the function the walk checks batches with (for tests).
#[pyfunction]
#[pyo3(name = "crc32c")]
fn checksum(buf: &Bound<'_, PyAny>) -> PyResult<u32> {
    let buffer = Buffer::get(buf)?;
    Ok(crc32c(buffer.bytes()))
}

#[pymodule]
fn logfork_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(walk_rows, m)?)?;
    m.add_function(wrap_pyfunction!(walk_batches, m)?)?;
    m.add_function(wrap_pyfunction!(checksum, m)?)?;
    Ok(())
}
