//! The route table, played as an attacker would: each provider's paths go
//! to its own upstream only, with its own credentials only, and no path can
//! send the proxy (and the key) to another host.

use abridge_proxy::ProxyConfig;
use abridge_testkit::{Mock, Reply};

use crate::support::{metric, metrics_text, raw_request, serve_config};

/// An upstream that answers every request with 200 and records it.
fn recorder() -> Mock {
    Mock::serve(|_| Some(Reply::Http(200, "{}".into(), Vec::new())))
}

/// A raw request (see [`raw_request`]) with the proxy's address as its `Host`.
fn raw(proxy: &str, method: &str, target: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let addr = proxy.trim_start_matches("http://");
    raw_request(proxy, addr, method, target, headers)
}

fn config(openai: &str, anthropic: &str, gemini: &str) -> ProxyConfig {
    let mut c = ProxyConfig::default();
    c.serve.openai_upstream = openai.to_owned();
    c.serve.anthropic_upstream = anthropic.to_owned();
    c.serve.gemini_upstream = gemini.to_owned();
    c
}

const KEY: (&str, &str) = ("authorization", "Bearer sk-route-secret");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_path_leaves_the_configured_upstream() {
    let (home, elsewhere) = (recorder(), recorder());
    let port = elsewhere.url.rsplit(':').next().unwrap().to_owned();
    for base in [home.url.clone(), format!("{}/v1", home.url)] {
        let (proxy, stop, done) = serve_config(config(&base, &home.url, ""), None).await;
        let escapes = [
            format!("/v1@127.0.0.1:{port}/v1/models"),
            format!("/@127.0.0.1:{port}/v1/models"),
            format!("//127.0.0.1:{port}/v1/models"),
            format!("/v1//127.0.0.1:{port}/v1/models"),
            "/v1/../../x".to_owned(),
            "/v1/%2e%2e/%2e%2e/x".to_owned(),
            "/v1/%2E%2E/x".to_owned(),
            "/v1%2f..%2fx".to_owned(),
            format!("/v1/%40127.0.0.1:{port}"),
            "/v1/%252e%252e/x".to_owned(),
            "/v1/..\\..\\x".to_owned(),
            format!("http://127.0.0.1:{port}/v1/models"),
            "/v1/messages/../../x".to_owned(),
            "/v1beta/../v1/models".to_owned(),
        ];
        let home_before = home.requests().len();
        for target in &escapes {
            for method in ["GET", "POST"] {
                let (status, body) = raw(&proxy, method, target, &[KEY]);
                assert_eq!(status, 400, "{base} {method} {target}: {body}");
            }
        }
        assert!(
            elsewhere.requests().is_empty(),
            "{base}: a request left the base"
        );
        assert_eq!(
            home.requests().len(),
            home_before,
            "{base}: an escape was forwarded"
        );
        // What stays inside goes through.
        let (status, _) = raw(&proxy, "GET", "/v1/models", &[KEY]);
        assert_eq!(status, 200, "{base}");
        let last = home.requests().pop().unwrap();
        assert!(last.path.ends_with("/models"), "{base}: {}", last.path);
        let metrics = metrics_text(&proxy).await;
        assert!(
            metric(&metrics, "abridge_refused_total{provider=\"openai\"}") >= 1.0,
            "{metrics}"
        );
        let _ = stop.send(());
        let _ = done.await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_request_goes_to_gemini_or_nowhere() {
    let (openai, gemini) = (recorder(), recorder());
    let body = r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#;
    let gemini_paths = [
        "/v1beta/models/gemini-2.5-pro:generateContent",
        "/v1/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        "/v1beta/models/gemini-2.5-pro:countTokens?key=AIza-query-secret",
    ];
    // No Gemini upstream: refused with a clear error, sent nowhere.
    let (proxy, stop, done) =
        serve_config(config(&format!("{}/v1", openai.url), &openai.url, ""), None).await;
    for path in gemini_paths {
        let (status, text) = raw(&proxy, "POST", path, &[("x-goog-api-key", "AIza-secret")]);
        assert_eq!(status, 501, "{path}: {text}");
        assert!(text.contains("gemini_upstream"), "{text}");
        assert!(!text.contains("AIza"), "the key is echoed: {text}");
    }
    assert!(
        openai.requests().is_empty(),
        "a Gemini request reached OpenAI"
    );
    let _ = stop.send(());
    let _ = done.await;

    // With one: there, with its key and no other provider's.
    let (proxy, stop, done) = serve_config(
        config(&format!("{}/v1", openai.url), &openai.url, &gemini.url),
        None,
    )
    .await;
    for path in gemini_paths {
        let client = crate::support::client();
        let r = client
            .post(format!("{proxy}{path}"))
            .header("x-goog-api-key", "AIza-secret")
            .header("x-api-key", "sk-ant-secret")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    assert!(
        openai.requests().is_empty(),
        "a Gemini request reached OpenAI"
    );
    let seen = gemini.requests();
    assert_eq!(seen.len(), gemini_paths.len());
    for s in &seen {
        assert_eq!(s.header("x-goog-api-key"), Some("AIza-secret"));
        assert_eq!(
            s.header("x-api-key"),
            None,
            "Anthropic's key went to Gemini"
        );
    }
    assert!(
        seen[2].path.contains("key=AIza-query-secret"),
        "{}",
        seen[2].path
    );
    // The two conversations are the proxy's to compact; countTokens passes.
    let metrics = metrics_text(&proxy).await;
    assert_eq!(
        metric(
            &metrics,
            "abridge_requests_total{route=\"gemini\",status=\"200\"}"
        ),
        2.0,
        "{metrics}"
    );
    assert!(
        metric(&metrics, "abridge_passthrough_total{why=\"unmodeled\"}") >= 1.0,
        "{metrics}"
    );
    assert!(!metrics.contains("AIza") && !metrics.contains("sk-ant"));
    let _ = stop.send(());
    let _ = done.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_provider_gets_its_own_credentials_only() {
    let (openai, anthropic) = (recorder(), recorder());
    let (proxy, stop, done) = serve_config(
        config(&format!("{}/v1", openai.url), &anthropic.url, ""),
        None,
    )
    .await;
    let all = [
        KEY,
        ("x-api-key", "sk-ant-secret"),
        ("x-goog-api-key", "AIza-secret"),
        ("api-key", "azure-secret"),
    ];
    let (status, _) = raw(&proxy, "GET", "/v1/files?key=AIza-query&limit=2", &all[..1]);
    assert_eq!(status, 501, "Gemini's by its key, and no Gemini upstream");
    let (status, _) = raw(&proxy, "POST", "/v1/chat/completions?key=AIza-query", &all);
    assert_eq!(status, 200);
    let (status, _) = raw(&proxy, "POST", "/v1/messages?key=AIza-query", &all);
    assert_eq!(status, 200);
    // `/v1/files` with `?key=` is Gemini's by its credential: refused here.
    let seen_openai = openai.requests();
    assert_eq!(seen_openai.len(), 1, "{seen_openai:?}");
    let o = &seen_openai[0];
    assert_eq!(o.header("authorization"), Some("Bearer sk-route-secret"));
    assert_eq!(o.header("api-key"), Some("azure-secret"));
    assert_eq!(o.header("x-api-key"), None);
    assert_eq!(o.header("x-goog-api-key"), None);
    assert!(!o.path.contains("key="), "{}", o.path);
    let seen_anthropic = anthropic.requests();
    assert_eq!(seen_anthropic.len(), 1);
    let a = &seen_anthropic[0];
    assert_eq!(a.header("x-api-key"), Some("sk-ant-secret"));
    assert_eq!(a.header("x-goog-api-key"), None);
    assert_eq!(a.header("api-key"), None);
    assert!(!a.path.contains("key="), "{}", a.path);
    let _ = stop.send(());
    let _ = done.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_the_proxy_does_not_answer_to_is_misdirected() {
    let upstream = recorder();
    let mut c = config(&format!("{}/v1", upstream.url), &upstream.url, "");
    c.serve.allowed_hosts = vec!["abridge.internal".into()];
    let (proxy, stop, done) = serve_config(c, None).await;
    let port = proxy.rsplit(':').next().unwrap().to_owned();
    // A page of attacker.example that pointed its name at 127.0.0.1.
    for target in ["/metrics", "/v1/models", "/v1/chat/completions", "/healthz"] {
        for host in ["attacker.example", &format!("attacker.example:{port}")] {
            let (status, body) = raw_request(&proxy, host, "GET", target, &[KEY]);
            assert_eq!(status, 421, "{host}{target}: {body}");
        }
    }
    assert!(upstream.requests().is_empty());
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("abridge.internal:{port}"),
    ] {
        let (status, body) = raw_request(&proxy, &host, "GET", "/healthz", &[]);
        assert_eq!(status, 200, "{host}: {body}");
    }
    let _ = stop.send(());
    let _ = done.await;
}
