#![allow(clippy::unwrap_used, missing_docs)]
use abridge_model::{Conversation, Part, Role, decode};
use abridge_tokens::{TokenCounter, TokenizerKind};

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    for f in files {
        let convs = decode(&std::fs::read(&f).unwrap()).unwrap();
        for conv in convs.iter().take(1) {
            explore(&f, conv);
        }
    }
}

fn explore(f: &str, conv: &Conversation) {
    let mut o = TokenCounter::new(TokenizerKind::O200kBase);
    let mut e = TokenCounter::new(TokenizerKind::Estimate);
    let calls: Vec<(usize, u64)> = conv
        .messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.meta.usage.map(|u| (i, u.prompt_tokens())))
        .filter(|(i, _)| conv.messages[*i].role == Role::Assistant)
        .collect();
    let mut rows = Vec::new();
    for w in calls.windows(2) {
        let ((a, pa), (b, pb)) = (w[0], w[1]);
        if conv.boundaries.iter().any(|x| x.index > a && x.index <= b) {
            continue;
        }
        if pb <= pa {
            continue;
        }
        let d = pb - pa;
        let msgs = &conv.messages[a..b];
        let ko: Vec<_> = o.count_messages(msgs);
        let ke: Vec<_> = e.count_messages(msgs);
        let so: usize = ko.iter().map(|c| c.total()).sum();
        let se: usize = ke.iter().map(|c| c.total()).sum();
        let reasoning: usize = ko.iter().map(|c| c.reasoning).sum();
        let thinking = msgs
            .iter()
            .any(|m| m.parts.iter().any(|p| matches!(p, Part::Reasoning(_))));
        rows.push((d, so, se, reasoning, thinking, b - a));
        if std::env::var("CSV").is_ok() {
            let sum =
                |f: &dyn Fn(&abridge_tokens::TokenCounts) -> usize| ko.iter().map(f).sum::<usize>();
            let calls: usize = msgs.iter().map(|m| m.tool_calls().count()).sum();
            let results: usize = msgs.iter().map(|m| m.tool_results().count()).sum();
            let fam = if f.contains("claude") { "cc" } else { "ds" };
            let names: Vec<String> = msgs
                .iter()
                .flat_map(|m| m.tool_calls().map(|c| c.name.clone()))
                .collect();
            let out = msgs[0].meta.usage.map_or(0, |u| u.output_tokens);
            let f = &format!(
                "{}|{}|{}",
                f.rsplit('/').next().unwrap(),
                names.join("+"),
                out
            );
            eprintln!(
                "{fam},{d},{},{},{},{},{},{},{},{},{},{},{}",
                sum(&|c| c.text),
                sum(&|c| c.tool_args),
                sum(&|c| c.tool_results),
                sum(&|c| c.images),
                sum(&|c| c.reasoning),
                sum(&|c| c.other),
                b - a,
                calls,
                results,
                se,
                f.rsplit('/').next().unwrap()
            );
        }
    }
    if std::env::var("ROWS").is_ok() {
        for r in rows.iter().take(40) {
            println!(
                "d={} o200k={} chars4={} reasoning={} msgs={}",
                r.0, r.1, r.2, r.3, r.5
            );
        }
        // least squares d = a*o + b*msgs
        let (mut sxx, mut sxy, mut sxz, mut szz, mut szy) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for r in &rows {
            let x = r.1 as f64;
            let z = r.5 as f64;
            let y = r.0 as f64;
            sxx += x * x;
            sxy += x * y;
            sxz += x * z;
            szz += z * z;
            szy += z * y;
        }
        let det = sxx * szz - sxz * sxz;
        let a = (sxy * szz - szy * sxz) / det;
        let b = (sxx * szy - sxz * sxy) / det;
        println!("fit: d = {a:.3}*o200k + {b:.1}*messages");
    }
    let ratios = |k: usize| {
        let mut v: Vec<f64> = rows
            .iter()
            .filter(|r| r.0 > 50)
            .map(|r| {
                if k == 0 {
                    r.1 as f64 / r.0 as f64
                } else {
                    r.2 as f64 / r.0 as f64
                }
            })
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v
    };
    let ro = ratios(0);
    let re = ratios(1);
    let q = |v: &[f64], p: f64| {
        v.get(((v.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "{}: {} steps; o200k/provider p10 {:.2} p50 {:.2} p90 {:.2}; chars4 p10 {:.2} p50 {:.2} p90 {:.2}; steps with reasoning {}",
        f.rsplit('/').next().unwrap(),
        ro.len(),
        q(&ro, 0.1),
        q(&ro, 0.5),
        q(&ro, 0.9),
        q(&re, 0.1),
        q(&re, 0.5),
        q(&re, 0.9),
        rows.iter().filter(|r| r.4).count()
    );
}
