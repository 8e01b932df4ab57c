//! What each request cost and would have cost without abridge: the tokens
//! the client sent and the tokens forwarded (the provider's report when it
//! gives one), dollars at the registry's prices, cache-aware. Settled when
//! the response's usage arrives; summed per tenant and model in memory
//! (what `abridge run` prints) and in `/metrics`, and per day in the store
//! with the request's row.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use abridge::model::Usage;
use abridge::tokens::{Calibrated, Price, Reported};
use abridge_store::{RequestRecord, Totals};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Tenant and model pairs kept apart; the requests of any beyond are summed
/// under [`OTHERS`] (a label set per key a client makes up is a memory
/// leak).
const MAX_LINES: usize = 1024;

/// The tenant the pairs beyond [`MAX_LINES`] are summed under.
const OTHERS: &str = "(others)";

/// What pricing a request needs that its row does not keep.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Basis {
    /// The model's prices, when the registry knows them.
    pub(crate) price: Option<Price>,
    /// Tokens of the session's previous request as its client sent it:
    /// sent whole, that much of this one would have been read from the
    /// provider's cache.
    pub(crate) cached_before: Calibrated,
    /// The model's window, when known.
    pub(crate) window: Option<Calibrated>,
}

impl Basis {
    /// Whether `client` tokens would not have fit the window.
    pub(crate) fn over_window(&self, client: Calibrated) -> bool {
        self.window.is_some_and(|w| client > w)
    }
}

/// Fills `r`'s usage and accounting from the provider's report `usage`.
pub(crate) fn settle(r: &mut RequestRecord, usage: Option<&Usage>, basis: &Basis) {
    let Some(u) = usage else {
        return;
    };
    let reported = u.prompt_tokens();
    r.usage = Some(Reported::new(reported));
    let a = &mut r.account;
    // The same bytes went: the report is what the client sent. Rewritten:
    // the report, and what was left out as abridge counted it.
    let left_out = a.client_tokens.get().saturating_sub(r.tokens.get());
    a.client_tokens = Calibrated::new(match r.compacted {
        false => reported,
        true => reported + left_out,
    });
    a.input_tokens = Some(u.input_tokens);
    a.output_tokens = Some(u.output_tokens);
    a.cache_read_tokens = Some(u.cache_read_tokens);
    a.cache_write_tokens = Some(u.cache_write_tokens);
    a.over_window = basis.over_window(a.client_tokens);
    let Some(price) = basis.price else {
        return;
    };
    let cost = price.cost(u);
    a.cost = Some(cost);
    a.cost_without = match (a.over_window, r.compacted) {
        (true, _) => None,
        (false, false) => Some(cost),
        (false, true) => {
            let client = a.client_tokens;
            // A client that caches (the provider reported reads or writes)
            // would have read its previous request back; one that does not
            // pays the input price for all of it.
            let prompt = match u.cache_read_tokens + u.cache_write_tokens > 0 {
                true => price.prompt_cost(basis.cached_before.min(client), client),
                false => client.get() as f64 * price.input / 1e6,
            };
            Some(prompt + u.output_tokens as f64 * price.output / 1e6)
        }
    };
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpendLabels {
    tenant: String,
    model: String,
}

type Dollars = Counter<f64, AtomicU64>;

/// The running sums since the proxy started.
#[derive(Debug, Default)]
pub(crate) struct Accounts {
    lines: Mutex<HashMap<(String, String), Totals>>,
    requests: Family<SpendLabels, Counter>,
    compared: Family<SpendLabels, Counter>,
    client_tokens: Family<SpendLabels, Counter>,
    forwarded_tokens: Family<SpendLabels, Counter>,
    cost: Family<SpendLabels, Dollars>,
    cost_without: Family<SpendLabels, Dollars>,
    cost_compared: Family<SpendLabels, Dollars>,
    over_window: Family<SpendLabels, Counter>,
    summarizer_input: Family<SpendLabels, Counter>,
    summarizer_output: Family<SpendLabels, Counter>,
    summarizer_cost: Family<SpendLabels, Dollars>,
}

impl Accounts {
    /// Registers the per-tenant and per-model sums.
    pub(crate) fn register(&self, r: &mut Registry) {
        r.register(
            "accounted_requests",
            "Requests forwarded and accounted (their response ended), per tenant and model",
            self.requests.clone(),
        );
        r.register(
            "compared_requests",
            "Requests priced both ways, with abridge and without",
            self.compared.clone(),
        );
        r.register(
            "client_tokens",
            "Prompt tokens the clients sent, in the provider's units (the provider's report, plus what abridge left out)",
            self.client_tokens.clone(),
        );
        r.register(
            "forwarded_tokens",
            "Prompt tokens forwarded upstream, in the provider's units (the provider's report when it gave one)",
            self.forwarded_tokens.clone(),
        );
        r.register(
            "cost_dollars",
            "Dollars of the forwarded requests at the registry's prices (priced models)",
            self.cost.clone(),
        );
        r.register(
            "cost_compared_dollars",
            "Dollars of the requests priced both ways, with abridge",
            self.cost_compared.clone(),
        );
        r.register(
            "cost_without_dollars",
            "Dollars those requests would have cost sent as the client sent them (estimated, cache-aware)",
            self.cost_without.clone(),
        );
        r.register(
            "summarizer_input_tokens",
            "Prompt tokens the LLM summarizers' providers reported, per tenant and summarizer (briefings used or not)",
            self.summarizer_input.clone(),
        );
        r.register(
            "summarizer_output_tokens",
            "Completion tokens the LLM summarizers' providers reported, per tenant and summarizer",
            self.summarizer_output.clone(),
        );
        r.register(
            "summarizer_cost_dollars",
            "Dollars of the LLM summarizers' calls at the registry's prices (priced models)",
            self.summarizer_cost.clone(),
        );
        r.register(
            "over_window_requests",
            "Requests the client sent over the model's window: unanswerable without abridge, never priced as a saving",
            self.over_window.clone(),
        );
    }

    /// Adds a settled request.
    pub(crate) fn add(&self, r: &RequestRecord) {
        let model = r.model.clone().unwrap_or_default();
        let tenant = {
            let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
            let mut key = (r.account.tenant.clone(), model.clone());
            if !lines.contains_key(&key) && lines.len() >= MAX_LINES {
                key.0 = OTHERS.to_owned();
            }
            let line = lines.entry(key.clone()).or_insert_with(|| Totals {
                tenant: key.0.clone(),
                model: key.1.clone(),
                ..Totals::default()
            });
            line.add(r);
            key.0
        };
        let labels = SpendLabels { tenant, model };
        let a = &r.account;
        self.requests.get_or_create(&labels).inc();
        self.client_tokens
            .get_or_create(&labels)
            .inc_by(a.client_tokens.get());
        self.forwarded_tokens
            .get_or_create(&labels)
            .inc_by(r.forwarded().get());
        if let Some(cost) = a.cost {
            self.cost.get_or_create(&labels).inc_by(cost);
        }
        if let Some((with, without)) = a.cost.zip(a.cost_without).filter(|_| !a.over_window) {
            self.compared.get_or_create(&labels).inc();
            self.cost_compared.get_or_create(&labels).inc_by(with);
            self.cost_without.get_or_create(&labels).inc_by(without);
        }
        if a.over_window {
            self.over_window.get_or_create(&labels).inc();
        }
    }

    /// Adds what a summarizer reported a briefing cost `tenant` (`cost`:
    /// in dollars, when its model is priced).
    pub(crate) fn summarized(
        &self,
        tenant: &str,
        summarizer: &str,
        usage: &Usage,
        cost: Option<f64>,
    ) {
        let labels = SpendLabels {
            tenant: self.tenant_line(tenant),
            model: summarizer.to_owned(),
        };
        self.summarizer_input
            .get_or_create(&labels)
            .inc_by(usage.prompt_tokens());
        self.summarizer_output
            .get_or_create(&labels)
            .inc_by(usage.output_tokens);
        if let Some(c) = cost {
            self.summarizer_cost.get_or_create(&labels).inc_by(c);
        }
    }

    /// The tenant's label: its own while the lines are fewer than
    /// `MAX_LINES`, else the line of all others.
    fn tenant_line(&self, tenant: &str) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        match lines.keys().any(|(t, _)| t == tenant) || lines.len() < MAX_LINES {
            true => tenant.to_owned(),
            false => OTHERS.to_owned(),
        }
    }

    /// The sums per tenant and model, by tenant then model.
    pub(crate) fn totals(&self) -> Vec<Totals> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<Totals> = lines.values().cloned().collect();
        all.sort_by(|a, b| (&a.tenant, &a.model).cmp(&(&b.tenant, &b.model)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(compacted: bool, sent: u64, client: u64) -> RequestRecord {
        RequestRecord {
            source: "s".into(),
            at: String::new(),
            model: Some("m".into()),
            tokens: Calibrated::new(sent),
            usage: None,
            compacted,
            snapshot: None,
            trigger: None,
            target: None,
            recalls: 0,
            account: abridge_store::Accounting {
                tenant: "t".into(),
                client_tokens: Calibrated::new(client),
                ..Default::default()
            },
        }
    }

    fn basis(cached_before: u64, window: Option<u64>) -> Basis {
        Basis {
            price: Some(Price::anthropic(3.0, 15.0)),
            cached_before: Calibrated::new(cached_before),
            window: window.map(Calibrated::new),
        }
    }

    #[test]
    fn a_request_sent_as_it_came_costs_the_same_both_ways_at_the_reported_count() {
        let mut r = record(false, 990, 990);
        let u = Usage {
            input_tokens: 1000,
            output_tokens: 10,
            ..Usage::default()
        };
        settle(&mut r, Some(&u), &basis(0, None));
        assert_eq!(r.account.client_tokens.get(), 1000);
        assert_eq!(r.forwarded().get(), 1000);
        assert_eq!(r.account.cost, r.account.cost_without);
        assert!((r.account.cost.unwrap() - (1000.0 * 3.0 + 10.0 * 15.0) / 1e6).abs() < 1e-12);
    }

    #[test]
    fn a_compacted_request_adds_what_it_left_out_and_prices_the_whole_cache_aware() {
        let mut r = record(true, 2_000, 10_000);
        let u = Usage {
            input_tokens: 100,
            cache_read_tokens: 1_900,
            output_tokens: 10,
            ..Usage::default()
        };
        settle(&mut r, Some(&u), &basis(9_000, None));
        assert_eq!(r.account.client_tokens.get(), 10_000);
        let price = Price::anthropic(3.0, 15.0);
        let without =
            price.prompt_cost(Calibrated::new(9_000), Calibrated::new(10_000)) + 10.0 * 15.0 / 1e6;
        assert!((r.account.cost_without.unwrap() - without).abs() < 1e-12);
        assert!(r.account.cost.unwrap() < without);
    }

    #[test]
    fn a_request_over_the_window_is_counted_and_not_priced_as_a_saving() {
        let mut r = record(true, 2_000, 300_000);
        let u = Usage {
            input_tokens: 2_000,
            ..Usage::default()
        };
        settle(&mut r, Some(&u), &basis(0, Some(200_000)));
        assert!(r.account.over_window);
        assert_eq!(r.account.cost_without, None);
        let accounts = Accounts::default();
        accounts.add(&r);
        let t = &accounts.totals()[0];
        assert_eq!((t.over_window, t.compared), (1, 0));
        assert!(t.cost > 0.0);
    }

    #[test]
    fn tenants_beyond_the_bound_are_summed_together() {
        let accounts = Accounts::default();
        for k in 0..MAX_LINES + 10 {
            let mut r = record(false, 1, 1);
            r.account.tenant = format!("t{k}");
            accounts.add(&r);
        }
        let totals = accounts.totals();
        assert_eq!(totals.len(), MAX_LINES + 1);
        let others = totals.iter().find(|t| t.tenant == OTHERS).unwrap();
        assert_eq!(others.requests, 10);
    }
}
