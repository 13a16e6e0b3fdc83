//! `quickshake_wire::proxy_protocol::parse` on arbitrary bytes: what a listener with the
//! `proxy_protocol` listener filter reads first from every connection.
//!
//! Properties: no panic; `Done` consumes at least one byte and no more than the input, and the
//! header alone parses to the same answer; a `NeedMore` input stays undecided for every prefix.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quickshake_wire::proxy_protocol::{parse, Parse};

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Parse::Done(h) => {
            let n = h.consumed();
            assert!(n > 0 && n <= data.len(), "consumed {n} of {}", data.len());
            assert_eq!(parse(&data[..n]), Parse::Done(h), "the header alone parses the same");
        }
        Parse::NeedMore => {
            for cut in 0..data.len() {
                assert!(matches!(parse(&data[..cut]), Parse::NeedMore), "prefix {cut} decided");
            }
        }
        Parse::Invalid(_) => {}
    }
});
