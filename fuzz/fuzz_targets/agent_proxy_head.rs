//! libFuzzer entry for `aileron_fuzz::agent_proxy_head` (what it drives and checks is documented there).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aileron_fuzz::agent_proxy_head(data));
