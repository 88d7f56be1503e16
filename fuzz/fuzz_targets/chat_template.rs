#![no_main]
// Replayed by tests/fuzz_corpus.rs over fuzz/corpus/chat_template/ in the normal test run.
libfuzzer_sys::fuzz_target!(|data: &[u8]| readout::fuzz::chat_template(data));
