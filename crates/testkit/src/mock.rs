//! A scripted HTTP/1.1 server on 127.0.0.1: it answers the next request with
//! the next reply, records every request, and stops after its last reply.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// One scripted answer.
#[derive(Debug)]
pub enum Reply {
    /// Status, body and extra headers.
    Http(u16, String, Vec<(&'static str, String)>),
    /// Accept, read the request, then say nothing for this long.
    Hang(Duration),
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Request path.
    pub path: String,
    /// Headers in order.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` when it was not JSON).
    pub body: Value,
}

impl Seen {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The server: its base URL (`http://127.0.0.1:PORT`) and what it received.
#[derive(Debug)]
pub struct Mock {
    /// Base URL.
    pub url: String,
    /// Requests received.
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Mock {
    /// Starts a server that answers one request per reply, in order.
    pub fn start(replies: Vec<Reply>) -> Mock {
        let replies = Mutex::new(replies.into_iter());
        Self::serve(move |_| replies.lock().unwrap().next())
    }

    /// Starts a server that answers every request with what `answer` makes
    /// of it; it stops at the first `None`.
    pub fn serve(answer: impl Fn(&Seen) -> Option<Reply> + Send + 'static) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            loop {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let request = read_request(&stream);
                log.lock().unwrap().push(request.clone());
                let Some(reply) = answer(&request) else {
                    return;
                };
                write_reply(stream, reply);
            }
        });
        Mock { url, seen }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn read_request(stream: &std::net::TcpStream) -> Seen {
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
    let mut headers = Vec::new();
    let mut len = 0;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap();
            }
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    Seen {
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    }
}

fn write_reply(mut stream: std::net::TcpStream, reply: Reply) {
    match reply {
        Reply::Hang(d) => std::thread::sleep(d),
        Reply::Http(status, body, extra) => {
            let mut head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (k, v) in extra {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
        }
    }
}

/// An OpenAI Chat Completions answer.
pub fn openai_ok(text: &str) -> Reply {
    let body = serde_json::json!({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]});
    Reply::Http(200, body.to_string(), Vec::new())
}

/// An OpenAI Chat Completions answer that reports its usage, as the API
/// does: `prompt` tokens read (`cached` of them from the cache) and
/// `completion` written.
pub fn openai_ok_reporting(text: &str, prompt: u64, cached: u64, completion: u64) -> Reply {
    let body = serde_json::json!({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}}});
    Reply::Http(200, body.to_string(), Vec::new())
}

/// An Anthropic Messages answer.
pub fn anthropic_ok(text: &str) -> Reply {
    let body = serde_json::json!({"id": "x", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"});
    Reply::Http(200, body.to_string(), Vec::new())
}
