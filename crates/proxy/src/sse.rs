//! Server-sent events read out of a byte stream as it arrives, chunks cut
//! anywhere: one reader for every part of the proxy that looks inside a
//! stream (the usage tap, the recall rounds).

/// One event: its name when it has one, its data lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) name: Option<String>,
    pub(crate) data: String,
}

/// Reads events line by line; holds at most `limit` bytes of an event
/// that has not ended (a larger one is dropped and said so).
#[derive(Debug)]
pub(crate) struct SseReader {
    limit: usize,
    /// The line not ended yet.
    line: Vec<u8>,
    name: Option<String>,
    data: Option<String>,
    /// The event being read outgrew the limit: skipped to its end.
    skipping: bool,
    overflowed: bool,
}

impl SseReader {
    /// A reader that holds at most `limit` bytes of one event.
    pub(crate) fn with_limit(limit: usize) -> Self {
        SseReader {
            limit,
            line: Vec::new(),
            name: None,
            data: None,
            skipping: false,
            overflowed: false,
        }
    }

    /// The events that `chunk` completes.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            self.hold(&rest[..end]);
            let line = std::mem::take(&mut self.line);
            self.line_ended(&line, &mut out);
            rest = &rest[end + 1..];
        }
        self.hold(rest);
        out
    }

    /// The event the stream ended in without its blank line, if any.
    pub(crate) fn finish(mut self) -> Option<Event> {
        let mut out = Vec::new();
        let line = std::mem::take(&mut self.line);
        self.line_ended(&line, &mut out);
        self.line_ended(b"", &mut out);
        out.pop()
    }

    /// Whether an event was dropped for its size.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed
    }

    fn held(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, String::len)
    }

    fn hold(&mut self, bytes: &[u8]) {
        if self.skipping {
            return;
        }
        if self.held() + bytes.len() > self.limit {
            self.skipping = true;
            self.overflowed = true;
            self.line = Vec::new();
            self.data = None;
            self.name = None;
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn line_ended(&mut self, line: &[u8], out: &mut Vec<Event>) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            let (name, data) = (self.name.take(), self.data.take());
            if !std::mem::take(&mut self.skipping) && (name.is_some() || data.is_some()) {
                out.push(Event {
                    name,
                    data: data.unwrap_or_default(),
                });
            }
            return;
        }
        if self.skipping {
            return;
        }
        let line = String::from_utf8_lossy(line);
        if let Some(n) = line.strip_prefix("event:") {
            self.name = Some(n.trim().to_owned());
        } else if let Some(d) = line.strip_prefix("data:") {
            let d = d.strip_prefix(' ').unwrap_or(d);
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(d);
                }
                None => self.data = Some(d.to_owned()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: Option<&str>, data: &str) -> Event {
        Event {
            name: name.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_split_anywhere_read_the_same() {
        let text = "event: a\ndata: {\"x\":1}\n\n: a comment\nevent: b\r\ndata: 2\r\ndata: 3\r\n\r\ndata: [DONE]\n\n";
        for cut in 0..text.len() {
            let mut r = SseReader::with_limit(1 << 10);
            let mut got = r.feed(&text.as_bytes()[..cut]);
            got.extend(r.feed(&text.as_bytes()[cut..]));
            assert_eq!(r.finish(), None);
            assert_eq!(
                got,
                [
                    event(Some("a"), "{\"x\":1}"),
                    event(Some("b"), "2\n3"),
                    event(None, "[DONE]")
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn an_event_over_the_limit_is_dropped_and_the_next_one_read() {
        let big = format!("data: {}\n\n", "x".repeat(100));
        let mut r = SseReader::with_limit(50);
        let mut got = Vec::new();
        for chunk in big.as_bytes().chunks(7) {
            got.extend(r.feed(chunk));
        }
        got.extend(r.feed(b"data: small\n\ndata: unended"));
        assert!(r.overflowed());
        assert_eq!(got, [event(None, "small")]);
        assert_eq!(r.finish(), Some(event(None, "unended")));
    }
}
