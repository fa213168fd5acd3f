//! libFuzzer entry for `aileron_fuzz::guest_http_request` (what it drives and checks is documented there).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aileron_fuzz::guest_http_request(data));
