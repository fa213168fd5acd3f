//! libFuzzer entry for `aileron_fuzz::proxy_operation` (what it drives and checks is documented there).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aileron_fuzz::proxy_operation(data));
