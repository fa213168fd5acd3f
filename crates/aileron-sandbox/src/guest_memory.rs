//! Bounds-checked access to a guest's linear memory for host functions.
//!
//! Every pointer and length a guest passes is untrusted. wasm32 pointers are unsigned, so the
//! `i32` parameters of the ABI are reinterpreted as `u32` by the callers; a range that does not
//! lie entirely inside the memory is a [`GuestFault`], which host functions raise as a trap (the
//! call then fails with `connector_runtime_error`, the host never reads or writes out of bounds).

use std::ops::Range;

use wasmtime::{Caller, Extern};

use crate::context::CallContext;

#[derive(Debug, thiserror::Error)]
pub(crate) enum GuestFault {
    #[error("{function}: the module exports no `memory`")]
    NoMemory { function: &'static str },
    #[error("{function}: guest range {ptr:#x}+{len} lies outside linear memory of {size} bytes")]
    OutOfBounds { function: &'static str, ptr: u32, len: u64, size: usize },
}

/// The guest's linear memory, borrowed for the duration of one host call.
pub(crate) struct GuestMemory<'a> {
    bytes: &'a mut [u8],
    function: &'static str,
}

impl<'a> GuestMemory<'a> {
    /// Borrows the exported `memory` together with the store data (they are disjoint borrows).
    /// `function` names the host function in fault messages. The export is looked up by name
    /// once a call: a run makes several host calls, and each lookup cost ~550 instructions.
    pub(crate) fn of(
        caller: &'a mut Caller<'_, CallContext>,
        function: &'static str,
    ) -> Result<(GuestMemory<'a>, &'a mut CallContext), GuestFault> {
        let memory = match caller.data().memory {
            Some(memory) => memory,
            None => {
                let memory = caller
                    .get_export("memory")
                    .and_then(Extern::into_memory)
                    .ok_or(GuestFault::NoMemory { function })?;
                caller.data_mut().memory = Some(memory);
                memory
            }
        };
        let (bytes, data) = memory.data_and_store_mut(caller);
        Ok((GuestMemory { bytes, function }, data))
    }

    fn range(&self, ptr: u32, len: u64) -> Result<Range<usize>, GuestFault> {
        let fault = || GuestFault::OutOfBounds { function: self.function, ptr, len, size: self.bytes.len() };
        let start = usize::try_from(ptr).map_err(|_| fault())?;
        let len = usize::try_from(len).map_err(|_| fault())?;
        let end = start.checked_add(len).ok_or_else(fault)?;
        if end > self.bytes.len() {
            return Err(fault());
        }
        Ok(start..end)
    }

    pub(crate) fn bytes(&self, ptr: u32, len: u32) -> Result<&[u8], GuestFault> {
        let range = self.range(ptr, u64::from(len))?;
        Ok(&self.bytes[range])
    }

    pub(crate) fn bytes_mut(&mut self, ptr: u32, len: u32) -> Result<&mut [u8], GuestFault> {
        let range = self.range(ptr, u64::from(len))?;
        Ok(&mut self.bytes[range])
    }

    /// A guest string; invalid UTF-8 is replaced rather than rejected (logs and levels only).
    pub(crate) fn string_lossy(&self, ptr: u32, len: u32) -> Result<String, GuestFault> {
        Ok(String::from_utf8_lossy(self.bytes(ptr, len)?).into_owned())
    }

    pub(crate) fn write(&mut self, ptr: u32, data: &[u8]) -> Result<(), GuestFault> {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.bytes_mut(ptr, len)?.copy_from_slice(data);
        Ok(())
    }

    pub(crate) fn read_u32(&self, ptr: u32) -> Result<u32, GuestFault> {
        let bytes = self.bytes(ptr, 4)?;
        Ok(u32::from_le_bytes(bytes.try_into().expect("range of length 4")))
    }

    pub(crate) fn read_u64(&self, ptr: u32) -> Result<u64, GuestFault> {
        let bytes = self.bytes(ptr, 8)?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("range of length 8")))
    }

    pub(crate) fn read_u16(&self, ptr: u32) -> Result<u16, GuestFault> {
        let bytes = self.bytes(ptr, 2)?;
        Ok(u16::from_le_bytes(bytes.try_into().expect("range of length 2")))
    }

    pub(crate) fn write_u32(&mut self, ptr: u32, value: u32) -> Result<(), GuestFault> {
        self.write(ptr, &value.to_le_bytes())
    }

    pub(crate) fn write_u64(&mut self, ptr: u32, value: u64) -> Result<(), GuestFault> {
        self.write(ptr, &value.to_le_bytes())
    }

    /// Checks that an array of `count` WASI iovecs (`{buf: u32, len: u32}`) at `ptr` lies in
    /// memory, and gives the address of each entry, read with [`GuestMemory::iovec`]: no list is
    /// built (every write a guest makes to stdout reads one), and a call that writes into the
    /// buffers they name (`fd_read`) can while it goes through them.
    pub(crate) fn iovecs(&self, ptr: u32, count: u32) -> Result<impl Iterator<Item = u32> + use<>, GuestFault> {
        self.range(ptr, u64::from(count) * 8)?;
        Ok((0..count).map(move |index| ptr + index * 8))
    }

    /// The iovec at `at` (an address [`GuestMemory::iovecs`] gave), as a guest range.
    pub(crate) fn iovec(&self, at: u32) -> Result<(u32, u32), GuestFault> {
        Ok((self.read_u32(at)?, self.read_u32(at + 4)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(bytes: &mut [u8]) -> GuestMemory<'_> {
        GuestMemory { bytes, function: "test" }
    }

    #[test]
    fn ranges_are_checked_against_the_memory_size() {
        let mut backing = [0u8; 16];
        let memory = memory(&mut backing);
        // (ptr, len, in bounds)
        let table = [(0, 16, true), (15, 1, true), (16, 0, true), (16, 1, false), (17, 0, false), (u32::MAX, 2, false)];
        for (ptr, len, ok) in table {
            assert_eq!(memory.bytes(ptr, len).is_ok(), ok, "{ptr}+{len}");
        }
    }

    #[test]
    fn iovec_arrays_must_fit_entirely() {
        let mut backing = [0u8; 24];
        backing[0..8].copy_from_slice(&[4, 0, 0, 0, 2, 0, 0, 0]);
        backing[8..16].copy_from_slice(&[9, 0, 0, 0, 3, 0, 0, 0]);
        let memory = memory(&mut backing);
        let entries: Vec<_> = memory.iovecs(0, 2).unwrap().map(|at| memory.iovec(at).unwrap()).collect();
        assert_eq!(entries, vec![(4, 2), (9, 3)]);
        assert!(memory.iovecs(0, 4).is_err());
        assert!(memory.iovecs(20, 1).is_err());
        assert!(memory.iovecs(0, u32::MAX).is_err());
    }

    #[test]
    fn writes_out_of_bounds_fail_without_partial_writes() {
        let mut backing = [0u8; 8];
        let mut memory = memory(&mut backing);
        assert!(memory.write_u64(4, u64::MAX).is_err());
        memory.write_u32(4, 0x0102_0304).unwrap();
        assert_eq!(backing, [0, 0, 0, 0, 4, 3, 2, 1]);
    }
}
